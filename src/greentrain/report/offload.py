"""`greentrain offload` output (issue 14; issue 17: every renderer lives in report/): a plan as JSON or a Rich
table, a grid as heatmap panels (matplotlib), a training run next to its prediction. offload/ itself imports
neither Rich nor matplotlib."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain import units
from greentrain.offload.grid import GridCell
from greentrain.offload.plan import OffloadPlan
from greentrain.report.files import pyplot, save_figure


def plan_to_dict(plan: OffloadPlan) -> dict[str, Any]:
    gib = units.bytes_to_gib
    return {
        "framework": plan.framework, "model": plan.model, "chip": plan.chip, "seq_len": plan.seq_len,
        "device_gib": gib(plan.caps.device_bytes), "host_gib": gib(plan.caps.host_bytes),
        "tokens_per_s": plan.tokens_per_s, "step_time_s": plan.step_time_s, "mfu": plan.mfu, "hfu": plan.hfu,
        "recompute_fraction": plan.recompute_fraction, "bound": plan.bound, "num_rounds": plan.num_rounds,
        "tokens_per_step": plan.tokens_per_step, "chunk_tokens": plan.chunk_tokens,
        "chunks_per_round": plan.chunks_per_round, "resident_layers": plan.resident_layers,
        "prefetch_depth": plan.prefetch_depth, "activation_slots": plan.slots(), "optimizer_on": plan.optimizer_on,
        "optimizer_time_s": plan.optimizer_time_s,
        "device_memory_gib": {k: gib(v) for k, v in plan.device.parts} | {"total": gib(plan.device.total_bytes)},
        "host_memory_gib": {k: gib(v) for k, v in plan.host.parts} | {"total": gib(plan.host.total_bytes)},
        "per_layer": {"fwd_s": plan.per_layer.fwd_s, "bwd_s": plan.per_layer.bwd_s,
                      "recompute_s": plan.per_layer.recompute_s, "h2d_bytes": plan.per_layer.h2d_bytes,
                      "d2h_bytes": plan.per_layer.d2h_bytes, "exposed_s_per_round": plan.per_layer.exposed_s},
        "minimum_device_gib": gib(plan.minimum_device_bytes), "minimum_host_gib": gib(plan.minimum_host_bytes),
        "needs_sequence_chunking": plan.needs_sequence_chunking, "scenario_hash": plan.scenario_hash,
    }


def render_plan(plan: OffloadPlan, console: Console | None = None) -> None:
    """`greentrain offload plan` as Rich tables, on Rich's default console unless one is given."""
    console = console or Console()
    gib = units.bytes_to_gib
    console.print(f"[bold]{plan.model}[/bold] on {plan.chip}, {plan.seq_len:,} tokens per sequence, device "
                  f"{gib(plan.caps.device_bytes):g} GiB / host {gib(plan.caps.host_bytes):g} GiB "
                  f"({plan.framework} profile)")
    t = Table(title="where the state lives (GiB)")
    t.add_column("category")
    t.add_column("device", justify="right")
    t.add_column("host", justify="right")
    dev, host = plan.device.as_dict(), plan.host.as_dict()
    for name in list(dev) + [n for n in host if n not in dev]:
        t.add_row(name.replace("_", " "), f"{gib(dev[name]):.2f}" if name in dev else "",
                  f"{gib(host[name]):.2f}" if name in host else "")
    t.add_row("[bold]total[/bold]", f"{gib(plan.device.total_bytes):.2f}", f"{gib(plan.host.total_bytes):.2f}")
    console.print(t)
    s = plan.slots()
    console.print(f"resident layers {plan.resident_layers}, prefetch depth {plan.prefetch_depth}; activation slots "
                  f"(layer x chunk): device {s['device']}, host input {s['input']}, attention {s['attention']}, "
                  f"full {s['full']}; optimizer {plan.optimizer_on}")
    lt = plan.per_layer
    p = Table(title=f"one streamed layer, one round ({plan.chunks_per_round} x {plan.chunk_tokens:,} tokens)")
    for col in ("forward", "backward", "recompute", "host->device", "device->host"):
        p.add_column(col, justify="right")
    p.add_row(f"{lt.fwd_s * 1e3:.2f} ms", f"{lt.bwd_s * 1e3:.2f} ms", f"{lt.recompute_s * 1e3:.2f} ms",
              f"{lt.h2d_bytes / 1e6:,.0f} MB", f"{lt.d2h_bytes / 1e6:,.0f} MB")
    console.print(p)
    console.print(f"step {plan.step_time_s:.2f} s ({plan.num_rounds} rounds, {plan.tokens_per_step:,} tokens, "
                  f"optimizer {plan.optimizer_time_s:.3f} s): [bold]{plan.tokens_per_s:,.0f} tokens/s[/bold], MFU "
                  f"{plan.mfu:.3f}, HFU {plan.hfu:.3f}, recompute {plan.recompute_fraction:.1%} of FLOPs; bound: "
                  f"{plan.bound}; exposed transfer {lt.exposed_s * plan.num_rounds:.2f} s per step")


MAX_FIG_W_IN, MAX_FIG_H_IN = 15.0, 9.5  # the whole grid fits a laptop screen (1,800 x 1,140 px at 120 dpi)
PANEL_W_IN = (2.0, 6.0)  # a panel's width bounds before the figure's width bound


def heatmap_layout(cells: Sequence[GridCell]) -> tuple[list[tuple[str, str]], list[int]]:
    """The grid's rows, (model, chip) in the order given, and its columns, the sequence lengths in order."""
    rows = list(dict.fromkeys((c.model, c.chip) for c in cells))
    return rows, list(dict.fromkeys(c.seq_len for c in cells))


def heatmap_figure(cells: Sequence[GridCell], metric: str, framework: str) -> Any:
    """report/heatmap.py's grid (rows model and chip, columns sequence length, device x host GiB panels, one
    colour scale, values in the cells; with measured cells each annotation adds the error, predicted / measured
    - 1) in a figure at most MAX_FIG_W_IN x MAX_FIG_H_IN inches."""
    from greentrain.report import heatmap

    grid = heatmap.grid_from_cells([c.to_dict() for c in cells], metric)
    panel_w = min(max(PANEL_W_IN[0], 0.42 * len(grid.xs)), PANEL_W_IN[1])
    width = min(MAX_FIG_W_IN, heatmap.LEFT_IN + heatmap.RIGHT_IN + (panel_w + heatmap.GAP_IN) * len(grid.cols))
    panel_h = heatmap.panel_height_in(grid, MAX_FIG_H_IN)
    fig = pyplot().figure(figsize=(width, 1.0 + panel_h * len(grid.rows)), layout="constrained")
    font = heatmap.draw(fig, grid, metric, width, panel_h)
    note = "" if font is not None else "; cells too small to write in (--json has every value)"
    fig.suptitle(heatmap.wrapped_title(f"offload planner ({framework} profile): {heatmap.style(metric).label} by "
                                       f"host and device memory; hatched: does not fit{note}", width), fontsize=9)
    return fig


def write_heatmap(cells: Sequence[GridCell], metric: str, path: str | Path, framework: str) -> Path:
    """heatmap_figure written to ``path`` (PNG, PDF or SVG)."""
    return save_figure(heatmap_figure(cells, metric, framework), path, flag="--output")


def render_train(result: dict[str, Any], console: Console | None = None) -> None:
    """`greentrain offload train`: measured tokens/s, MFU and peaks beside the planner's (offload/launch.py)."""
    c = console or Console()
    c.print(f"[bold]{result['model']}[/bold], executor {result.get('executor', 'greentrain')}, on "
            f"{result['device']}, seq {result['seq_len']:,}, device "
            f"{result['device_gib']:g} GiB / host {result['host_gib']:g} GiB, {result['steps']} steps x "
            f"{result['micro_batches']} micro-batches; placement {result['placement']}")
    t = Table()
    for col in ("", "tokens/s", "MFU", "device peak GiB", "host GiB"):
        t.add_column(col, justify="right")
    mfu = f"{result['mfu']:.3f}" if result["mfu"] is not None else "-"
    peak = result["device_peak_gib"]
    t.add_row("measured", f"{result['tokens_per_s']:,.0f}", mfu, f"{peak:.4f}" if peak is not None else "-",
              f"{result['host_peak_gib']:.4f}")
    p = result["predicted"]
    t.add_row(f"predicted ({result['chip_for_prediction']})", f"{p['tokens_per_s']:,.0f}", f"{p['mfu']:.3f}",
              f"{p['device_gib']:.4f}", f"{p['host_gib']:.4f}")
    c.print(t)
    c.print(f"losses {', '.join(f'{x:.4f}' for x in result['losses'])}")
    if result["note"]:
        c.print(result["note"])
