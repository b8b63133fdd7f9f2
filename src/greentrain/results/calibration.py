"""The result kinds of ``greentrain calibrate`` and ``greentrain validate`` (see results/view.py for the rules;
registered by results/codec.py). Written before 0.2.0 as ``greentrain-calibration`` and
``greentrain-validation``: those names are read back as these kinds."""

from __future__ import annotations

from typing import Any, ClassVar

from greentrain.results.view import ResultView, view


@view
class CalibrationProfile(ResultView):
    """``greentrain calibrate -o PROFILE.yaml`` (calibrate/profile.py): the fitted constants of one chip and
    framework with their provenance; read back by estimate.efficiency.with_calibration.

    Schema 2: the memory constant fitted is the allocator's fragmentation (1, or no version: reserved bytes
    fitted against the device total, which with_calibration refuses, asking for a refit)."""

    KIND: ClassVar[str] = "calibration"
    SCHEMA: ClassVar[int] = 2
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain-calibration",)
    constants: dict[str, Any]
    chip: str | None = None
    framework: str | None = None
    provenance: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@view
class ValidationResult(ResultView):
    """``greentrain validate --json`` (report/validate.py): every run predicted against its measurement, and
    the scores. Schema 2: a row's peak_memory_gib is the allocator's peak (1: the device total, now
    device_memory_gib)."""

    KIND: ClassVar[str] = "validation"
    SCHEMA: ClassVar[int] = 2
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain-validation",)
    settings: dict[str, Any]
    rows: tuple[dict[str, Any], ...]
    summary: dict[str, Any]
