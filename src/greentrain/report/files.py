"""Output files: path checks before any work, atomic writes (no half-written file), lazy headless matplotlib.

Every file greentrain writes on a user's request (plots, Gantt charts, Chrome traces) goes through
``check_output_path`` before the work starts and ``write_atomic`` at the end: a temporary file beside the
target, the process umask applied to its mode (mkstemp creates 0600), then a rename. A path that cannot be
written is a ``ConfigError`` naming the flag and the path, never a traceback.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError

SUFFIXES = (".png", ".pdf", ".svg")
_FILE_MODE = 0o666  # what open(..., "w") asks for; the umask is taken off it


def _folder(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_output_path(path: str | Path, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Fail before any work if ``path`` cannot be written: suffix, folder exists, a file can be created in it.

    The folder is probed by creating and removing a temporary file in it: permission bits, read-only mounts,
    pseudo file systems (/proc) and root's overrides are all answered by the kernel, not guessed.
    """
    p = Path(path)
    if suffixes and p.suffix.lower() not in suffixes:
        raise ConfigError(flag, str(path), f"must end in {' or '.join(suffixes)}")
    folder = _folder(p)
    if not folder.is_dir():
        rule = "its directory is not a directory" if folder.exists() else "its directory does not exist"
        raise ConfigError(flag, str(path), rule)
    if p.is_dir():
        raise ConfigError(flag, str(path), "is a directory, not a file")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise ConfigError(flag, str(path), f"cannot write in {folder}: {_reason(exc)}") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
    return p


def current_umask() -> int:
    """The process umask (read by setting it and putting it back; the restrictive 0o077 meanwhile)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, flag: str, write: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, give it the umask's mode, rename it into place.

    An OSError on the way (folder gone, disk full, permission) becomes a ConfigError naming ``flag`` and
    ``path``; the temporary file is removed and ``path`` is left as it was.
    """
    p = Path(path)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=suffix or p.suffix, dir=_folder(p))
        os.close(fd)
        write(tmp)
        os.chmod(tmp, _FILE_MODE & ~current_umask())
        os.replace(tmp, p)
        tmp = ""
    except OSError as exc:
        raise ConfigError(flag, str(path), f"cannot be written: {_reason(exc)}") from None
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
    return p


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
