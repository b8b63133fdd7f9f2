"""`greentrain search` output: the ranked top-k and the Pareto front as Rich tables, the JSON document (each
ranked strategy with its full estimate, as `plan --json`), the scatter plot (every feasible candidate as run
time x cost, coloured by CO2e, with the Pareto front marked and the top-ranked candidate circled) and the
progress bar."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from greentrain import units
from greentrain.report.files import check_plot_path, pyplot, save_figure
from greentrain.search.engine import Candidate, SearchResult

if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Profile
    from greentrain.footprint.site import Site
    from greentrain.scenario import Scenario

MAX_POINTS = 50_000  # a seeded sample of the cloud keeps the file small; the front is always drawn in full


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    return {"chip": c.chip, "num_chips": c.num_chips, "region": c.region, "strategy": c.strategy.to_dict(),
            "describe": c.strategy.describe(),
            "step_time_s": c.step_time_s, "run_time_s": c.run_time_s, "cost_usd": c.cost_usd,
            "emissions_kg_co2e": c.emissions_kg_co2e, "energy_kwh": units.j_to_kwh(c.energy_j),
            "total_memory_bytes_per_device": c.memory_bytes, "mfu": c.mfu, "cost_basis": c.cost_basis}


_HEADERS = ("#", "chip", "chips", "region", "strategy", "days", "USD", "kg CO2e", "kWh", "GiB/dev", "MFU")


def _table(title: str, rows: tuple[Candidate, ...]) -> Table:
    """Every column but the strategy keeps its full width (numbers are never cut); on a narrow terminal the
    strategy wraps instead."""
    cells = [(str(i), c.chip, str(c.num_chips), c.region or "-", c.strategy.describe(),
              f"{units.s_to_days(c.run_time_s):.2f}", f"{c.cost_usd:,.0f}" + ("" if c.cost_basis == "cloud" else " e"),
              f"{c.emissions_kg_co2e:,.0f}", f"{units.j_to_kwh(c.energy_j):,.0f}",
              f"{units.bytes_to_gib(c.memory_bytes):.1f}", f"{c.mfu:.1%}") for i, c in enumerate(rows, 1)]
    t = Table(title=title)
    for k, col in enumerate(_HEADERS):
        width = max([len(col), *(len(r[k]) for r in cells)])
        t.add_column(col, justify="left" if col in ("chip", "region", "strategy") else "right",
                     no_wrap=col != "strategy", min_width=16 if col == "strategy" else width,
                     overflow="fold")
    for r in cells:
        t.add_row(*r)
    return t


def render_search(result: SearchResult, console: Console, pareto: bool = False) -> None:
    console.print(_table(f"Top {len(result.ranked)} strategies by {result.objective}", result.ranked))
    if pareto:
        console.print(_table("Pareto front: run time x cost x CO2e", result.pareto))
    console.print(f"{result.num_feasible:,} of {result.num_candidates:,} candidates feasible, "
                  f"searched in {result.search_time_s:.2f} s")
    for note in result.notes:
        console.print(f"note: {note}")


def search_to_dict(result: SearchResult, scs: list[Scenario], sites: list[Site],
                   profile: Profile) -> dict[str, Any]:
    """The search's counts, the ranked strategies with their full estimates (as `plan --json`), the front."""
    from greentrain.estimate.run import estimate_run
    from greentrain.report.plan import plan_to_dict

    by_chip = {sc.cluster.chip.name: sc for sc in scs}
    by_region = {s.region: s for s in sites}

    def full(c: Candidate) -> dict[str, Any]:
        sc = by_chip[c.chip]
        sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, num_chips=c.num_chips))
        sc = dataclasses.replace(sc, site=by_region[c.region]) if c.region in by_region else sc
        return plan_to_dict(estimate_run(sc, c.strategy, eff=profile.for_chip(sc.cluster.chip.name)))

    return {"objective": result.objective, "num_candidates": result.num_candidates,
            "num_feasible": result.num_feasible, "search_time_s": result.search_time_s,
            "ranked": [{"rank": i + 1, **candidate_to_dict(c), "estimate": full(c)}
                       for i, c in enumerate(result.ranked)],
            "pareto": [candidate_to_dict(c) for c in result.pareto], "notes": list(result.notes)}


@contextmanager
def search_progress() -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar on stderr (shown only on a terminal); yields ``tick(done, total)``."""
    with Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("search", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield tick


def plot_search(result: SearchResult, path: str | Path) -> Path:
    check_plot_path(path)
    plt = pyplot()
    pts = result.points
    if len(pts) > MAX_POINTS:
        pts = pts[np.random.default_rng(0).choice(len(pts), MAX_POINTS, replace=False)]
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    sc = ax.scatter(units.s_to_days(1.0) * pts[:, 0], pts[:, 1], c=pts[:, 2] / 1000.0, s=4, cmap="viridis",
                    alpha=0.5, linewidths=0)
    fig.colorbar(sc, ax=ax, label="t CO2e (operational + embodied)")
    front = result.pareto
    ax.plot([units.s_to_days(c.run_time_s) for c in front], [c.cost_usd for c in front], color="crimson",
            marker="o", markersize=4, linewidth=1, label=f"Pareto front ({len(front)})")
    best = result.ranked[0]
    ax.scatter([units.s_to_days(best.run_time_s)], [best.cost_usd], s=120, facecolors="none", edgecolors="black",
               label=f"best by {result.objective}: {best.strategy.describe()}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("run time (days)")
    ax.set_ylabel("cost (USD)")
    ax.set_title(f"greentrain search: {result.num_feasible:,} feasible of {result.num_candidates:,}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return save_figure(fig, path)
