"""`greentrain calibrate` output: the fitted constants against where they started, and the error before and after
on the runs fitted and on the runs held back."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from greentrain.calibrate.fit import Calibration, Score


def _row(name: str, s: Score | None) -> tuple[str, str, str, str]:
    if s is None:
        return (name, "-", "-", "-")
    mem = "n/a" if s.memory_error_median is None else f"{s.memory_error_median:.1%}"
    return (f"{name} ({s.num_runs})", f"{100 * s.mfu_error_mean:.1f} pt", f"{s.time_error_median:.1%}", mem)


def render_calibration(c: Calibration, path: str, console: Console) -> None:
    t = Table(title=f"calibration of {c.chip} under {c.framework}: {c.num_fit} runs fitted, {c.num_holdout} held "
              "back", title_justify="left")
    t.add_column("constant")
    t.add_column("start", justify="right")
    t.add_column("fitted", justify="right")
    s, f = c.start, c.fitted
    t.add_row("kernel efficiency", f"{s.kernel_efficiency:.3f}", f"{f.kernel_efficiency:.3f}")
    t.add_row("host time per layer", f"{1e3 * s.host_layer_s:.2f} ms", f"{1e3 * f.host_layer_s:.2f} ms")
    t.add_row("  + per TP rank, pipeline across nodes", f"{1e3 * s.host_layer_s_per_tp_pp_nodes:.2f} ms",
              f"{1e3 * f.host_layer_s_per_tp_pp_nodes:.2f} ms")
    t.add_row("network efficiency", f"{s.inter_node_link:.3f}", f"{f.inter_node_link:.3f}")
    t.add_row("allocator fragmentation", f"{s.fragmentation:.3f}", f"{f.fragmentation:.3f}")
    console.print(t)
    e = Table(title="error", title_justify="left")
    for col in ("runs", "MFU error, mean", "step time error, median", "peak memory error, median"):
        e.add_column(col, justify="right" if col != "runs" else "left")
    for name, score in (("fitted, before", c.fit_before), ("fitted, after", c.fit_after),
                        ("held back, before", c.holdout_before), ("held back, after", c.holdout_after)):
        e.add_row(*_row(name, score))
    console.print(e)
    if c.note:
        console.print(c.note)
    console.print(f"wrote {path}")
