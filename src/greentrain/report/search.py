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


def fp8_recipes(scs: list[Scenario], profile: Profile) -> dict[str, str]:
    """Each searched chip's fp8 recipe (estimate/fp8.py: the workload's, else the framework's), as `plan` says it;
    empty unless the precision is fp8."""
    from greentrain.estimate import fp8

    return {sc.cluster.chip.name: fp8.recipe_for(sc.workload.precision, sc.workload.fp8_recipe,
                                                 profile.for_chip(sc.cluster.chip.name).framework,
                                                 sc.cluster.chip.name)
            for sc in scs if sc.workload.precision.lower() == "fp8"}


def grad_dtype(scs: list[Scenario], profile: Profile) -> str:
    """The gradient buffer's dtype the search estimated with (estimate/memory.py workload_grad_dtype: the
    workload's, else the framework's; a framework-level knob, the same on every chip)."""
    from greentrain.estimate.state_dtypes import workload_grad_dtype

    sc = scs[0]
    return workload_grad_dtype(sc.workload, profile.for_chip(sc.cluster.chip.name))


def precision_note(scs: list[Scenario], profile: Profile) -> str:
    """The title's precision under fp8 (``fp8, rowwise recipe``; per chip when they differ) and bf16 gradients
    when the framework's default or the workload says so (fp32, the common case, unsaid); "" otherwise."""
    recipes = fp8_recipes(scs, profile)
    grads = grad_dtype(scs, profile) if scs else "fp32"
    parts = [] if grads == "fp32" else [f"{grads} gradients" + ("" if scs[0].workload.grad_dtype else
                                                                 f" ({profile.framework}'s default)")]
    if len(set(recipes.values())) == 1:
        parts.insert(0, f"fp8, {next(iter(recipes.values()))} recipe")
    elif recipes:
        parts.insert(0, "fp8, " + ", ".join(f"{r} on {chip}" for chip, r in recipes.items()))
    return "; ".join(parts)


def render_search(result: SearchResult, console: Console, pareto: bool = False, precision: str = "") -> None:
    """``precision``: said in the title (``precision_note``) when given."""
    title = f"Top {len(result.ranked)} strategies by {result.objective}" + (f", {precision}" if precision else "")
    console.print(_table(title, result.ranked))
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
    recipes = fp8_recipes(scs, profile)

    def brief(c: Candidate) -> dict[str, Any]:  # the recipe ranked with: "" unless fp8 (as plan --json's)
        return {**candidate_to_dict(c), "fp8_recipe": recipes.get(c.chip, "")}

    def full(c: Candidate) -> dict[str, Any]:
        sc = by_chip[c.chip]
        sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, num_chips=c.num_chips))
        sc = dataclasses.replace(sc, site=by_region[c.region]) if c.region in by_region else sc
        return plan_to_dict(estimate_run(sc, c.strategy, eff=profile.for_chip(sc.cluster.chip.name)))

    return {"objective": result.objective, "precision": scs[0].workload.precision if scs else "",
            "grad_dtype": grad_dtype(scs, profile) if scs else "",
            "num_candidates": result.num_candidates,
            "num_feasible": result.num_feasible, "search_time_s": result.search_time_s,
            "ranked": [{"rank": i + 1, **brief(c), "estimate": full(c)} for i, c in enumerate(result.ranked)],
            "pareto": [brief(c) for c in result.pareto], "notes": list(result.notes)}


@contextmanager
def search_progress() -> Iterator[Callable[[int, int], None]]:
    """A transient progress bar on stderr (shown only on a terminal); yields ``tick(done, total)``."""
    with Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task("search", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield tick


NEAR_FRONT = 3000  # candidates drawn in colour: the closest to the front (sum of log ratios to each minimum)
MAX_LABELS = 8  # front points labelled on the plot (the table lists all of them)
_SHORT = {"dp": "dp", "tp": "tp", "pp": "pp", "vpp": "vpp", "cp": "cp", "ep": "ep", "zero": "z", "mb": "mb"}
# (x column, y column, colour column) of `points` per panel; columns: 0 run time, 1 cost, 2 CO2e
_PANELS = ((0, 1, 2), (1, 2, 0))
_AXIS = ("run time (days)", "cost (USD)", "CO2e (kg, operational + embodied)")
_AXIS_SHORT = ("days", "USD", "kg CO2e")


def short_label(c: Candidate) -> str:
    """``dp8 tp1 pp1 z3 mb4 / h100-sxm / eu-north-1``: the strategy's degrees, ZeRO stage and micro-batch (plus
    recompute and offload when used), the chip and the region."""
    parts = []
    for tok in c.strategy.describe().split():
        key, _, val = tok.partition("=")
        if key in _SHORT:
            parts.append(f"{_SHORT[key]}{val}")
        elif key == "recompute" and val != "none":
            parts.append(f"rc:{val}")
        elif key in ("offload", "sp"):
            parts.append(key)
        elif key == "offload_act":
            parts.append(f"oa{val}")
    return " / ".join([" ".join(parts), c.chip, *([c.region] if c.region else [])])


def _columns(pts: Any) -> Any:
    """Points in the plotted units: days, USD, kg CO2e."""
    return np.column_stack([units.s_to_days(1.0) * pts[:, 0], pts[:, 1], pts[:, 2]])


def _near_front(pts: Any, n: int) -> Any:
    """Boolean mask of the ``n`` points closest to the front: smallest sum over objectives of log(value / min)."""
    mask = np.zeros(len(pts), dtype=bool)
    if not len(pts):
        return mask
    safe = np.maximum(pts, 1e-30)
    score = np.log(safe / safe.min(axis=0)).sum(axis=1)
    mask[np.argsort(score, kind="stable")[:n]] = True
    return mask


def _view(vals: Any) -> tuple[bool, float, float]:
    """(log scale, low, high) of an axis that shows ``vals``: log where they span more than a decade; a margin
    of 6 % of the span (in log space on a log axis)."""
    pos = vals[vals > 0]
    log = bool(len(pos)) and pos.max() > 10 * pos.min()
    lo, hi = (pos.min(), pos.max()) if log else (vals.min(), vals.max())
    if log:
        pad = (hi / lo) ** 0.06 if hi > lo else 1.2
        return True, float(lo / pad), float(hi * pad)
    pad = 0.06 * (hi - lo) if hi > lo else 0.05 * abs(hi) or 1.0
    return False, float(lo - pad), float(hi + pad)


def _span(log: bool, lo: float, hi: float) -> float:
    return float(np.log(hi / lo)) if log else hi - lo


def _front_points(result: SearchResult) -> Any:
    """The front in plotted units, in the result's order (search_figure sorts it by run time: point k is
    number k + 1 in both panels and in the list)."""
    return _columns(np.array([[c.run_time_s, c.cost_usd, c.emissions_kg_co2e] for c in result.pareto]
                             or np.zeros((0, 3))))


def _panel(ax: Any, fig: Any, result: SearchResult, pts: Any, near: Any, cols: tuple[int, int, int]) -> None:
    """One panel zoomed on the candidates near the front and the front itself; the rest of the cloud beyond
    the axes is counted in the legend."""
    from matplotlib.ticker import EngFormatter

    x, y, z = cols
    front = _front_points(result)
    best = result.ranked[0]
    b = _columns(np.array([[best.run_time_s, best.cost_usd, best.emissions_kg_co2e]]))[0]
    shown = np.vstack([pts[near], front])
    (xlog, x0, x1), (ylog, y0, y1) = _view(shown[:, x]), _view(shown[:, y])
    best_shown = x0 <= b[x] <= x1 and y0 <= b[y] <= y1
    if not best_shown:  # widen the view to the best unless that squeezes the front into a third of it
        (wxlog, wx0, wx1), (wylog, wy0, wy1) = _view(np.append(shown[:, x], b[x])), _view(np.append(shown[:, y], b[y]))
        if _span(wxlog, wx0, wx1) <= 3 * _span(xlog, x0, x1) and _span(wylog, wy0, wy1) <= 3 * _span(ylog, y0, y1):
            (xlog, x0, x1), (ylog, y0, y1), best_shown = (wxlog, wx0, wx1), (wylog, wy0, wy1), True
    inside = (pts[:, x] >= x0) & (pts[:, x] <= x1) & (pts[:, y] >= y0) & (pts[:, y] <= y1)
    rest = np.flatnonzero(~near & inside)
    if len(rest) > MAX_POINTS:
        rest = np.sort(np.random.default_rng(0).choice(rest, MAX_POINTS, replace=False))
    beyond = int((~inside).sum())
    ax.scatter(pts[rest, x], pts[rest, y], s=3, color="0.82", linewidths=0, rasterized=True,
               label=f"other feasible ({int((~near).sum()):,}; {beyond:,} beyond the axes)")
    sc = ax.scatter(pts[near, x], pts[near, y], c=pts[near, z], s=9, cmap="viridis", linewidths=0, alpha=0.8,
                    label=f"closest {int(near.sum()):,} to the front")
    fig.colorbar(sc, ax=ax, label=_AXIS[z], format=EngFormatter(sep=""))
    order = np.argsort(front[:, x], kind="stable")
    ax.plot(front[order, x], front[order, y], color="crimson", marker="o", markersize=6, linewidth=1.5,
            drawstyle="steps-post", label=f"Pareto front ({len(front)}, time x cost x CO2e)", zorder=3)
    for k in range(min(len(front), MAX_LABELS)):  # front[k] is front point k + 1 (numbered by run time)
        ax.annotate(str(k + 1), (front[k, x], front[k, y]), fontsize=8, fontweight="bold", color="crimson",
                    xytext=(6 + 4 * (k % 3), 6 + 7 * (k % 3)), textcoords="offset points", gid="front-label")
    ax.scatter([b[x]], [b[y]], s=160, facecolors="none", edgecolors="black", linewidths=1.2, zorder=4,
               label=f"best by {result.objective}")
    if not best_shown:
        eng = EngFormatter(places=2, sep="")
        ax.text(0.98, 0.98, f"best by {result.objective} beyond the axes: {eng(b[x])} {_AXIS_SHORT[x]}, "
                f"{eng(b[y])} {_AXIS_SHORT[y]}", transform=ax.transAxes, ha="right", va="top", fontsize=7,
                bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.6"})
    for log, lo, hi, axis, set_scale, set_lim in ((xlog, x0, x1, ax.xaxis, ax.set_xscale, ax.set_xlim),
                                                  (ylog, y0, y1, ax.yaxis, ax.set_yscale, ax.set_ylim)):
        if log:
            set_scale("log")
        elif hi > 1e4:  # 3.1M, not 3100000 under a 1e6 offset
            axis.set_major_formatter(EngFormatter(sep=""))
        set_lim(lo, hi)
    ax.set_xlabel(_AXIS[x])
    ax.set_ylabel(_AXIS[y])
    ax.grid(True, which="both", alpha=0.25)


def _front_list(result: SearchResult) -> list[str]:
    """``k: label`` of the first MAX_LABELS front points (the front sorted by run time)."""
    return [f"{k + 1}: {short_label(c)}" for k, c in enumerate(result.pareto[:MAX_LABELS])]


def search_figure(result: SearchResult) -> Any:
    """Two panels, run time x cost and cost x CO2e, zoomed on the front: the candidates closest to it in colour
    (the third quantity), the others in light grey, the Pareto front as a line with its points numbered (the
    same numbers in both panels, listed under them), the best circled. A front of one point says why."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    result = dataclasses.replace(result, pareto=tuple(sorted(result.pareto, key=lambda c: c.run_time_s)))
    pts = _columns(result.points)
    near = _near_front(pts, NEAR_FRONT)
    fig, axes = plt.subplots(1, 2, figsize=(13.0, 5.6 + 0.2 * -(-min(len(result.pareto), MAX_LABELS) // 2)),
                             layout="constrained")
    for ax, cols in zip(axes, _PANELS, strict=True):
        _panel(ax, fig, result, pts, near, cols)
    axes[0].legend(fontsize=7, loc="upper left")
    listed = _front_list(result)
    more = len(result.pareto) - len(listed)
    title = "Pareto front, by run time" + (f" (first {len(listed)}; --json lists all {len(result.pareto)})"
                                           if more else "")
    fig.legend([Line2D([], [], linestyle="none")] * len(listed), listed, loc="outside lower center", ncol=2,
               fontsize=8, frameon=False, handlelength=0, labelcolor="crimson", title=title, title_fontsize=8)
    why = (" The front is one point: that candidate is the fastest, cheapest and lowest-CO2e at once (one chip"
           " type and one region make time, cost and CO2e rise together; search several with --chip, --region)."
           if len(result.pareto) == 1 else "")
    fig.suptitle(f"greentrain search: {result.num_feasible:,} feasible of {result.num_candidates:,} candidates; "
                 f"lower-left is better.{why}", fontsize=10, wrap=True)
    return fig


def plot_search(result: SearchResult, path: str | Path) -> Path:
    check_plot_path(path)
    return save_figure(search_figure(result), path)
