"""Shared matplotlib plumbing: headless backend, path checks, atomic writes (no half-written file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError

SUFFIXES = (".png", ".pdf", ".svg")


def check_plot_path(path: str | Path, flag: str = "--plot") -> Path:
    """Fail before any work if the plot cannot be written: suffix, folder, matplotlib installed."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise ConfigError(flag, str(path), f"must end in {', '.join(SUFFIXES)}")
    if not (p.parent if str(p.parent) else Path(".")).is_dir():
        raise ConfigError(flag, str(path), "the folder does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(flag, str(path), "needs matplotlib: pip install 'greentrain[plot]'") from None
    return p


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` to a temporary file beside ``path`` and rename it into place; close the figure."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=p.suffix or ".png", dir=p.parent if str(p.parent) else ".")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        pyplot().close(fig)
    return p
