"""`greentrain validate` output: the scores as a Rich table, and every row and the summary as JSON (units in
every key; predictions that cannot run are null with their reason)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain import units
from greentrain.calibrate.bands import BandCheck
from greentrain.calibrate.runs import Run
from greentrain.calibrate.validate import GOOD_PICK, Prediction, Summary
from greentrain.results.calibration import ValidationResult


def _gib(x: float | None) -> float | None:
    return None if x is None else units.bytes_to_gib(x)


def row_to_dict(run: Run, p: Prediction, band: float | None = None) -> dict[str, Any]:
    m = run.measured
    return {
        "run_id": run.run_id, "model": run.scenario.model.name, "num_chips": run.scenario.cluster.num_chips,
        "strategy": run.strategy.describe(), "fits": p.fits, "reason": p.reason or None,
        "step_time_s": p.step_time_s, "mfu": p.mfu, "tokens_per_s_per_chip": p.tokens_per_s_per_chip,
        "peak_memory_gib": _gib(p.peak_memory_bytes), "device_memory_gib": _gib(p.device_memory_bytes),
        "measured": {"status": m.status, "step_time_s": m.step_time_s,
                     "tokens_per_s_per_chip": m.tokens_per_s_per_chip, "mfu": m.mfu,
                     "peak_memory_gib": _gib(m.peak_memory_bytes)},
        "mfu_error_points": None if p.measured_mfu_error is None else 100 * p.measured_mfu_error,
        "peak_memory_error": p.peak_memory_error,
        "throughput_error": p.throughput_error,
        "error_band": band,  # the band plan states for the run's class (fraction of the throughput)
        "within_error_band": None if band is None or p.throughput_error is None else abs(p.throughput_error) <= band,
    }


def summary_to_dict(s: Summary) -> dict[str, Any]:
    def pts(x: float | None) -> float | None:
        return None if x is None else 100 * x

    return {
        "num_runs": s.num_runs, "num_ran": s.num_ran, "num_predicted": s.num_predicted,
        "num_scored": s.num_scored,
        "mfu_error_mean_points": pts(s.mfu_error_mean), "mfu_error_bias_points": pts(s.mfu_error_bias),
        "throughput_error_mean": s.throughput_error_mean, "throughput_error_bias": s.throughput_error_bias,
        "throughput_error_median": s.throughput_error_median,
        "rank_correlation_median": s.rank_correlation_median, "num_groups": s.num_groups,
        "best_pick_exact_fraction": s.best_pick_exact, "best_pick_within_10_percent_fraction": s.best_pick_good,
        "ran_crashed_accuracy": s.ran_crashed_accuracy, "crashes_missed": s.crashes_missed,
        "runs_refused": s.runs_refused, "peak_memory_error_median": s.peak_memory_error_median,
        "peak_memory_bias_gib": _gib(s.peak_memory_bias_bytes),
    }


def validation_to_dict(runs: Sequence[Run], preds: Sequence[Prediction], s: Summary,
                       settings: dict[str, Any], bands: BandCheck) -> dict[str, Any]:
    # schema 2: a row's peak_memory_gib is the allocator's peak (1: everything on the device, now
    # device_memory_gib)
    rows = [row_to_dict(r, p, b) for r, p, b in zip(runs, preds, bands.bands, strict=True)]
    summary = {**summary_to_dict(s), "error_band_held": bands.held, "error_band_scored": bands.scored}
    return {**ValidationResult.head(), "settings": settings, "rows": rows, "summary": summary}


def _fmt(x: float | None, spec: str, scale: float = 1.0, unit: str = "") -> str:
    """A number with its unit, or "n/a" (nothing measured to score)."""
    return "n/a" if x is None else format(x * scale, spec) + unit


def render_validation(s: Summary, settings: dict[str, Any], console: Console, bands: BandCheck) -> None:
    t = Table(title=f"greentrain validate: {s.num_runs:,} runs ({s.num_ran:,} ran), {s.num_groups} groups "
              f"(model x chips); {settings.get('framework') or 'each run its framework'}", title_justify="left")
    t.add_column("score")
    t.add_column("value", justify="right")
    t.add_column("what it says")
    t.add_row("MFU error, mean", _fmt(s.mfu_error_mean, ".1f", 100, " pt"),
              f"|predicted - measured| over {s.num_scored:,} runs that ran, on each run's own FLOP count")
    t.add_row("MFU error, bias", _fmt(s.mfu_error_bias, "+.1f", 100, " pt"), "> 0: optimistic")
    t.add_row("throughput error, mean", _fmt(s.throughput_error_mean, ".1f", 100, " %"),
              f"|predicted / measured tokens per second - 1|, median "
              f"{_fmt(s.throughput_error_median, '.1f', 100, ' %')}, "
              f"bias {_fmt(s.throughput_error_bias, '+.1f', 100, ' %')}")
    t.add_row("rank correlation, median", _fmt(s.rank_correlation_median, ".2f"),
              "Spearman, predicted vs measured throughput inside each group")
    t.add_row("best pick exact", _fmt(s.best_pick_exact, ".0f", 100, " %"),
              "groups whose predicted-fastest config is the measured fastest")
    t.add_row("best pick good", _fmt(s.best_pick_good, ".0f", 100, " %"),
              f"groups whose pick reaches >= {GOOD_PICK:.0%} of the measured best")
    t.add_row("ran / crashed right", _fmt(s.ran_crashed_accuracy, ".1f", 100, " %"),
              f"{s.crashes_missed} crashes predicted to fit, {s.runs_refused} runs that ran predicted not to")
    t.add_row("peak memory error, median", _fmt(s.peak_memory_error_median, ".1f", 100, " %"),
              f"bias {_fmt(s.peak_memory_bias_bytes, '+.1f', 1 / 2**30, ' GiB')} (the allocator's peak)")
    t.add_row("error band held", _fmt(bands.held / bands.scored if bands.scored else None, ".0f", 100, " %"),
              f"{bands.held:,} of {bands.scored:,} runs inside the error band plan states for their class (built "
              "to hold 80 %; in-sample on the calibration files the bands come from)")
    console.print(t)
