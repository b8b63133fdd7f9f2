"""Measure real training: module hooks, FLOPs, time, memory, energy meters, Tracker, integrations.

torch is imported only when a torch-backed name is used (``Tracker``, ``ModuleHooks``, ``swap_forward``...);
``summary``, ``records``, ``meters``, ``outputs`` and ``compare`` work without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Tracker": "greentrain.measure.tracker",
    "ModuleHooks": "greentrain.measure.hooks",
    "LocalFlopCounter": "greentrain.measure.flops",
    "swap_forward": "greentrain.measure.swap",
    "custom_forward": "greentrain.measure.swap",
    "compare_forward": "greentrain.measure.swap",
    "GreentrainTrainerCallback": "greentrain.measure.hf",
    "GreentrainLightningCallback": "greentrain.measure.lightning",
    "GreentrainAccelerateTracker": "greentrain.measure.accelerate",
    "Measurement": "greentrain.measure.summary",
    "summarize": "greentrain.measure.summary",
    "read_jsonl": "greentrain.measure.records",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'greentrain.measure' has no attribute {name!r}")
