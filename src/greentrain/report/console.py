"""The Rich console for a command's stdout: the terminal's width, or the table's natural width when piped."""

from __future__ import annotations

import sys

from rich.console import Console

PIPE_WIDTH = 200  # piped or captured output: wide enough for every table, never Rich's wrapped 80 columns


def stdout_console() -> Console:
    console = Console(file=sys.stdout)
    return console if console.is_terminal else Console(file=sys.stdout, width=PIPE_WIDTH)
