"""The result kinds of ``greentrain calibrate`` and ``greentrain validate`` (see results/view.py for the rules;
registered by results/codec.py). Written before 0.2.0 as ``greentrain-calibration`` and
``greentrain-validation``: those names are read back as these kinds."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from greentrain.results.view import ResultView, typed

_view = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)


@_view
class CalibrationProfile(ResultView):
    """``greentrain calibrate -o PROFILE.yaml`` (calibrate/profile.py): the fitted constants of one chip and
    framework with their provenance; read back by estimate.efficiency.with_calibration.

    Schema 2: the memory constant fitted is the allocator's fragmentation (1, or no version: reserved bytes
    fitted against the device total, which with_calibration refuses, asking for a refit)."""

    KIND: ClassVar[str] = "calibration"
    SCHEMA: ClassVar[int] = 2
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain-calibration",)
    constants: dict[str, Any] = typed("map")
    chip: str | None = typed("str", required=False)
    framework: str | None = typed("str", required=False)
    provenance: dict[str, Any] | None = typed("map", required=False)
    error: dict[str, Any] | None = typed("map", required=False)


@_view
class ValidationResult(ResultView):
    """``greentrain validate --json`` (report/validate.py): every run predicted against its measurement, and
    the scores. Schema 2: a row's peak_memory_gib is the allocator's peak (1: the device total, now
    device_memory_gib)."""

    KIND: ClassVar[str] = "validation"
    SCHEMA: ClassVar[int] = 2
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain-validation",)
    settings: dict[str, Any] = typed("map")
    rows: tuple[dict[str, Any], ...] = typed("maps")
    summary: dict[str, Any] = typed("map")
