"""Tracker settings from ``GREENTRAIN_*`` environment variables (docs/track.md has the table).

An argument given to ``Tracker(...)`` wins; a setting left out is read from its environment variable, else its
built-in default. So a training script that builds ``Tracker()`` (or a Trainer/Lightning/Accelerate callback)
can be configured from a job file without code changes: ``GREENTRAIN_REGION=fr GREENTRAIN_PUE=1.2 python
train.py``. A malformed value is a ConfigError naming the variable, its value and the rule.
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greentrain.config import BOUNDS
from greentrain.errors import ConfigError


class Unset(enum.Enum):
    """The default of a Tracker argument that was not given (then the environment, then the built-in)."""

    UNSET = 0


UNSET = Unset.UNSET
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE + _FALSE:
        return low in _TRUE
    raise ValueError(f"must be one of {', '.join(_TRUE + _FALSE)}")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


def _int(text: str) -> int:
    return int(text)


def _depth(text: str) -> int | None:
    return None if text.strip().lower() in ("leaf", "none", "all") else int(text)


def _optional_bool(text: str) -> bool | None:
    return None if text.strip().lower() in ("auto", "none", "") else _bool(text)


@dataclass(frozen=True, slots=True)
class EnvSetting:
    env: str
    parse: Callable[[str], Any]
    default: Any
    meaning: str
    bound: str = ""  # config.BOUNDS' range a value from the variable must be in (checked naming the variable)


# argument of Tracker -> its variable; keep docs/track.md's table in step (tests/unit/measure/test_settings.py)
SETTINGS: dict[str, EnvSetting] = {
    "region": EnvSetting("GREENTRAIN_REGION", str, None, "region code for CO2e (fr, us-east-1, azure/westus2)"),
    "grid_g_per_kwh": EnvSetting("GREENTRAIN_GRID_G_PER_KWH", _float, None, "grid intensity instead of a region",
                                 "grid_g_co2e_per_kwh"),
    "pue": EnvSetting("GREENTRAIN_PUE", _float, None, "facility PUE (default: the region's, else 1.0)", "pue"),
    "out_dir": EnvSetting("GREENTRAIN_OUT_DIR", str, "greentrain-out", "output folder"),
    "depth": EnvSetting("GREENTRAIN_DEPTH", _depth, 1, "module depth of the hooks; leaf: every leaf"),
    "count_flops": EnvSetting("GREENTRAIN_COUNT_FLOPS", _bool, True, "count FLOPs in the hooks"),
    "hooks": EnvSetting("GREENTRAIN_HOOKS", _bool, True, "module hooks at all (off: time and energy only)"),
    "meters": EnvSetting("GREENTRAIN_METERS", _bool, True, "energy meters (off: no energy)"),
    "cpu_tdp_w": EnvSetting("GREENTRAIN_CPU_TDP_W", _float, None, "CPU package power instead of the lookup",
                            "cpu_tdp_w"),
    "interval_s": EnvSetting("GREENTRAIN_INTERVAL_S", _float, 0.5, "energy sampling period", "sample_interval_s"),
    "project_name": EnvSetting("GREENTRAIN_PROJECT_NAME", str, "greentrain", "emissions.csv project_name"),
    "print_summary": EnvSetting("GREENTRAIN_PRINT_SUMMARY", _bool, True, "print the summary at stop"),
    "write_outputs": EnvSetting("GREENTRAIN_WRITE_OUTPUTS", _bool, True, "write measurement.json and the rest"),
    "jsonl_name": EnvSetting("GREENTRAIN_JSONL_NAME", str, None, "record file name (default greentrain.jsonl)"),
    "model_parallel_size": EnvSetting("GREENTRAIN_MODEL_PARALLEL_SIZE", _int, 1, "ranks sharing one batch"),
    "step_on_optimizer": EnvSetting("GREENTRAIN_STEP_ON_OPTIMIZER", _optional_bool, None,
                                    "a step at each optimizer step (auto: on for the decorator)"),
    "backward_hooks": EnvSetting("GREENTRAIN_BACKWARD_HOOKS", str, "graph", "graph or full"),
    "peak_flop_per_s": EnvSetting("GREENTRAIN_PEAK_FLOP_PER_S", _float, None,
                                  "the device's peak FLOP/s, for MFU (or GREENTRAIN_CHIP)"),
    "chip": EnvSetting("GREENTRAIN_CHIP", str, None, "catalog chip (h100-sxm...), for MFU at `precision`"),
    "precision": EnvSetting("GREENTRAIN_PRECISION", str, "bf16", "precision of the chip's peak for MFU"),
}


def resolve(name: str, given: object) -> Any:
    """``given`` unless UNSET; else the environment variable of ``name`` parsed; else its default."""
    if given is not UNSET:
        return given
    setting = SETTINGS[name]
    raw = os.environ.get(setting.env)
    if raw is None or raw == "":
        return setting.default
    try:
        value = setting.parse(raw)
    except ValueError as e:
        rule = str(e) if str(e).startswith("must") else f"must be a {setting.parse.__name__.strip('_')}"
        raise ConfigError(setting.env, raw, rule) from None
    if setting.bound:
        BOUNDS[setting.bound].check(value, setting.env)
    return value
