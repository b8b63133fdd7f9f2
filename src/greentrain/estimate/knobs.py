"""The knobs of estimate/efficiency.py's Efficiency: each field's ``Knob`` metadata (``knob(level, kind, *rules)``)
says which efficiency.yaml entry gives it, how YAML spells and converts it, the rules it must pass and whether a
calibration profile may set it; efficiency.py derives its key lists, parsing, checks and errors from them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greentrain import units
from greentrain.config import as_bool, require
from greentrain.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Knob:
    """What one Efficiency field is: which efficiency.yaml entry says it (``level``: chip or framework, kernel:
    set from ``attention_kernels``, "" : bookkeeping of the loader), what kind of value it takes (``KINDS``) and
    the rules a value must pass, each (test, the one-line rule an error prints). A new knob is one field."""

    level: str
    kind: str
    rules: tuple[tuple[Callable[[Any], bool], str], ...] = ()
    yaml_key: str = ""  # efficiency.yaml's key where it carries another unit (reserved_gib)
    calibrated: bool = False  # a calibration profile (`greentrain calibrate`) may set it

    def __post_init__(self) -> None:
        if self.level not in ("chip", "framework", "kernel", "") or self.kind not in KINDS:
            raise ValueError(f"Knob({self.level!r}, {self.kind!r}): level must be chip, framework, kernel or '', "
                             f"kind one of {', '.join(KINDS)}")

    def parse(self, value: Any, label: str, key: str = "") -> Any:
        """``value`` as read under ``key`` (the field's name, or its ``yaml_key`` in another unit), converted to the
        field's type and SI unit; one line when it is not one."""
        if self.kind == "bool":
            return as_bool(value, label)
        if self.kind in ("choice", "text"):
            return str(value)
        if self.kind == "stages":
            if not (isinstance(value, (list, tuple)) and all(type(z) is int for z in value)):
                raise ConfigError(label, value, "must be a list of whole numbers")
            return tuple(value)
        if self.kind in ("ops", "axes"):
            if not isinstance(value, (list, tuple)):
                raise ConfigError(label, value, "must be a list")
            return tuple(str(z) for z in value)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(label, value, "must be a number") from None
        return units.gib_to_bytes(number) if key and key == self.yaml_key and key.endswith("_gib") else number

    def check(self, name: str, value: Any) -> None:
        shown = list(value) if isinstance(value, tuple) else value
        for ok, rule in self.rules:
            require(ok(value), f"efficiency.{name}", shown, rule)


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


FRACTION = (lambda v: finite(v) and 0 < v <= 1, "must be in (0, 1]")
NON_NEGATIVE = (lambda v: finite(v) and v >= 0, "must be a finite number >= 0")
UNIT_RANGE = (lambda v: finite(v) and 0 <= v <= 1, "must be in [0, 1]")
KERNEL_TIME = (lambda v: finite(v) and 0 <= v <= 1e-4, "must be in [0, 1e-4] s")
NUMERIC_KINDS = ("fraction", "seconds", "bytes", "count", "rate")  # what calibrate may fit, with "bool"
KINDS = (*NUMERIC_KINDS, "bool", "choice", "stages", "ops", "axes", "text")


def at_most(limit: float, unit: str = "") -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v <= limit), f"must be <= {limit:g}{' ' + unit if unit else ''}"


def one_of(choices: tuple[str, ...], rule: str = "") -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in choices), rule or f"must be one of {', '.join(choices)}"


def knob(level: str, kind: str, *rules: tuple[Callable[[Any], bool], str], default: Any = dataclasses.MISSING,
         yaml_key: str = "", calibrated: bool | None = None) -> Any:
    """A dataclass field of Efficiency carrying its Knob (``calibrated``: numbers and flags unless told)."""
    fit = kind in (*NUMERIC_KINDS, "bool") if calibrated is None else calibrated
    meta = {"knob": Knob(level, kind, rules, yaml_key, fit)}
    return dataclasses.field(default=default, metadata=meta)
