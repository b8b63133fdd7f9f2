"""`greentrain compare`: predicted (``greentrain plan --json``) against measured (``measurement.json``), the
relative errors as a Rich table or JSON.

Both files are read through results/codec.py as typed views (PlanResult, TrackResult). Predicted: step_time_s,
tokens_per_s, mfu, flop_per_step (model FLOPs), memory_bytes_per_device ({"total": ..., "reserved": ...}:
the allocator's part, total less reserved, against TrackResult.allocator_peak_bytes), energy_kwh and
run_time_s. Measured: the Measurement JSON. Energy is compared per
step (a plan covers the whole run, a measurement only the steps it saw): predicted energy_kwh /
(run_time_s / step_time_s) against the measured energy_j_per_step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from greentrain import units
from greentrain.config import load_mapping
from greentrain.errors import ConfigError
from greentrain.results.codec import from_dict
from greentrain.results.kinds import PlanResult, TrackResult
from greentrain.results.view import ResultView


@dataclass(frozen=True, slots=True, kw_only=True)
class ComparisonRow:
    quantity: str  # with its unit, e.g. "step_time_s"
    predicted: float
    measured: float

    @property
    def relative_error(self) -> float | None:
        """(predicted - measured) / measured; None when nothing was measured."""
        return (self.predicted - self.measured) / self.measured if self.measured else None


def _num(view: ResultView, key: str, side: str) -> float | None:
    """A typed field of the view, or a key the codec kept in ``extra`` (checked here: a number)."""
    if hasattr(view, key):
        value = getattr(view, key)
    else:
        value = view.extra.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{side}.{key}", value, "must be a number")
    if isinstance(value, dict):  # memory_bytes_per_device: {"total": ..., breakdown}
        # the allocator's peak, as the measurement's CUDA peak counts it: without the CUDA context and NCCL's
        # buffers ("reserved"), which PyTorch does not allocate (estimate/memory.py allocator_bytes)
        total, outside = value.get("total"), value.get("reserved") or 0.0
        value = None if total is None else float(total) - float(outside)
    return None if value is None else float(value)


def _predicted_energy_j_per_step(pred: PlanResult) -> float | None:
    if not pred.run_time_s or not pred.step_time_s:
        return None
    return units.kwh_to_j(pred.energy_kwh) / (pred.run_time_s / pred.step_time_s)


# (predicted key, measured key, row name); memory: TrackResult.allocator_peak_bytes, the one rule calibrate reads too
PAIRS = (("step_time_s", "step_time_s", "step_time_s"), ("tokens_per_s", "tokens_per_s", "tokens_per_s"),
         ("flop_per_step", "flop_per_step", "flop_per_step"),
         ("memory_bytes_per_device", "allocator_peak_bytes", "memory_bytes"), ("mfu", "mfu", "mfu"))


def compare(predicted: PlanResult, measured: TrackResult) -> list[ComparisonRow]:
    """Rows for every quantity present on both sides (step time, throughput, memory and energy always are)."""
    rows = []
    for p_key, m_key, name in PAIRS:
        p, m = _num(predicted, p_key, "predicted"), _num(measured, m_key, "measured")
        if p is not None and m is not None:
            rows.append(ComparisonRow(quantity=name, predicted=p, measured=m))
    p_e = _predicted_energy_j_per_step(predicted)
    if p_e is not None:
        rows.append(ComparisonRow(quantity="energy_j_per_step", predicted=p_e, measured=measured.energy_j_per_step))
    return rows


V = TypeVar("V", PlanResult, TrackResult)


def _load(path: str | Path, side: str, want: type[V], what: str) -> V:
    """One input file as its typed view (results/codec.py: an unknown kind, a newer schema version or a
    malformed field is one line naming the file and the field), and of the kind this side needs."""
    view = from_dict(load_mapping(path, field=side), str(path))
    if isinstance(view, want):
        return view
    if side == "measured" and isinstance(view, PlanResult):  # `compare PLAN.json PLAN.json` reported +0.0 %
        raise ConfigError("measured", str(path), "is a prediction (greentrain plan --json), not a measurement: "
                                                 "give the measurement.json of greentrain track or a Tracker")
    raise ConfigError(side, str(path), f"is a {view.KIND or type(view).__name__} result, not {what}")


def load_inputs(predicted_path: str | Path, measured_path: str | Path) -> tuple[PlanResult, TrackResult]:
    """The plan (``greentrain plan --json``) and the measurement (``measurement.json``) as typed views."""
    return (_load(predicted_path, "predicted", PlanResult, "a prediction: give the JSON of greentrain plan --json"),
            _load(measured_path, "measured", TrackResult,
                  "a measurement: give the measurement.json of greentrain track or a Tracker"))


SAME_RUN_RATIO = 2.0  # work per step differing by more than this: the two files describe different jobs


def mismatch_warnings(predicted: PlanResult, measured: TrackResult) -> list[str]:
    """Warnings when the plan and the measurement cannot describe the same job: model FLOPs or tokens per
    step differing by more than SAME_RUN_RATIO (their relative errors would then say nothing about the
    model's accuracy)."""
    out = []
    tokens_m, steps_m = _num(measured, "tokens", "measured"), measured.num_steps
    per_step = {"flop_per_step": (_num(predicted, "flop_per_step", "predicted"), measured.flop_per_step),
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
