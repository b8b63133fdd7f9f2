"""The registry of Hugging Face model families: one ModelFamily record (model/family.py) per ``model_type``.

Every list of families that greentrain reads is derived here, at the moment it is read, so a family registered
later (``register``) is seen everywhere at once: the readers ``plan --model config.json`` uses, the
``architectures`` prefixes of a config without ``model_type``, the rotary families, and what ``greentrain
experiment`` accepts per task (its config defaults, config keys, decoder start token and LoRA module names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TypeVar

from greentrain.model import hf_encdec, hf_gpt, hf_llama, hf_moe, hf_ssm
from greentrain.model.family import FineTuning, ModelFamily

T = TypeVar("T")

_REGISTRY: dict[str, ModelFamily] = {}
# model_type -> family, read-only and live (what is registered now)
FAMILIES: Mapping[str, ModelFamily] = MappingProxyType(_REGISTRY)


def register(family: ModelFamily) -> ModelFamily:
    """Add one family. A ``model_type`` or ``architectures`` prefix already registered is refused (ValueError):
    two records for one family would make the answer depend on the order of registration."""
    if family.model_type in _REGISTRY:
        raise ValueError(f"model family {family.model_type!r} is already registered")
    taken = {p: f.model_type for f in _REGISTRY.values() for p in f.arch_prefixes}
    clash = [f"{p} ({taken[p]})" for p in family.arch_prefixes if p in taken]
    if clash:
        raise ValueError(f"model family {family.model_type!r}: architectures prefix already registered: "
                         + ", ".join(clash))
    _REGISTRY[family.model_type] = family
    return family


def unregister(model_type: str) -> ModelFamily:
    """Remove one family (a test's or a plug-in's) and return its record; KeyError when it is not registered."""
    return _REGISTRY.pop(model_type)


def model_type_of_architecture(class_name: str) -> str | None:
    """The family whose longest ``architectures`` prefix starts ``class_name`` (Gemma3ForConditionalGeneration is
    gemma3, Gemma3ForCausalLM gemma3_text, Gemma2ForCausalLM gemma2); None when no prefix matches."""
    matches = [(len(p), f.model_type) for f in _REGISTRY.values() for p in f.arch_prefixes
               if class_name.startswith(p)]
    return max(matches)[1] if matches else None


def finetunable(task: str | None = None) -> tuple[ModelFamily, ...]:
    """The families ``greentrain experiment`` builds (for ``task``, or for any), in the order they were
    registered."""
    return tuple(f for f in _REGISTRY.values()
                 if f.finetuning is not None and (task is None or f.finetuning.task == task))


def finetuning(model_type: str) -> FineTuning:
    """The experiment's record of a family it builds; KeyError when it builds none under that name."""
    f = _REGISTRY.get(model_type)
    if f is None or f.finetuning is None:
        raise KeyError(model_type)
    return f.finetuning


class FamilyView(Mapping[str, T]):
    """A read-only, live mapping model_type -> ``pick(family)`` over the families where ``pick`` gives a value,
    for readers that want one of the old per-family lists (predict.ARCH_DEFAULTS, hf_names.CONFIG_KEYS)."""

    def __init__(self, pick: Callable[[ModelFamily], T | None]) -> None:
        self._pick = pick

    def __getitem__(self, model_type: str) -> T:
        f = _REGISTRY.get(model_type)
        value = None if f is None else self._pick(f)
        if value is None:
            raise KeyError(model_type)
        return value

    def __iter__(self) -> Iterator[str]:
        return (mt for mt, f in _REGISTRY.items() if self._pick(f) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# Registration order is the order the experiment lists its families in: t5, bart, pegasus, llama, gpt2.
for _module in (hf_encdec, hf_llama, hf_gpt, hf_moe, hf_ssm):
    for _family in _module.FAMILIES:
        register(_family)
