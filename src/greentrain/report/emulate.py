"""`greentrain emulate` output: one Rich table per case, and the spinner that says which phase is running."""

from __future__ import annotations

from rich.console import Console
from rich.status import Status
from rich.table import Table

from greentrain.emulate.results import EmulationResult
from greentrain.report.console import stdout_console
from greentrain.units import GFLOP, MIB


def emulation_table(result: EmulationResult) -> Table:
    """The seed's statistics of one case: policy, FLOPs, host and device traffic, time and error."""
    t = result.total
    table = Table(title=f"{result.label}  ({result.world_size} ranks, {result.backend})", show_header=False)
    rows = [("policy", result.policy),
            ("flops", f"{t.flops:,}  ({t.flops / GFLOP:.3f} GFLOP)"),
            ("h2d messages / bytes", f"{t.h2d_messages:,} / {t.h2d_bytes:,}  ({t.h2d_bytes / MIB:.2f} MiB)"),
            ("d2d messages / bytes (naive)", f"{t.d2d_messages:,} / {t.d2d_bytes:,}  ({t.d2d_bytes / MIB:.2f} MiB)"),
            ("ring bytes (estimate.comm)", f"{t.ring_bytes:,.0f}  ({t.ring_bytes / MIB:.2f} MiB)"),
            ("collectives recorded", f"{result.num_collectives:,}  (comm time {result.comm_time_s:.4f} s)"),
            ("time (slowest rank)", f"{result.time_s:.4f} s"),
            ("max abs / rel error", f"{result.max_abs_error:.3e} / {result.max_rel_error:.3e}  "
                                    f"({'ok' if result.ok else 'FAILED'}, tolerance {result.tolerance:g})")]
    if t.wire_bytes:
        rows.insert(5, ("wire bytes (ring, counted)", f"{t.wire_bytes:,}"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def render_emulation(result: EmulationResult, console: Console | None = None) -> None:
    (console or stdout_console()).print(emulation_table(result))


class Spinner:
    """The phase now running, on stderr, only at a terminal (nothing in pipes or logs). ``quiet`` stops the
    display's thread (the launcher forks its ranks from this process); the next ``phase`` resumes it."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._status: Status | None = None
        self._running = False

    @property
    def active(self) -> bool:
        return self.console.is_terminal

    def phase(self, text: str) -> None:
        if not self.active:
            return
        if self._status is None:
            self._status = self.console.status(f"emulate: {text}")
        else:
            self._status.update(f"emulate: {text}")
        if not self._running:
            self._status.start()
            self._running = True

    def quiet(self) -> None:
        if self._status is not None and self._running:
            self._status.stop()
            self._running = False

    def __enter__(self) -> Spinner:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.quiet()
