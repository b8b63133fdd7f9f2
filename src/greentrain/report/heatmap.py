"""The offload heatmap as one grid of panels, drawn the same way for the PNG (`offload heatmap -o`) and the HTML
report (`offload heatmap --html`, `greentrain report`): rows model and chip, columns sequence length, each panel
device GiB (x) by host GiB (y); one colour scale and one colourbar for every panel; column titles on the top row,
row names on the left column, one x label; each cell's value written in it when the cell is wide enough for text
of at least MIN_FONT_PT (else the caption says so and the page's table has the numbers); hatched where the plan
does not fit.

Takes the cells as mappings (``GridCell.to_dict()`` or an offload_heatmap result's cells), so the two outputs
cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MIN_FONT_PT = 5.5  # smallest cell text drawn (7.3 px on a page at 96 px per inch)
MAX_FONT_PT = 8.0
CHAR_EM = 0.62  # width of a digit in DejaVu Sans, in ems (0.636); cells fit the text with 10 % to spare
LEFT_IN, RIGHT_IN, GAP_IN = 0.75, 0.95, 0.08  # y labels, the colourbar, the space between panels


@dataclass(frozen=True, slots=True)
class MetricStyle:
    label: str  # colourbar label with unit
    scale: float  # plotted value = metric x scale
    lower_is_better: bool


STYLES = {"tokens_per_s": MetricStyle("thousand tokens/s", 1e-3, False), "mfu": MetricStyle("MFU (%)", 100.0, False),
          "step_time_s": MetricStyle("step time (s)", 1.0, True),
          "joules_per_token": MetricStyle("J per token", 1.0, True),
          "kg_co2e_per_mtok": MetricStyle("kg CO2e per M tokens", 1.0, True)}


def style(metric: str) -> MetricStyle:
    return STYLES.get(metric, MetricStyle(metric, 1.0, False))


def value_text(v: float) -> str:
    """A cell's number in at most 4 characters below 1,000: ``15.9``, ``6.39``, ``1.00``, ``0.98``, ``312``."""
    a = abs(v)
    if a >= 99.95:
        return f"{v:.0f}"
    if a >= 9.995:
        return f"{v:.1f}"
    return f"{v:.2f}" if a >= 0.0995 else f"{v:.2g}"


def error_text(err: float) -> str:
    """predicted / measured - 1 as a signed percentage: ``+4.6%``, ``-0.3%`` (never ``-0%``), ``+12%``."""
    pct = 100 * err
    if abs(pct) < 0.05:
        return "0.0%"
    return f"{pct:+.1f}%" if abs(pct) < 9.95 else f"{pct:+.0f}%"


def wrapped_title(text: str, width_in: float, fontsize: float = 9.0) -> str:
    """``text`` in lines that fit a figure ``width_in`` wide (a narrow grid's title would be cut at both ends)."""
    import textwrap

    return textwrap.fill(text, width=max(30, int(0.92 * width_in * 72 / (CHAR_EM * fontsize))))


@dataclass(frozen=True, slots=True)
class HeatGrid:
    rows: tuple[str, ...]  # "model, chip"
    cols: tuple[int, ...]  # sequence lengths
    xs: tuple[float, ...]  # device GiB, every panel
    ys: tuple[float, ...]  # host GiB, every panel
    values: Mapping[tuple[int, int], Any]  # (row, col) -> array [len(ys), len(xs)] of plotted values, NaN: none
    errors: Mapping[tuple[int, int], Any]  # same shape: predicted / measured - 1, NaN where not measured


def grid_from_cells(cells: Sequence[Mapping[str, Any]], metric: str) -> HeatGrid:
    """Every (model, chip, sequence) group of ``cells`` on the union of their device and host caps."""
    import numpy as np

    rows = list(dict.fromkeys((str(c.get("model")), str(c.get("chip"))) for c in cells))
    cols = list(dict.fromkeys(int(c.get("seq_len", 0)) for c in cells))
    xs = sorted({float(c.get("device_gib", 0.0)) for c in cells})
    ys = sorted({float(c.get("host_gib", 0.0)) for c in cells})
    values = {(r, k): np.full((len(ys), len(xs)), math.nan) for r in range(len(rows)) for k in range(len(cols))}
    errors = {key: np.full((len(ys), len(xs)), math.nan) for key in values}
    scale = style(metric).scale
    for c in cells:
        v, err = c.get(metric), c.get("error")
        key = (rows.index((str(c.get("model")), str(c.get("chip")))), cols.index(int(c.get("seq_len", 0))))
        at = (ys.index(float(c.get("host_gib", 0.0))), xs.index(float(c.get("device_gib", 0.0))))
        if c.get("fits") and isinstance(v, (int, float)) and math.isfinite(v):
            values[key][at] = float(v) * scale
            if isinstance(err, (int, float)):
                errors[key][at] = float(err)
    return HeatGrid(tuple(f"{m}, {ch}" for m, ch in rows), tuple(cols), tuple(xs), tuple(ys), values, errors)


def cell_font_pt(grid: HeatGrid, width_in: float, panel_h_in: float) -> float | None:
    """The cell text size that fits a cell of a figure ``width_in`` wide (None: too small to write in)."""
    import numpy as np

    texts = [value_text(float(v)) for a in grid.values.values() for v in a.ravel() if math.isfinite(v)]
    if not texts:
        return None
    lines = 2 if any(np.isfinite(e).any() for e in grid.errors.values()) else 1
    chars = max(max(len(t) for t in texts), 5 if lines == 2 else 0)  # "+4.6%", "-12%"
    panel_w_in = (width_in - LEFT_IN - RIGHT_IN) / len(grid.cols) - GAP_IN
    cell_w_pt, cell_h_pt = 72 * panel_w_in / len(grid.xs), 72 * panel_h_in / len(grid.ys)
    size = min(MAX_FONT_PT, 0.9 * cell_w_pt / (CHAR_EM * chars), 0.8 * cell_h_pt / (1.25 * lines))
    return size if size >= MIN_FONT_PT else None


def panel_height_in(grid: HeatGrid, max_height_in: float) -> float:
    """Cells about 0.3 in tall, a panel 1.5 to 2.6 in, the whole grid within ``max_height_in``."""
    return min(max(1.5, min(2.6, 0.3 * len(grid.ys))), (max_height_in - 1.0) / len(grid.rows))


def _ticks(ax: Any, values: Sequence[float], cell_pt: float, axis: str) -> None:
    """Every value as a tick label where it fits, else every 2nd, 3rd, ... (7 pt labels)."""
    labels = [f"{v:g}" for v in values]
    width_pt = 7 * CHAR_EM * max(len(s) for s in labels) + 4 if axis == "x" else 10.0
    step = max(1, math.ceil(width_pt / max(cell_pt, 1e-9)))
    pos = [i + 0.5 for i in range(0, len(values), step)]
    (ax.set_xticks if axis == "x" else ax.set_yticks)(pos, labels[::step], fontsize=7)


def draw(fig: Any, grid: HeatGrid, metric: str, width_in: float, panel_h_in: float) -> float | None:
    """The grid of panels into ``fig`` (sized by the caller); returns the cell text size (None: no text)."""
    import matplotlib
    import numpy as np

    st = style(metric)
    finite = np.concatenate([a[np.isfinite(a)] for a in grid.values.values()] + [np.zeros(0)])
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    norm = matplotlib.colors.Normalize(lo, hi if hi > lo else lo + 1.0)
    cmap = "viridis_r" if st.lower_is_better else "viridis"
    font = cell_font_pt(grid, width_in, panel_h_in)
    axes = fig.subplots(len(grid.rows), len(grid.cols), squeeze=False, sharex=True, sharey=True)
    panel_w_pt = 72 * ((width_in - LEFT_IN - RIGHT_IN) / len(grid.cols) - GAP_IN)
    mesh = None
    for (r, k), values in grid.values.items():
        ax = axes[r][k]
        ax.add_patch(matplotlib.patches.Rectangle((0, 0), len(grid.xs), len(grid.ys), facecolor="#eeeeee",
                                                  edgecolor="#999999", hatch="///", linewidth=0, zorder=0))
        mesh = ax.pcolormesh(np.arange(len(grid.xs) + 1), np.arange(len(grid.ys) + 1),
                             np.ma.masked_invalid(values), cmap=cmap, norm=norm, zorder=1,
                             edgecolors="face", linewidth=0.2)  # no hairline seams between SVG cells
        if font is not None:
            for (y, x), v in np.ndenumerate(values):
                if math.isfinite(v):
                    text = value_text(float(v))
                    err = grid.errors[(r, k)][y, x]
                    text += f"\n{error_text(err)}" if math.isfinite(err) else ""
                    shade = norm(v) if not st.lower_is_better else 1.0 - norm(v)
                    ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=font,
                            color="white" if shade < 0.6 else "black")
        _ticks(ax, grid.xs, panel_w_pt / len(grid.xs), "x")
        _ticks(ax, grid.ys, 72 * panel_h_in / len(grid.ys), "y")
        ax.tick_params(length=2, labelleft=k == 0, labelbottom=r == len(grid.rows) - 1)
        if r == 0:
            ax.set_title(f"sequence {grid.cols[k]:,} tokens", fontsize=8)
        if k == 0:
            ax.set_ylabel(f"{grid.rows[r]}\nhost GiB", fontsize=8)
    fig.supxlabel("device memory cap (GiB)", fontsize=8)
    if mesh is not None:
        fig.colorbar(mesh, ax=axes, label=st.label + (" (lower is better)" if st.lower_is_better else ""),
                     shrink=min(1.0, 0.6 + 0.2 * len(grid.rows)))
    return font
