"""The HTML section of ``greentrain validate --json``: the scores as key figures, predicted against measured
tokens/s per chip as paired bars (one pair per run that both ran and was predicted), and every run in a table.
Without it the page showed three counts ("rows: 8 entries")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from greentrain.report import html_plots as plots
from greentrain.report.html_parts import figure, key_figures, provenance, table
from greentrain.results.calibration import ValidationResult

SCORES = (("runs scored", "num_scored", "{:,.0f}"), ("throughput error, mean |e|", "throughput_error_mean", "pct"),
          ("throughput bias", "throughput_error_bias", "spct"), ("MFU error, mean", "mfu_error_mean_points", "pts"),
          ("rank correlation (median)", "rank_correlation_median", "{:.2f}"),
          ("best pick exact", "best_pick_exact_fraction", "pct"), ("crashes missed", "crashes_missed", "{:,.0f}"),
          ("peak memory error (median)", "peak_memory_error_median", "pct"))


def _fmt(v: Any, how: str) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    if how == "pct":
        return f"{100 * v:.1f} %"
    if how == "spct":
        return f"{100 * v:+.1f} %"
    if how == "pts":
        return f"{v:.2f} points"
    return how.format(v)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def validation_section(v: ValidationResult, source: str) -> str:
    s = v.summary
    runs = str(v.settings.get("runs", "runs CSV"))
    body = provenance("Predicted by greentrain, against measured runs (greentrain validate)", source,
                      f"{s.get('num_runs', len(v.rows))} runs from {runs}")
    figures = [(name, _fmt(s.get(key), how)) for name, key, how in SCORES if s.get(key) is not None]
    held, banded = _num(s.get("error_band_held")), _num(s.get("error_band_scored"))
    if held is not None and banded:  # validate's band check (schema 2 files before it have none)
        figures.append(("error band held", f"{held:,.0f} of {banded:,.0f} runs"))
    body += key_figures(figures)
    pairs = [(r, _num(r.get("tokens_per_s_per_chip")), _num((r.get("measured") or {}).get("tokens_per_s_per_chip")))
             for r in v.rows]
    scored = [(str(r.get("run_id")), p, m) for r, p, m in pairs if p is not None and m is not None]
    if scored:
        body += figure(plots.paired_bars([k for k, _, _ in scored], [p for _, p, _ in scored],
                                         [m for _, _, m in scored], ("predicted", "measured"), "tokens/s per chip",
                                         "throughput per run"),
                       "Predicted against measured tokens/s per chip of each run that ran and was predicted.")
    rows = [_row(r, p, m) for r, p, m in pairs]
    return body + table(("run", "model", "chips", "strategy", "fits", "tokens/s/chip", "measured", "error",
                         "MFU", "measured MFU"), rows, numeric_from=5, caption="every run")


def _row(r: Mapping[str, Any], pred: float | None, meas: float | None) -> tuple[str, ...]:
    m = r.get("measured") or {}
    err = f"{100 * (pred / meas - 1):+.1f} %" if pred is not None and meas else "-"
    mfu, mmfu = _num(r.get("mfu")), _num(m.get("mfu"))
    return (str(r.get("run_id")), str(r.get("model")), str(r.get("num_chips")), str(r.get("strategy") or "-"),
            "yes" if r.get("fits") else f"no: {r.get('reason') or '-'}", f"{pred:,.0f}" if pred is not None else "-",
            f"{meas:,.0f}" if meas is not None else str(m.get("status", "-")), err,
            f"{100 * mfu:.1f} %" if mfu is not None else "-", f"{100 * mmfu:.1f} %" if mmfu is not None else "-")
