"""The Rich consoles the CLI prints through (cli/ imports Rich only here): stdout at the terminal's width or the
table's natural width when piped, or Rich's default console."""

from __future__ import annotations

import sys

from rich.console import Console

PIPE_WIDTH = 200  # piped or captured output: wide enough for every table, never Rich's wrapped 80 columns


def stdout_console() -> Console:
    console = Console(file=sys.stdout)
    return console if console.is_terminal else Console(file=sys.stdout, width=PIPE_WIDTH)


def default_console() -> Console:
    """Rich's default console (stdout; 80 columns when piped), as `plan`, `validate` and `calibrate` print."""
    return Console()
