"""The HTML report's plots: matplotlib figures written as inline SVG (no pyplot state, no files, no fonts
fetched: text stays text in the page's own sans-serif font).

Each function takes plain numbers and returns one ``<svg ...>...</svg>`` string. A Gantt chart draws every
span up to GANTT_EXACT_SPANS; past that, a row of more than GANTT_RESOLUTION spans is drawn at the chart's
resolution (GANTT_RESOLUTION columns, each in the category that takes most of it), so a trace of a million
spans still draws in a bounded page.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from greentrain.report.heatmap import HeatGrid

FIG_W_IN = 7.5  # figure width, inches (at the SVG's 72 points per inch: 540 px)
GANTT_RESOLUTION = 300  # columns of a binned Gantt row (1.5 points of the plot each)
GANTT_EXACT_SPANS = 5000  # a chart of at most this many spans draws every span (about 110 bytes of SVG each)
GANTT_MIN_WIDTH = 1 / 600  # of the chart's time range: a shorter span is drawn this wide (about 0.75 point)
PALETTE = ("#2b7a4b", "#d98b2b", "#3b6ea8", "#b8443a", "#7a5ea8", "#8c8c3a", "#3aa8a0", "#a85e8c")
RC: Any = {"svg.fonttype": "none", "svg.hashsalt": "greentrain", "font.family": "sans-serif", "font.size": 9,
      "axes.spines.top": False, "axes.spines.right": False}


def _figure(height_in: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(FIG_W_IN, height_in), layout="constrained")


def _svg(fig: Any) -> str:
    """The figure as an inline <svg> element (the XML header and DOCTYPE dropped)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def bars(labels: Sequence[str], values: Sequence[float], unit: str, title: str) -> str:
    """Horizontal bars, one per label (a step's time breakdown, energy per module)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(0.6 + 0.28 * len(labels))
        ax = fig.add_subplot()
        ax.barh(range(len(labels)), values, color=PALETTE[0])
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, loc="left")
        return _svg(fig)


def paired_bars(labels: Sequence[str], first: Sequence[float], second: Sequence[float],
                names: tuple[str, str], unit: str, title: str) -> str:
    """Two bars per label (predicted and measured; forward and backward time)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(0.8 + 0.45 * len(labels))
        ax = fig.add_subplot()
        ys = range(len(labels))
        ax.barh([y - 0.2 for y in ys], first, height=0.4, color=PALETTE[2], label=names[0])
        ax.barh([y + 0.2 for y in ys], second, height=0.4, color=PALETTE[1], label=names[1])
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, loc="left")
        fig.legend(loc="outside lower center", ncol=2, frameon=False)
        return _svg(fig)


def _eng_axes(ax: Any) -> None:
    """Linear axes over 10,000 read 3.1M, not 3.1 under a 1e6 offset."""
    from matplotlib.ticker import EngFormatter

    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if axis.get_scale() == "linear" and max(abs(lo), abs(hi)) > 1e4:
            axis.set_major_formatter(EngFormatter(sep=""))


def scatter(xs: Sequence[float], ys: Sequence[float], colours: Sequence[float], labels: tuple[str, str, str],
            marked: Sequence[int] = (), title: str = "", front: Sequence[tuple[float, float]] = (),
            point_labels: Sequence[str] = (), marked_label: str = "on the Pareto front") -> str:
    """Points x by y coloured by a third quantity; ``marked`` indices ringed (``marked_label`` in the legend);
    ``front``: (x, y) points drawn as a step line and numbered P1, P2, ... in the order given;
    ``point_labels``: a label beside each point (a rank, a variant)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(3.6)
        ax = fig.add_subplot()
        pts = ax.scatter(xs, ys, c=colours, cmap="viridis", s=28, zorder=3)
        if point_labels:  # points at one place (ties) share one label: "2,3,4"
            at: dict[tuple[float, float], list[str]] = {}
            for x, y, name in zip(xs, ys, point_labels, strict=True):
                at.setdefault((x, y), []).append(name)
            for (x, y), names in at.items():
                ax.annotate(",".join(names), (x, y), xytext=(-4, 5), textcoords="offset points", fontsize=7,
                            ha="right", color="#333333")
        if front:
            order = sorted(range(len(front)), key=lambda i: front[i])
            ax.plot([front[i][0] for i in order], [front[i][1] for i in order], color=PALETTE[3], marker="D",
                    markersize=4, linewidth=1.2, drawstyle="steps-post", zorder=2,
                    label=f"Pareto front ({len(front)})")
            for k, (x, y) in enumerate(front):
                ax.annotate(f"P{k + 1}", (x, y), xytext=(5, -9), textcoords="offset points", fontsize=7,
                            color=PALETTE[3], fontweight="bold")
        if marked:
            ax.scatter([xs[i] for i in marked], [ys[i] for i in marked], s=90, facecolors="none",
                       edgecolors=PALETTE[3], linewidths=1.5, label=marked_label, zorder=4)
        if marked or front:
            ax.legend(loc="best", fontsize=7)
        fig.colorbar(pts, ax=ax, label=labels[2])
        ax.margins(0.08)
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_title(title, loc="left")
        _eng_axes(ax)
        return _svg(fig)


def line(xs: Sequence[float], ys: Sequence[float], labels: tuple[str, str], title: str,
         marker_x: float | None = None, log: bool = False) -> str:
    """One series (round times of a swarm; hourly grid intensity), an optional vertical marker; ``log``: both
    axes logarithmic (x in powers of two)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(2.6)
        ax = fig.add_subplot()
        ax.plot(xs, ys, marker="o", color=PALETTE[0])
        if log:
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
        elif all(float(x).is_integer() for x in xs):  # rounds: no 0.25 of a round on the axis
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if marker_x is not None:
            ax.axvline(marker_x, color=PALETTE[3], linestyle="--")
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_title(title, loc="left")
        return _svg(fig)


def _covered(values: Any, x: Any) -> Any:
    """sum over v in ``values`` (sorted) of max(x - v, 0), at each x: the ramp a span's start or end adds."""
    import numpy as np

    k = np.searchsorted(values, x, side="right")
    sums = np.concatenate([[0.0], np.cumsum(values)])
    return k * x - sums[k]


def binned_phases(per_cat: Mapping[str, Sequence[tuple[float, float]]], lo: float, hi: float,
                  num_bins: int) -> list[tuple[float, float, str]]:
    """A row too busy to draw span by span, at the chart's resolution: ``num_bins`` columns from lo to hi, each
    drawn when the row is busy in it, in the category that takes most of it; runs of equal columns joined.
    Returns (start, width, category) bars."""
    import numpy as np

    edges = np.linspace(lo, hi, num_bins + 1)
    cats = list(per_cat)
    cover = np.zeros((len(cats), num_bins))
    for i, cat in enumerate(cats):
        spans = np.asarray(per_cat[cat], dtype=float).reshape(-1, 2)
        covered = _covered(np.sort(spans[:, 0]), edges) - _covered(np.sort(spans[:, 1]), edges)
        cover[i] = np.diff(covered)  # busy time of this category in each column
    busy, top = cover.sum(axis=0) > 0, cover.argmax(axis=0)
    bars: list[tuple[float, float, str]] = []
    j = 0
    while j < num_bins:
        k = j + 1
        while k < num_bins and busy[k] == busy[j] and top[k] == top[j]:
            k += 1
        if busy[j]:
            bars.append((float(edges[j]), float(edges[k] - edges[j]), cats[int(top[j])]))
        j = k
    return bars


def _row_bars(per_cat: Mapping[str, Sequence[tuple[float, float]]], lo: float, hi: float,
              exact: bool) -> list[tuple[float, float, str]]:
    """Every span of a row as a bar (``exact``, or a row of at most GANTT_RESOLUTION spans), else the row
    binned (binned_phases)."""
    if exact or sum(len(v) for v in per_cat.values()) <= GANTT_RESOLUTION:
        return [(a, b - a, cat) for cat, spans in per_cat.items() for a, b in spans]
    return binned_phases(per_cat, lo, hi, GANTT_RESOLUTION)


def gantt(rows: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], unit: str, title: str) -> str:
    """rows: track -> category -> (start, end) spans. One bar row per track, one colour per category."""
    import matplotlib
    from matplotlib.patches import Patch

    end = max((e for cats in rows.values() for spans in cats.values() for _, e in spans), default=1.0)
    start = min((s for cats in rows.values() for spans in cats.values() for s, _ in spans), default=0.0)
    cats = list(dict.fromkeys(c for per in rows.values() for c in per))
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)}
    exact = sum(len(spans) for per in rows.values() for spans in per.values()) <= GANTT_EXACT_SPANS
    with matplotlib.rc_context(RC):
        fig = _figure(0.9 + 0.24 * len(rows))
        ax = fig.add_subplot()
        least = (end - start) * GANTT_MIN_WIDTH
        for y, per in enumerate(rows.values()):
            bars = _row_bars(per, start, end, exact)
            for cat in per:
                mine = [(a, max(w, least)) for a, w, c in bars if c == cat]
                if mine:
                    # no outline: a 1 pt edge would paint over a neighbouring span narrower than a point
                    ax.broken_barh(mine, (y - 0.4, 0.8), facecolors=colour[cat], linewidth=0)
        ax.set_yticks(range(len(rows)), list(rows))
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, loc="left")
        handles = [Patch(color=colour[c], label=c) for c in cats]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), frameon=False)
        return _svg(fig)


HEATMAP_W_IN = 13.9  # a heatmap grid is drawn wide (1,000 points, 1,334 px); the page shows it as a wide figure


def heatmaps(grid: HeatGrid, metric: str, title: str) -> tuple[str, bool]:
    """report/heatmap.py's grid as SVG (vector cells, pcolormesh, not an embedded image), HEATMAP_W_IN wide;
    returns the SVG and whether the cells carry their values as text."""
    import matplotlib
    from matplotlib.figure import Figure

    from greentrain.report import heatmap

    panel_h = heatmap.panel_height_in(grid, 4.0 + 2.2 * len(grid.rows))
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(HEATMAP_W_IN, 1.0 + panel_h * len(grid.rows)), layout="constrained")
        font = heatmap.draw(fig, grid, metric, HEATMAP_W_IN, panel_h)
        fig.suptitle(title, x=0.02, ha="left")
        return _svg(fig), font is not None
