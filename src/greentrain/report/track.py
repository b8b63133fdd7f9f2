"""The measurement summary of ``greentrain track`` as Rich tables: run figures, then per-module time, FLOPs and
energy, then the notes. The rows are measure/outputs.py's (a Tracker prints the same rows as plain text)."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain.measure.outputs import MODULE_COLUMNS, module_rows, summary_rows, summary_title
from greentrain.measure.summary import Measurement


def render_table(m: Measurement, file: Any = None) -> None:
    """Print the summary tables to ``file`` (stdout); a Tracker's printer (``Tracker(print_summary=...)``)."""
    console = Console(file=file or sys.stdout)
    t = Table(title=summary_title(m))
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for k, v in summary_rows(m):
        t.add_row(k, v)
    console.print(t)
    if m.modules:
        mt = Table(title="per module, per step")
        for c in MODULE_COLUMNS:
            mt.add_column(c, justify="left" if c == "module" else "right")
        for row in module_rows(m):
            mt.add_row(*row)
        console.print(mt)
    for note in m.notes:
        console.print(f"note: {note}")
