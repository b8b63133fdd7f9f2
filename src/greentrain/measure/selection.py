"""Which modules the hooks go on (measure/hooks.py): a depth of calls below the root, never inside a compiled
module (torch.compile's wrapper is hooked, its contents are not: a hook traced into a compiled frame breaks its
graph, and a FLOP counter in its call makes dynamo run it eagerly for good)."""

from __future__ import annotations

from torch import nn

from greentrain.config import require

_CONTAINERS = (nn.ModuleList, nn.ModuleDict)


COMPILED_NOTE = ("FLOPs not counted: the model holds a torch.compile'd module, and torch's FLOP counter would make "
                 "it run eagerly; take FLOPs from `greentrain plan` or an uncompiled run")


def is_compiled(mod: nn.Module) -> bool:
    """``torch.compile(m)``'s wrapper (OptimizedModule) or a module compiled in place (``m.compile()``)."""
    return type(mod).__name__ == "OptimizedModule" or getattr(mod, "_compiled_call_impl", None) is not None


def _wrapped(mod: nn.Module) -> tuple[str, nn.Module] | None:
    """The one child a pure wrapper holds (no parameters of its own, one child that is not a leaf: peft's
    PeftModel and LoraModel, DistributedDataParallel's ``module``), else None."""
    children = list(mod.named_children())
    if isinstance(mod, _CONTAINERS) or len(children) != 1 or isinstance(children[0][1], _CONTAINERS) \
            or is_compiled(children[0][1]):
        return None
    if any(True for _ in mod.parameters(recurse=False)) or not any(True for _ in children[0][1].children()):
        return None
    return children[0]


def select_modules(model: nn.Module, depth: int | None) -> list[tuple[str, nn.Module]]:
    """Modules to hook, root excluded: those ``depth`` call-levels down (ModuleList/ModuleDict do not
    count as a level: they are never called, nor does a pure wrapper's one child: a peft or DDP model shows its
    model's modules), plus shallower leaves; ``depth=None``: every leaf. Nothing inside a compiled module: its
    wrapper (OptimizedModule) is hooked, its contents are not."""
    require(depth is None or depth >= 1, "depth", depth, "must be >= 1 (or None for every leaf)")
    out: list[tuple[str, nn.Module]] = []

    def walk(prefix: str, mod: nn.Module, level: int) -> None:
        if is_compiled(mod):
            return
        if (inner := _wrapped(mod)) is not None:
            walk(f"{prefix}.{inner[0]}" if prefix else inner[0], inner[1], level)
            return
        for name, child in mod.named_children():
            qual = f"{prefix}.{name}" if prefix else name
            if isinstance(child, _CONTAINERS):
                walk(qual, child, level)
                continue
            is_leaf = not any(True for _ in child.children())
            if getattr(child, "_compiled_call_impl", None) is not None:
                continue  # compiled in place: its hooks would run inside the compiled frame
            if is_leaf or type(child).__name__ == "OptimizedModule" or (depth is not None and level + 1 == depth):
                out.append((qual, child))
            else:
                walk(qual, child, level + 1)

    walk("", model, 0)
    return out
