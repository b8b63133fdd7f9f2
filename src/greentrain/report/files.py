"""Report outputs: plot paths and headless matplotlib; the path checks and atomic writes live in greentrain.files
(one place for every output greentrain writes) and are re-exported here for the report modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.files import check_output_path, current_umask, write_atomic

__all__ = ["SUFFIXES", "check_output_path", "check_plot_path", "current_umask", "pyplot", "save_figure",
           "write_atomic"]

SUFFIXES = (".png", ".pdf", ".svg")


def check_plot_path(path: str | Path, flag: str = "--plot", suffixes: tuple[str, ...] = SUFFIXES) -> Path:
    """Fail before any work if the plot cannot be written: suffix, folder, writable, matplotlib installed."""
    p = check_output_path(path, flag, suffixes)
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


def save_figure(fig: Any, path: str | Path, dpi: int = 120, flag: str = "--plot") -> Path:
    """Write ``fig`` atomically to ``path`` (format from the suffix); close the figure."""
    p = Path(path)
    try:
        return write_atomic(p, flag, lambda tmp: fig.savefig(tmp, dpi=dpi), suffix=p.suffix or ".png")
    finally:
        pyplot().close(fig)
