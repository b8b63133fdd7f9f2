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
from typing import Any

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


def scatter(xs: Sequence[float], ys: Sequence[float], colours: Sequence[float], labels: tuple[str, str, str],
            marked: Sequence[int] = (), title: str = "") -> str:
    """Points x by y coloured by a third quantity; ``marked`` indices ringed (a Pareto front)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(3.4)
        ax = fig.add_subplot()
        pts = ax.scatter(xs, ys, c=colours, cmap="viridis", s=28)
        if marked:
            ax.scatter([xs[i] for i in marked], [ys[i] for i in marked], s=90, facecolors="none",
                       edgecolors=PALETTE[3], linewidths=1.5, label="Pareto front")
            ax.legend(loc="lower right")
        fig.colorbar(pts, ax=ax, label=labels[2])
        ax.set_xlabel(labels[0])
        ax.set_ylabel(labels[1])
        ax.set_title(title, loc="left")
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


HEATMAP_MIN_CELL_IN = 0.33  # a cell at least this wide (inches) has its value written in it (5.5 pt text)


def _cell_text(v: float) -> str:
    return f"{v / 1e3:.3g}k" if abs(v) >= 1e3 else f"{v:.3g}"


def heatmaps(panels: Sequence[tuple[str, Sequence[float], Sequence[float], Sequence[Sequence[float]]]],
             labels: tuple[str, str, str], title: str, cols: int = 2) -> str:
    """Panels in a grid of ``cols`` columns (title, x values, y values, values[y][x]; NaN: no value, hatched), one
    shared colour scale and one colourbar; drawn as vector cells (pcolormesh), not an embedded image; small panels
    carry their values as text (thousands as ``12.3k``)."""
    import math

    import matplotlib
    import numpy as np

    finite = [v for _, _, _, grid in panels for row in grid for v in row if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    cols = max(1, min(len(panels), cols))
    rows = -(-len(panels) // cols)
    with matplotlib.rc_context(RC):
        fig = _figure(0.8 + 2.3 * rows * min(1.0, 2.5 / cols) + 0.4)
        axes = fig.subplots(rows, cols, squeeze=False)
        mesh = None
        for k, (ax, (name, xs, ys, grid)) in enumerate(zip(axes.flat, panels, strict=False)):
            values = np.array(grid, dtype=float)
            ax.add_patch(matplotlib.patches.Rectangle((0, 0), len(xs), len(ys), facecolor="#eeeeee",
                                                      edgecolor="#999999", hatch="///", linewidth=0, zorder=0))
            mesh = ax.pcolormesh(np.arange(len(xs) + 1), np.arange(len(ys) + 1), np.ma.masked_invalid(values),
                                 cmap="viridis", vmin=lo, vmax=hi, zorder=1)
            if (FIG_W_IN - 1.2) / cols / max(len(xs), 1) >= HEATMAP_MIN_CELL_IN:
                for (y, x), v in np.ndenumerate(values):
                    if math.isfinite(v):
                        dark = (v - lo) / ((hi - lo) or 1.0) < 0.6
                        ax.text(x + 0.5, y + 0.5, _cell_text(float(v)), ha="center", va="center",
                                fontsize=5.5, color="white" if dark else "black")
            ax.set_xticks(np.arange(len(xs)) + 0.5, [f"{x:g}" for x in xs], fontsize=7)
            ax.set_yticks(np.arange(len(ys)) + 0.5, [f"{y:g}" for y in ys], fontsize=7)
            if k // cols == rows - 1:
                ax.set_xlabel(labels[0])
            if k % cols == 0:
                ax.set_ylabel(labels[1])
            ax.set_title(name, loc="left", fontsize=7 if cols <= 2 else 6)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        if mesh is not None:
            fig.colorbar(mesh, ax=axes, label=labels[2])
        fig.suptitle(title, x=0.02, ha="left")
        return _svg(fig)
