"""`greentrain compare`: predicted (``greentrain plan --json``) against measured (``measurement.json``), the
relative errors as a Rich table or JSON.

Predicted keys: step_time_s, tokens_per_s, mfu, flop_per_step (model FLOPs), memory_bytes_per_device
({"total": ...}), energy_kwh and run_time_s. Measured keys: the Measurement JSON. Energy is compared per
step (a plan covers the whole run, a measurement only the steps it saw): predicted energy_kwh /
(run_time_s / step_time_s) against the measured energy_j_per_step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain import units
from greentrain.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class ComparisonRow:
    quantity: str  # with its unit, e.g. "step_time_s"
    predicted: float
    measured: float

    @property
    def relative_error(self) -> float | None:
        """(predicted - measured) / measured; None when nothing was measured."""
        return (self.predicted - self.measured) / self.measured if self.measured else None


def _num(data: dict[str, Any], key: str, what: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, dict):  # memory_bytes_per_device: {"total": ..., breakdown}
        value = value.get("total")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what}.{key}", value, "must be a number")
    return float(value)


def _predicted_energy_j_per_step(pred: dict[str, Any]) -> float | None:
    energy, run_s, step_s = (_num(pred, k, "predicted") for k in ("energy_kwh", "run_time_s", "step_time_s"))
    if energy is None or not run_s or not step_s:
        return None
    return units.kwh_to_j(energy) / (run_s / step_s)


PAIRS = (("step_time_s", "step_time_s"), ("tokens_per_s", "tokens_per_s"), ("flop_per_step", "flop_per_step"),
         ("memory_bytes_per_device", "memory_bytes"), ("mfu", "mfu"))


def compare(predicted: dict[str, Any], measured: dict[str, Any]) -> list[ComparisonRow]:
    """Rows for every quantity present on both sides; ConfigError when they share none."""
    rows = []
    for p_key, m_key in PAIRS:
        p, m = _num(predicted, p_key, "predicted"), _num(measured, m_key, "measured")
        if p is not None and m is not None:
            rows.append(ComparisonRow(quantity=m_key, predicted=p, measured=m))
    p_e, m_e = _predicted_energy_j_per_step(predicted), _num(measured, "energy_j_per_step", "measured")
    if p_e is not None and m_e is not None:
        rows.append(ComparisonRow(quantity="energy_j_per_step", predicted=p_e, measured=m_e))
    if not rows:
        keys = ", ".join(k for k, _ in PAIRS)
        raise ConfigError("predicted", sorted(predicted)[:8], f"no quantity in common with the measurement "
                                                                 f"(expected some of: {keys}, energy_kwh)")
    return rows


# Keys only a prediction (`greentrain plan --json`) writes, and keys only a measurement writes (both write
# num_steps: a plan's run length, a measurement's steps seen)
PREDICTION_KEYS = ("mfu", "step_breakdown_s", "memory_bytes_per_device")
MEASUREMENT_KEYS = ("meters", "status")


def is_prediction(data: dict[str, Any]) -> bool:
    if data.get("kind") == "plan":
        return True
    return any(k in data for k in PREDICTION_KEYS) and not any(k in data for k in MEASUREMENT_KEYS)


def check_kinds(predicted: dict[str, Any], measured: dict[str, Any], measured_path: str = "") -> None:
    """A prediction is never taken as a measurement: ``compare PLAN.json PLAN.json`` reported +0.0 %."""
    if is_prediction(measured):
        raise ConfigError("measured", measured_path or "the second file",
                          "is a prediction (greentrain plan --json), not a measurement: give the measurement.json "
                          "of greentrain track or a Tracker")


SAME_RUN_RATIO = 2.0  # work per step differing by more than this: the two files describe different jobs


def mismatch_warnings(predicted: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    """Warnings when the plan and the measurement cannot describe the same job: model FLOPs or tokens per
    step differing by more than SAME_RUN_RATIO (their relative errors would then say nothing about the
    model's accuracy)."""
    out = []
    tokens_m = _num(measured, "tokens", "measured")
    steps_m = _num(measured, "num_steps", "measured")
    per_step = {"flop_per_step": (_num(predicted, "flop_per_step", "predicted"),
                                  _num(measured, "flop_per_step", "measured")),
                "tokens per step": (_num(predicted, "tokens_per_step", "predicted"),
                                    tokens_m / steps_m if tokens_m and steps_m else None)}
    for name, (p, m) in per_step.items():
        if p and m and max(p / m, m / p) > SAME_RUN_RATIO:
            out.append(f"{name}: predicted {p:.4g}, measured {m:.4g} ({max(p / m, m / p):,.3g}x apart): "
                       f"the plan and the measurement look like different jobs")
    return out


def comparison_to_dict(rows: list[ComparisonRow], warnings: list[str]) -> dict[str, Any]:
    return {"rows": [{"quantity": r.quantity, "predicted": r.predicted, "measured": r.measured,
                      "relative_error": r.relative_error} for r in rows], "warnings": warnings}


def render_comparison(rows: list[ComparisonRow], warnings: list[str], console: Console | None = None) -> None:
    """The rows as a table (predicted, measured, signed relative error), then one line per warning."""
    table = Table(title="predicted vs measured")
    for col in ("quantity", "predicted", "measured", "error"):
        table.add_column(col, justify="left" if col == "quantity" else "right")
    for r in rows:
        err = "n/a" if r.relative_error is None else f"{r.relative_error:+.1%}"
        table.add_row(r.quantity, f"{r.predicted:.4g}", f"{r.measured:.4g}", err)
    console = console or Console()
    console.print(table)
    for w in warnings:
        console.print(f"warning: {w}")
