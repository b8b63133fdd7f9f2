"""Per-module forward and backward hooks: time, memory and FLOPs per module and phase (seed 000).

Forward: ``register_forward_pre_hook`` / ``register_forward_hook`` bracket each call.
Backward, ``backward="full"``: ``register_full_backward_pre_hook`` opens a module's backward when the gradient
of its outputs is ready; it closes at the later of ``register_full_backward_hook`` (gradient of its inputs)
and the last ``register_post_accumulate_grad_hook`` of its parameters. ``backward="graph"`` (the default)
marks the same two events on the autograd graph instead: a pre-hook on the grad_fn of the module's first
output (``Node.register_prehook``: its gradient is ready) and a hook on each input that needs a gradient
(``Tensor.register_hook``: its gradient is complete); their handles are removed when the cycle closes, so an
input tensor reused across steps does not collect hooks. The full hooks wrap every input and output of
every hooked module in an identity autograd Function on every call: on the GPT-like benchmark model no-op
full hooks alone cost about 1.6 % of a CPU training step (2026-11-21, one thread). The one difference: an
input also used outside the module (a shared encoder output) completes its gradient only after every
user's backward, so that module's backward span ends later than with the full hooks.
The parameter hooks matter where the module hooks fire back to back: a module whose inputs need no gradient
(the embedding of token ids) gets its backward hook at once, before its weight gradient is computed. The root
module's backward runs from the first backward event of the cycle to the last parameter gradient (its output
may be a dict, which full-backward hooks do not see).

FLOPs: a ``LocalFlopCounter`` (torch.utils.flop_counter) runs only for the first forward+backward cycle of
each input signature (shapes, dtypes, grad mode); later cycles with that signature reuse the cached
per-module counts, so steady-state overhead is the timing hooks alone.
torch.compile: a FLOP counter (a TorchDispatchMode) active in a compiled module's call makes dynamo run that
module eagerly from then on (torch 2.11-2.13; on an H200 a compiled Llama 3.2 1B step went from 0.276 s to
the eager 0.321 s under the hooks, BENCHMARKS.md), so a model holding a compiled module (``torch.compile(m)``'s
wrapper, or ``m.compile()``) gets no FLOP counter, and no hooks inside a compiled module (a hook traced into a
compiled frame breaks its graph): the measurement notes it, and FLOPs come from a plan or an uncompiled run.
CUDA memory: the step's figure is ``torch.cuda.max_memory_allocated`` so far; the peak is never reset, so the
training's own readings of it (Trainer, Lightning, the user's) stay whole.
Timing: CUDA events on GPU (resolved at the step end), ``time.perf_counter`` otherwise.
Step path: closures over per-step lists cleared in place, no FLOP-counter read outside a counting cycle,
``time.perf_counter`` called directly on CPU (BENCHMARKS.md, "Session 11: Tracker overhead").
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from greentrain.config import require
from greentrain.measure.flops import LocalFlopCounter
from greentrain.measure.meters import RssReader
from greentrain.measure.selection import COMPILED_NOTE, is_compiled, select_modules

__all__ = ["BACKWARD_MODES", "COMPILED_NOTE", "ModuleHooks", "is_compiled", "select_modules"]

BACKWARD_MODES = ("graph", "full")


class _Clock:
    """perf_counter on CPU; CUDA events on GPU (elapsed_time is in ms, resolved after a sync)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.now: Callable[[], Any] = self._event if cuda else time.perf_counter  # no frame on CPU

    @staticmethod
    def _event() -> Any:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def elapsed_s(self, a: Any, b: Any) -> float:  # CUDA events (finish_step subtracts CPU times itself)
        b.synchronize()
        return float(a.elapsed_time(b)) / 1e3


@dataclass(slots=True)
class _Cycle:
    """One forward (and its backward) of the root module."""

    key: tuple[Any, ...]
    counting: bool
    flop_at_start: int = 0
    forward_flop: int = 0
    backward_seen: bool = False
    bwd_start: Any = None
    bwd_end: Any = None
    mod_fwd_flop: list[int] = field(default_factory=list)
    mod_bwd_flop: list[int] = field(default_factory=list)


def _first_grad_fn(out: Any) -> Any:
    """The autograd node of a module's first output tensor that has one (outputs: tensor, tuple, list, dict,
    or a ModelOutput-like mapping)."""
    if isinstance(out, torch.Tensor):
        return out.grad_fn
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
    for x in items:
        node = _first_grad_fn(x)
        if node is not None:
            return node
    return None


def _signature(args: Any, kwargs: Any) -> tuple[Any, ...]:
    leaves = list(args) + [kwargs[k] for k in sorted(kwargs)]
    sig: list[Any] = [torch.is_grad_enabled()]
    for x in leaves:
        if isinstance(x, torch.Tensor):
            sig.append((tuple(x.shape), x.dtype))
    return tuple(sig)


class ModuleHooks:
    """Hooks on a model's modules at a given depth; ``finish_step()`` returns that step's figures."""

    def __init__(self, model: nn.Module, depth: int | None = 1, count_flops: bool = True,
                 backward: str = "graph") -> None:
        require(backward in BACKWARD_MODES, "backward", backward, f"must be one of {', '.join(BACKWARD_MODES)}")
        self.backward = backward
        self.model = model
        self.mods = select_modules(model, depth)
        self.names = [n for n, _ in self.mods]
        cuda = any(p.is_cuda for p in model.parameters())
        self.clock = _Clock(cuda)
        self.cuda = cuda
        self.compiled = any(is_compiled(m) for m in model.modules())
        self.count_flops = count_flops and not self.compiled
        self.flop_note = COMPILED_NOTE if count_flops and self.compiled else ""
        self._rss = None if cuda else RssReader()
        self._read_memory: Callable[[], float] = (
            (lambda: float(torch.cuda.memory_allocated())) if cuda else self._rss.read_bytes)  # type: ignore[union-attr]
        n = len(self.mods)
        # totals over the whole run (per module), published in the "modules" record
        self.total_fwd_s, self.total_bwd_s = [0.0] * n, [0.0] * n
        self.total_fwd_flop, self.total_bwd_flop = [0.0] * n, [0.0] * n
        self.calls, self.memory_bytes = [0] * n, [0.0] * n
        self._cache: dict[tuple[Any, ...], tuple[int, int, list[int], list[int]]] = {}
        self._counter: LocalFlopCounter | None = None
        self._cycle: _Cycle | None = None
        self._tokens = self._samples = 0
        self._root_fwd_start: Any = None
        # per-step state, cleared in place by _reset_step (the hooks' closures hold these lists)
        self._fwd_open: list[list[tuple[Any, int]]] = [[] for _ in range(n)]
        self._bwd_open: list[list[Any] | None] = [None] * n  # [start, end, flop_at_start, opening order]
        self._pairs: list[tuple[int, int, Any, Any]] = []  # (module or -1 for root, 0 fwd / 1 bwd, a, b)
        self._reset_step()
        self._handles: list[Any] = []
        self._graph_handles: list[Any] = []  # this cycle's autograd-graph hooks (backward="graph")
        self._install()

    # -- installation -----------------------------------------------------------------------------
    def _install(self) -> None:
        # The back-to-back case handled by the parameter hooks (see the module docstring) is expected here.
        warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed "
                                "with respect to module outputs")
        h = self._handles
        h.append(self.model.register_forward_pre_hook(self._root_pre, with_kwargs=True))
        h.append(self.model.register_forward_hook(self._root_post))
        owners: dict[int, list[int]] = {}
        graph = self.backward == "graph"
        for i, (_, mod) in enumerate(self.mods):
            h.append(mod.register_forward_pre_hook(self._fwd_pre(i, graph)))
            h.append(mod.register_forward_hook(self._fwd_post(i, graph)))
            if not graph:
                h.append(mod.register_full_backward_pre_hook(self._bwd_pre(i)))
                h.append(mod.register_full_backward_hook(self._bwd_post(i)))
            for p in mod.parameters():
                owners.setdefault(id(p), []).append(i)
        for p in self.model.parameters():
            if p.requires_grad:
                h.append(p.register_post_accumulate_grad_hook(self._param_hook(owners.get(id(p), []))))

    def remove(self) -> None:
        self._close_cycle()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._rss is not None:
            self._rss.close()
            self._rss = None

    # -- per-step state ---------------------------------------------------------------------------
    def _reset_step(self) -> None:
        for stack in self._fwd_open:
            stack.clear()
        self._bwd_open[:] = [None] * len(self._bwd_open)
        self._bwd_order = 0
        self._pairs.clear()
        self.step_flop = 0.0
        self.step_peak_memory_bytes = 0.0

    def _flop(self) -> int:
        return self._counter.total() if self._counter is not None else 0

    # -- root: cycles and FLOP counting -----------------------------------------------------------
    def _root_pre(self, _mod: nn.Module, args: Any, kwargs: Any) -> None:
        self._close_cycle()
        key = _signature(args, kwargs)
        if torch.is_grad_enabled():
            self._count_batch(args, kwargs)
        counting = self.count_flops and key not in self._cache
        if counting:
            self._counter = LocalFlopCounter()
            self._counter.__enter__()
        n = len(self.mods) if counting else 0  # per-module FLOPs are written only while counting
        self._cycle = _Cycle(key=key, counting=counting, mod_fwd_flop=[0] * n, mod_bwd_flop=[0] * n)
        self._root_fwd_start = self.clock.now()

    def enter_root_call(self, args: Any, kwargs: Any) -> None:
        """For hooks installed while the root is being called (greentrain.auto): open this call by hand."""
        self._root_pre(self.model, args, kwargs)

    def _count_batch(self, args: Any, kwargs: Any) -> None:
        """Tokens and samples of a training forward: the first integer tensor input (token ids)."""
        ids = kwargs.get("input_ids")
        if ids is None:
            ids = next((x for x in args if isinstance(x, torch.Tensor) and not x.is_floating_point()), None)
        if isinstance(ids, torch.Tensor) and ids.dim() >= 1:
            self._tokens += ids.numel()
            self._samples += ids.shape[0]

    def pop_batch_counts(self) -> tuple[float, float]:
        """(tokens, samples) seen in training forwards since the last call."""
        out = (float(self._tokens), float(self._samples))
        self._tokens = self._samples = 0
        return out

    def _root_post(self, _mod: nn.Module, _args: Any, _out: Any) -> None:
        if self._root_fwd_start is None:  # hooks installed during this call (greentrain.auto)
            return
        self._pairs.append((-1, 0, self._root_fwd_start, self.clock.now()))
        self._root_fwd_start = None
        if self._cycle is not None:
            self._cycle.forward_flop = self._flop()

    def _close_cycle(self) -> None:
        """End the current cycle: close open backward spans, store or apply the FLOP counts."""
        if self._graph_handles:
            for handle in self._graph_handles:
                handle.remove()
            self._graph_handles.clear()
        for i, span in enumerate(self._bwd_open):
            if span is not None:
                self._close_bwd(i)
        c, self._cycle = self._cycle, None
        if c is None:
            return
        if c.backward_seen and c.bwd_end is not None:
            self._pairs.append((-1, 1, c.bwd_start, c.bwd_end))
        if c.counting and self._counter is not None:
            total = self._counter.total()
            self._counter.__exit__(None, None, None)
            self._counter = None
            self._cache[c.key] = (c.forward_flop, total - c.forward_flop, c.mod_fwd_flop, c.mod_bwd_flop)
        fwd, bwd, mod_fwd, mod_bwd = self._cache.get(c.key, (0, 0, [], []))
        self.step_flop += fwd + (bwd if c.backward_seen else 0)
        for i in range(len(mod_fwd)):
            self.total_fwd_flop[i] += mod_fwd[i]
            if c.backward_seen:
                self.total_bwd_flop[i] += mod_bwd[i]

    # -- per-module hooks: closures over the per-step lists; the FLOP counter is read only while one runs ----
    def _fwd_pre(self, i: int, graph: bool) -> Callable[..., None]:
        bwd_post = self._bwd_post(i)
        now, stack, handles, grad_mode = self.clock.now, self._fwd_open[i], self._graph_handles, torch.is_grad_enabled

        def on_input_grad(_grad: torch.Tensor) -> None:
            bwd_post(None, None, None)

        def hook(_mod: nn.Module, args: Any) -> None:
            if graph and grad_mode():
                for x in args:
                    if isinstance(x, torch.Tensor) and x.requires_grad:
                        handles.append(x.register_hook(on_input_grad))
            stack.append((now(), 0 if self._counter is None else self._counter.total()))

        return hook

    def _fwd_post(self, i: int, graph: bool) -> Callable[..., None]:
        bwd_pre = self._bwd_pre(i)
        now, stack, pairs, handles = self.clock.now, self._fwd_open[i], self._pairs, self._graph_handles
        calls, peak, memory = self.calls, self.memory_bytes, self._read_memory

        def on_output_grad(_grads: Any) -> None:
            bwd_pre(None, None)

        def hook(_mod: nn.Module, _args: Any, out: Any) -> None:
            t = now()
            if graph:
                first = out.grad_fn if isinstance(out, torch.Tensor) else _first_grad_fn(out)
                if first is not None:
                    handles.append(first.register_prehook(on_output_grad))
            if not stack:  # hooks installed during this call
                return
            start, f0 = stack.pop()
            pairs.append((i, 0, start, t))
            calls[i] += 1
            mem = memory()
            if mem > peak[i]:
                peak[i] = mem
            c = self._cycle
            if c is not None and c.counting:
                c.mod_fwd_flop[i] += self._flop() - f0

        return hook

    def _bwd_pre(self, i: int) -> Callable[..., None]:
        now, bwd_open = self.clock.now, self._bwd_open

        def hook(_mod: nn.Module, _grad_out: Any) -> None:
            if bwd_open[i] is not None:
                self._close_bwd(i)
            t = now()
            self._bwd_order += 1
            bwd_open[i] = [t, t, 0 if self._counter is None else self._counter.total(), self._bwd_order]
            c = self._cycle
            if c is not None and not c.backward_seen:  # the cycle's first backward event
                c.backward_seen, c.bwd_start = True, t

        return hook

    def _bwd_post(self, i: int) -> Callable[..., None]:
        now, bwd_open = self.clock.now, self._bwd_open

        def hook(_mod: nn.Module, _grad_in: Any, _grad_out: Any) -> None:
            span = bwd_open[i]
            if span is not None:
                span[1] = now()
                self._note_bwd_flop(i, span)

        return hook

    def _param_hook(self, owners: list[int]) -> Callable[[torch.Tensor], None]:
        """A parameter's gradient is complete: the cycle's backward extends to now, and so does the backward
        span of the owner running now. With tied weights (GPT-2's lm_head and wte) the gradient completes only
        after the last user's backward, so extending every owner gave lm_head the whole backward from its own
        to the embedding's (16x its forward FLOPs); the owner whose backward opened last is the one running."""
        now, bwd_open = self.clock.now, self._bwd_open
        only = owners[0] if len(owners) == 1 else -1  # one owner: no search

        def hook(_p: torch.Tensor) -> None:
            t = now()
            c = self._cycle
            if c is not None:
                if not c.backward_seen:
                    c.backward_seen, c.bwd_start = True, t
                c.bwd_end = t
            if only >= 0:
                i = only
            else:
                open_owners = [j for j in owners if bwd_open[j] is not None]
                if not open_owners:
                    return
                i = max(open_owners, key=lambda j: bwd_open[j][3])  # type: ignore[index]
            span = bwd_open[i]
            if span is None:
                return
            span[1] = t
            if c is not None and c.counting:
                c.mod_bwd_flop[i] = self._flop() - span[2]

        return hook

    def _note_bwd_flop(self, i: int, span: list[Any]) -> None:
        c = self._cycle
        if c is not None and c.counting:
            c.mod_bwd_flop[i] = self._flop() - span[2]

    def _close_bwd(self, i: int) -> None:
        span = self._bwd_open[i]
        assert span is not None
        self._pairs.append((i, 1, span[0], span[1]))
        self._bwd_open[i] = None

    # -- step end ---------------------------------------------------------------------------------
    def finish_step(self) -> dict[str, float]:
        """Resolve the step's timings, add them to the run totals; returns the step's figures."""
        self._close_cycle()
        root = [0.0, 0.0]
        elapsed = self.clock.elapsed_s if self.cuda else None  # CPU: perf_counter floats, subtracted here
        for i, phase, a, b in self._pairs:
            dt = b - a if elapsed is None else elapsed(a, b)
            if i < 0:
                root[phase] += dt
            elif phase == 0:
                self.total_fwd_s[i] += dt
            else:
                self.total_bwd_s[i] += dt
        out = {"forward_s": root[0], "backward_s": root[1], "flop": self.step_flop}
        if self.cuda:
            out["peak_cuda_bytes"] = float(torch.cuda.max_memory_allocated())
            out["peak_cuda_reserved_bytes"] = float(torch.cuda.max_memory_reserved())  # with fragmentation
        self._reset_step()
        return out

    def module_records(self) -> list[dict[str, Any]]:
        return [{"name": n, "calls": self.calls[i], "forward_s": self.total_fwd_s[i],
                 "backward_s": self.total_bwd_s[i], "forward_flop": self.total_fwd_flop[i],
                 "backward_flop": self.total_bwd_flop[i], "memory_bytes": self.memory_bytes[i]}
                for i, n in enumerate(self.names)]
