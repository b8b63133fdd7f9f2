"""`greentrain simulate` output: Rich tables of a swarm or a step, a matplotlib Gantt chart of a trace, and the
progress bar of a long swarm run."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from greentrain import units
from greentrain.report.files import check_plot_path, pyplot, save_figure
from greentrain.sim.cluster import StepSimResult
from greentrain.sim.results import SwarmResult
from greentrain.sim.trace import Trace

_COLORS = {"ingress": "#4c78a8", "compute": "#54a24b", "egress": "#f58518", "forward": "#54a24b",
           "backward": "#e45756", "p2p": "#9d755d", "dp": "#b279a2", "tp": "#72b7b2", "link": "#bab0ac"}


def render_swarm(res: SwarmResult, console: Console | None = None, max_rounds: int = 20) -> None:
    console = console or Console()
    console.print(f"[bold]Swarm[/bold] {res.num_devices} devices, model {res.model}, "
                  f"{res.num_tasks:,} tasks a round (tp_depth {res.tp_depth}, min_tp_size {res.min_tp_size}, "
                  f"{res.batch_tokens:,} tokens, "
                  f"{res.precision}), scheduler {res.scheduler}, seed {res.seed}")
    t = Table(title="Rounds")
    for col in ("round", "time s", "finished at s", "TFLOP/s achieved", "of swarm sum", "GB moved",
                "re-queued", "backups"):
        t.add_column(col, justify="right")
    for r in res.rounds[:max_rounds]:
        t.add_row(str(r.index), f"{r.time_s:,.3f}", f"{r.finish_s:,.3f}",
                  f"{r.achieved_flop_per_s / units.TFLOP:,.2f}", f"{100 * r.utilization:.1f} %",
                  f"{r.bytes_moved / units.GB:,.2f}", str(r.requeued), str(r.backups))
    if len(res.rounds) > max_rounds:
        t.add_row("...", "", "", "", "", "", "", "")
    console.print(t)
    console.print(_group_table(res))
    console.print(f"total {res.total_time_s:,.3f} s simulated for {len(res.rounds)} round(s); "
                  f"{res.num_events:,} events in {res.wall_s:.2f} s host time")


def _group_table(res: SwarmResult) -> Table:
    """Mean shares of the round time per device group, over all rounds."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0] * 7)
    names: dict[str, int] = {}
    for r in res.rounds:
        for d in r.devices:
            group = d.group
            names[group] = names.get(group, 0) + 1
            a = acc[group]
            for i, v in enumerate((d.ingress_s, d.compute_s, d.egress_s, d.idle_s, r.time_s)):
                a[i] += v
            a[5] += d.tasks_done
            a[6] += d.failures
    t = Table(title="Where the device time went (share of round time, mean over devices and rounds)")
    for col in ("devices", "count", "ingress", "compute", "egress", "idle", "tasks/round", "dropouts"):
        t.add_column(col, justify="right")
    n_rounds = len(res.rounds)
    for group, a in acc.items():
        tot = a[4] or 1.0
        t.add_row(group, str(names[group] // n_rounds), *(f"{100 * a[i] / tot:.1f} %" for i in range(4)),
                  f"{a[5] / names[group]:,.1f}", str(int(a[6])))
    return t


def render_step(res: StepSimResult, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]Step[/bold] {res.schedule}, pp {res.pp}, vpp {res.vpp}, "
                  f"{res.num_micro_batches} micro-batches; {res.num_events:,} events in {res.wall_s:.2f} s")
    t = Table(title="One training step, simulated")
    t.add_column("", justify="left")
    t.add_column("seconds", justify="right")
    for name, value in (("pipeline (forward, backward, sends)", res.pipeline_time_s),
                        ("exposed DP gradient reduction", res.dp_exposed_s),
                        ("optimizer step", res.optimizer_time_s), ("step time", res.step_time_s),
                        ("analytical step time (greentrain plan)", res.analytic_step_time_s)):
        t.add_row(name, f"{value:,.4f}")
    console.print(t)
    console.print(f"simulated vs analytical: {100 * res.error_vs_analytic:+.2f} %; "
                  f"pipeline bubble {100 * res.bubble_fraction:.1f} % of the pipeline time")
    s = Table(title="Stages")
    for col in ("stage", "compute s", "blocked sending s", "idle s", "slowdown"):
        s.add_column(col, justify="right")
    for st in res.stages:
        s.add_row(str(st.stage), f"{st.compute_s:,.4f}", f"{st.send_s:,.4f}", f"{st.idle_s:,.4f}",
                  f"{st.slowdown:g}")
    console.print(s)


def check_gantt_path(path: str | Path, flag: str = "--gantt") -> Path:
    """Fail before the simulation runs if the Gantt chart cannot be written (suffix .png, folder writable)."""
    return check_plot_path(path, flag, suffixes=(".png",))


def write_gantt(trace: Trace, path: str | Path, *, max_tracks: int = 64, title: str = "",
                flag: str = "--gantt") -> None:
    """A Gantt chart of the trace's device and link tracks (matplotlib, Agg), written atomically."""
    plt = pyplot()
    from matplotlib.patches import Patch

    every = trace.tracks()
    tracks = ([t for t in every if not t.startswith("link/")] or every)[:max_tracks]  # links: see --trace
    row = {name: i for i, name in enumerate(tracks)}
    bars: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for track, _, start, end, cat in trace:
        if track in row:
            bars[cat or "busy"].append((start, end - start, row[track]))
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.25 * len(tracks) + 1.5)))
    for cat, spans in bars.items():
        ys = [y for _, _, y in spans]
        ax.barh(ys, [w for _, w, _ in spans], left=[s for s, _, _ in spans], height=0.8,
                color=_COLORS.get(cat, "#888888"), edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(tracks)), [t.split("/", 1)[-1] for t in tracks], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(title or "greentrain simulate")
    ax.legend(handles=[Patch(color=_COLORS.get(c, "#888888"), label=c) for c in bars], loc="upper right",
              fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, flag=flag)


class progress:
    """A Rich progress bar on stderr for long runs; yields ``advance(completed)``, or None when disabled or
    stderr is not a terminal."""

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.total, self.label = total, label
        self.enabled = enabled and sys.stderr.isatty()
        self._bar: Progress | None = None

    def __enter__(self) -> Callable[[int], None] | None:
        if not self.enabled:
            return None
        bar = self._bar = Progress(console=Console(stderr=True), transient=True)
        bar.start()
        task = bar.add_task(self.label, total=self.total)
        return lambda completed: bar.update(task, completed=completed)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
