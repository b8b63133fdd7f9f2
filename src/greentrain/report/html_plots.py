"""The HTML report's plots: matplotlib figures written as inline SVG (no pyplot state, no files, no fonts
fetched: text stays text in the page's own sans-serif font).

Each function takes plain numbers and returns one ``<svg ...>...</svg>`` string. A Gantt chart merges the
spans of a row that are closer than a thousandth of the chart's width (what a screen cannot separate), so a
trace of a million spans still draws in a bounded page.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

FIG_W_IN = 7.5  # figure width, inches (at the SVG's 72 points per inch: 540 px)
GANTT_RESOLUTION = 1000  # Gantt rows merge spans closer than duration / this
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


def merge_spans(spans: Sequence[tuple[float, float]], min_gap: float) -> list[tuple[float, float]]:
    """Sorted (start, end) spans with those closer than ``min_gap`` joined."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= min_gap:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def gantt(rows: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], unit: str, title: str) -> str:
    """rows: track -> category -> (start, end) spans. One bar row per track, one colour per category."""
    import matplotlib
    from matplotlib.patches import Patch

    end = max((e for cats in rows.values() for spans in cats.values() for _, e in spans), default=1.0)
    start = min((s for cats in rows.values() for spans in cats.values() for s, _ in spans), default=0.0)
    gap = (end - start) / GANTT_RESOLUTION
    cats = list(dict.fromkeys(c for per in rows.values() for c in per))
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)}
    with matplotlib.rc_context(RC):
        fig = _figure(0.9 + 0.24 * len(rows))
        ax = fig.add_subplot()
        for y, (_, per) in enumerate(rows.items()):
            for cat, spans in per.items():
                merged = merge_spans(spans, gap)
                ax.broken_barh([(s, e - s) for s, e in merged], (y - 0.4, 0.8), color=colour[cat])
        ax.set_yticks(range(len(rows)), list(rows))
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, loc="left")
        handles = [Patch(color=colour[c], label=c) for c in cats]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), frameon=False)
        return _svg(fig)


def heatmaps(panels: Sequence[tuple[str, Sequence[float], Sequence[float], Sequence[Sequence[float]]]],
             labels: tuple[str, str, str], title: str) -> str:
    """One heatmap per panel (title, x values, y values, values[y][x]; NaN: no value, left blank), one shared
    colour scale; drawn as vector cells (pcolormesh), not an embedded image."""
    import math

    import matplotlib
    import numpy as np

    finite = [v for _, _, _, grid in panels for row in grid for v in row if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    cols = min(len(panels), 2)
    rows = -(-len(panels) // cols)
    with matplotlib.rc_context(RC):
        fig = _figure(0.6 + 2.6 * rows)
        axes = fig.subplots(rows, cols, squeeze=False)
        mesh = None
        for ax, (name, xs, ys, grid) in zip(axes.flat, panels, strict=False):
            mesh = ax.pcolormesh(np.arange(len(xs) + 1), np.arange(len(ys) + 1), np.array(grid, dtype=float),
                                 cmap="viridis", vmin=lo, vmax=hi)
            ax.set_xticks(np.arange(len(xs)) + 0.5, [f"{x:g}" for x in xs])
            ax.set_yticks(np.arange(len(ys)) + 0.5, [f"{y:g}" for y in ys])
            ax.set_xlabel(labels[0])
            ax.set_ylabel(labels[1])
            ax.set_title(name, loc="left")
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        if mesh is not None:
            fig.colorbar(mesh, ax=axes, label=labels[2])
        fig.suptitle(title, x=0.02, ha="left")
        return _svg(fig)
