"""Best start time of a job from an hourly grid-intensity series (CSV), vectorised with numpy.

CSV: one row per hour, a time column (first column, or ``timestamp``/``datetime``) and an intensity column
named ``g_co2e_per_kwh`` (or ``carbon_intensity_g_co2e_per_kwh``; Electricity Maps' export header
``Carbon Intensity gCO₂eq/kWh (direct)`` / ``(LCA)`` is accepted too). A job of H hours started at hour i
draws the mean of rows i .. i+H (the last hour weighted by the fractional part of H); the best start
minimises it.
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from greentrain import units
from greentrain.config import read_text, require
from greentrain.errors import ConfigError, csv_errors

INTENSITY_COLUMNS = ("g_co2e_per_kwh", "carbon_intensity_g_co2e_per_kwh", "grid_g_co2e_per_kwh")
TIME_COLUMNS = ("timestamp", "datetime", "time", "datetime (utc)")


@dataclass(frozen=True, slots=True, kw_only=True)
class IntensitySeries:
    times: tuple[str, ...]
    g_co2e_per_kwh: np.ndarray  # one value per hour
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class BestStart:
    job_hours: float
    start_index: int
    start_time: str
    best_mean_g_co2e_per_kwh: float
    now_mean_g_co2e_per_kwh: float  # starting at the first row
    worst_mean_g_co2e_per_kwh: float

    @property
    def saving_vs_now(self) -> float:
        """Fraction of operational CO2e saved by waiting for the best start instead of starting now."""
        now = self.now_mean_g_co2e_per_kwh
        return 1.0 - self.best_mean_g_co2e_per_kwh / now if now > 0 else 0.0


def _pick(header: list[str], names: tuple[str, ...], contains: str = "") -> int | None:
    low = [h.strip().lower() for h in header]
    for name in names:
        if name in low:
            return low.index(name)
    if contains:
        hits = [i for i, h in enumerate(low) if contains in h]
        if hits:
            return hits[0]
    return None


def load_intensity_csv(path: str | Path) -> IntensitySeries:
    text = read_text(path, "intensity_csv", encoding="utf-8-sig")
    with csv_errors("intensity_csv", path):
        rows = list(csv.reader(text.splitlines()))
    if len(rows) < 2:
        raise ConfigError("intensity_csv", str(path), "needs a header and at least one hourly row")
    header = rows[0]
    col = _pick(header, INTENSITY_COLUMNS, contains="carbon intensity")
    if col is None:
        raise ConfigError("intensity_csv", str(path),
                          f"no intensity column (one of {', '.join(INTENSITY_COLUMNS)}); columns: {header}")
    tcol = _pick(header, TIME_COLUMNS)
    tcol = 0 if tcol is None and col != 0 else tcol
    values, times = [], []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            values.append(float(row[col]))
        except (ValueError, IndexError):
            raise ConfigError(f"intensity_csv line {n}", row, "intensity is not a number") from None
        times.append(row[tcol] if tcol is not None else str(n - 2))
    g = np.asarray(values, dtype=float)
    if (g < 0).any() or not np.isfinite(g).all():
        raise ConfigError("intensity_csv", str(path), "intensities must be finite and >= 0")
    _check_hourly(times, str(path))
    return IntensitySeries(times=tuple(times), g_co2e_per_kwh=g, source=str(path))


def _check_hourly(times: list[str], where: str) -> None:
    """When the times parse as ISO 8601, require one-hour steps."""
    try:
        stamps = [datetime.fromisoformat(t.strip().replace("Z", "+00:00")) for t in times]
    except ValueError:
        return
    steps = {(b - a).total_seconds() for a, b in itertools.pairwise(stamps)}
    if steps and steps != {units.HOUR_S}:
        raise ConfigError("intensity_csv", where, f"rows must be 1 h apart; steps: {sorted(steps)} s")


def window_means(g_co2e_per_kwh: np.ndarray, job_hours: float) -> np.ndarray:
    """Mean intensity seen by a job of ``job_hours`` started at each hour that leaves it inside the series."""
    require(job_hours > 0, "hours", job_hours, "must be > 0")
    n_full = math.floor(job_hours)
    frac = job_hours - n_full
    n_rows = n_full + (1 if frac > 0 else 0)
    if n_rows > len(g_co2e_per_kwh):
        raise ConfigError("hours", job_hours, f"longer than the intensity series ({len(g_co2e_per_kwh)} h)")
    c = np.concatenate([[0.0], np.cumsum(g_co2e_per_kwh)])
    starts = np.arange(len(g_co2e_per_kwh) - n_rows + 1)
    total = c[starts + n_full] - c[starts]
    if frac > 0:
        total = total + frac * g_co2e_per_kwh[starts + n_full]
    return np.asarray(total / job_hours)


def best_start(series: IntensitySeries, job_hours: float) -> BestStart:
    means = window_means(series.g_co2e_per_kwh, job_hours)
    i = int(np.argmin(means))
    return BestStart(job_hours=job_hours, start_index=i, start_time=series.times[i],
                     best_mean_g_co2e_per_kwh=float(means[i]), now_mean_g_co2e_per_kwh=float(means[0]),
                     worst_mean_g_co2e_per_kwh=float(means.max()))
