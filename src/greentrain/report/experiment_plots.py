"""The experiment report's plots (`greentrain experiment run|report --plot DIR`): quality against CO2e
(pareto.png), cost against CO2e as measured and re-priced in other regions (cost_vs_co2.png), and the planner's
prediction errors (prediction_error.png). Each names its axes with units, labels every point without overlap
(labels of nearby points are stacked), and keeps its text inside the figure (constrained layout).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from greentrain.experiment.report import ExperimentReport
from greentrain.experiment.results import VariantResult
from greentrain.files import all_or_none, make_output_dir
from greentrain.report.files import pyplot, save_figure

REGION_MARKERS = ("s", "^", "v", "D", "P", "X", "<", ">")
ERRORS = (("flop_per_step", "FLOP per step"), ("calibrated_train_s", "training time (calibrated)"),
          ("train_s", "training time (uncalibrated)"), ("energy_j", "energy"))
LABEL_GAP_PT = 11  # labels of points closer than this (vertically, in points) are stacked


def _ok(rep: ExperimentReport) -> list[VariantResult]:
    return [r for r in rep.results if r.status == "ok" and r.emissions_kg_co2e is not None]


def _g(r: VariantResult) -> float:
    return (r.emissions_kg_co2e or 0.0) * 1e3


def _overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _label_points(ax: Any, points: Sequence[tuple[float, float, str]], fontsize: float = 7.5) -> None:
    """Each (x, y, text) labelled to its right (to its left near the right edge), moved up in steps of
    LABEL_GAP_PT until its box (estimated from the text's length) covers neither another label nor another
    point's marker; a moved label gets a leader line to its point."""
    fig = ax.figure
    fig.canvas.draw()  # the axes' limits and scales are final: screen positions are known
    to_pt = 72 / fig.dpi
    screen = [tuple(v * to_pt for v in ax.transData.transform((x, y))) for x, y, _ in points]
    taken = [(px - 5, py - 5, px + 5, py + 5) for px, py in screen]  # the markers
    right = ax.bbox.x1 * to_pt
    for (x, y, text), (px, py) in sorted(zip(points, screen, strict=True), key=lambda p: p[1][1]):
        dy, width = 2.0, 0.6 * fontsize * len(text)
        dx = 6.0 if px + 6 + width < right else -6.0 - width  # to the left where it would leave the axes
        box = (px + dx, py + dy, px + dx + width, py + dy + 1.2 * fontsize)
        mine = (px - 5, py - 5, px + 5, py + 5)
        while any(_overlaps(box, t) for t in taken if t != mine):
            dy += LABEL_GAP_PT
            box = (box[0], py + dy, box[2], py + dy + 1.2 * fontsize)
        taken.append(box)
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, va="bottom",
                    arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.5} if dy > 2.0 else None)


def _log_if_wide(ax: Any, values: Sequence[float], axis: str) -> None:
    pos = [v for v in values if v > 0]
    if pos and max(pos) > 10 * min(pos):
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def pareto_plot(rep: ExperimentReport, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    q = rep.quality
    rows = [r for r in _ok(rep) if q.value(r) is not None]
    costs = [r.cost_usd or 0.0 for r in rows]
    top = max(costs, default=0.0) or 1.0
    for r, c in zip(rows, costs, strict=True):
        front = r.variant_id in rep.pareto
        ax.scatter(_g(r), q.value(r), s=40 + 260 * c / top, alpha=0.8,
                   edgecolors="black" if front else "none", color="tab:green" if front else "tab:gray")
    ax.margins(x=0.25, y=0.12)  # room for the labels at the edges
    _log_if_wide(ax, [_g(r) for r in rows], "x")
    ax.set_xlabel("CO2e (g, operational + embodied)")
    ax.set_ylabel(q.label + ("" if q.higher_is_better else " (lower is better)"))
    ax.set_title(f"{rep.name}: quality vs CO2e (marker area ~ cost; green, outlined: Pareto set)", fontsize=9)
    _label_points(ax, [(_g(r), q.value(r) or 0.0, r.variant_id) for r in rows])
    return save_figure(fig, path)


def cost_plot(rep: ExperimentReport, path: Path) -> Path:
    """Each measured variant (blue, labelled) and the same run re-priced in each other region (one marker per
    region, in the legend), joined to it by a thin line: the regions move CO2e (and the electricity bill)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    measured = {r.variant_id: r for r in _ok(rep) if r.cost_usd is not None}
    regions = list(dict.fromkeys(x.region for x in rep.repriced))
    xs = [_g(r) for r in measured.values()]
    for k, region in enumerate(regions):
        pts = [(x.emissions_kg_co2e * 1e3, x.cost_usd, x.variant_id) for x in rep.repriced
               if x.region == region and x.emissions_kg_co2e is not None and x.cost_usd is not None]
        for gx, usd, vid in pts:
            if vid in measured:
                ax.plot([_g(measured[vid]), gx], [measured[vid].cost_usd, usd], color="0.8", linewidth=0.7,
                        zorder=1)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=REGION_MARKERS[k % len(REGION_MARKERS)],
                   color="0.55", s=24, zorder=2, label=f"re-priced in {region}")
        xs += [p[0] for p in pts]
    site = next((r.region for r in measured.values() if r.region), "")
    ax.scatter([_g(r) for r in measured.values()], [r.cost_usd for r in measured.values()], color="tab:blue",
               s=40, zorder=3, label=f"as measured{f' ({site})' if site else ''}")
    ax.margins(x=0.2, y=0.12)
    _log_if_wide(ax, xs, "x")
    ax.set_xlabel("CO2e (g, operational + embodied)")
    ax.set_ylabel("cost (USD)")
    ax.legend(fontsize=7, loc="best")
    ax.set_title(f"{rep.name}: cost vs CO2e, as measured and re-priced in other regions", fontsize=9)
    _label_points(ax, [(_g(r), r.cost_usd or 0.0, r.variant_id) for r in measured.values()])
    return save_figure(fig, path)


def error_plot(rep: ExperimentReport, path: Path) -> Path:
    """One bar per predicted quantity and variant, its value written on it (a 0 % bar is still readable);
    quantities predicted for no variant are named in the title instead of an empty legend entry."""
    plt = pyplot()
    rows = [r for r in rep.results if r.status == "ok"]
    series = [(name, label, [r.error(name) for r in rows]) for name, label in ERRORS]
    drawn = [s for s in series if any(e is not None for e in s[2])]
    missing = [label for _, label, errs in series if all(e is None for e in errs)]
    fig, ax = plt.subplots(figsize=(max(6.4, 1.3 * len(rows) + 2.5), 4.4), layout="constrained")
    width = 0.8 / max(len(drawn), 1)
    for k, (_, label, errs) in enumerate(drawn):
        xs = [i + (k - (len(drawn) - 1) / 2) * width for i in range(len(rows))]
        bars = ax.bar([x for x, e in zip(xs, errs, strict=True) if e is not None],
                      [100 * e for e in errs if e is not None], width=width, label=label)
        ax.bar_label(bars, fmt="%+.1f%%", fontsize=6.5, padding=2)
    ax.set_xticks(range(len(rows)), [r.variant_id for r in rows], rotation=20, ha="right", fontsize=7.5)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.margins(y=0.15)
    ax.set_ylabel("prediction error: predicted / measured - 1 (%)")
    if drawn:
        ax.legend(fontsize=7)
    ax.set_title(f"{rep.name}: the planner's prediction errors"
                 + (f" (not predicted: {', '.join(missing)})" if missing else ""), fontsize=9)
    return save_figure(fig, path)


def write_plots(rep: ExperimentReport, folder: Path) -> list[Path]:
    make_output_dir(folder, "--plot")
    with all_or_none():
        return [pareto_plot(rep, folder / "pareto.png"), cost_plot(rep, folder / "cost_vs_co2.png"),
                error_plot(rep, folder / "prediction_error.png")]
