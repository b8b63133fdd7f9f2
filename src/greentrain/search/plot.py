"""`greentrain search --plot`: every feasible candidate as run time x cost, coloured by CO2e, with the Pareto
front (time x cost x CO2e) marked and the top-ranked candidate circled."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from greentrain import units
from greentrain.plotting import check_plot_path, pyplot, save_figure
from greentrain.search.engine import SearchResult

MAX_POINTS = 50_000  # a seeded sample of the cloud keeps the file small; the front is always drawn in full


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
