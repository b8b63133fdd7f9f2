"""Output files, the one place greentrain writes them: checked before any work, written whole or not at all,
confined to the folder the user named.

Every file written on a user's request (results, plots, pages, traces, profiles, measurements) goes through
``check_output_path`` (or ``check_output_dir``) before the work starts and ``write_atomic`` at the end: a
temporary file beside the target, flushed to disk, the process umask applied to its mode (mkstemp creates
0600), then ``os.replace``. A kill, a full disk or a permission error leaves the old file or the new one, never
half of one, and no temporary file. A target that exists and is a device or a pipe (``/dev/null``, ``/dev/stdout``,
a FIFO) is written in place: a rename would replace the device node itself (as root, ``-o /dev/full`` used to
turn /dev/full into a regular file). Several outputs of one command are staged together (``AtomicBatch``): all
temporaries are written first and only then renamed, so a full disk leaves none of them; a rename that still
fails says which outputs were written and which were not.

An OSError on the way is a ``ConfigError`` naming the flag and the path, never a traceback. Names read from a
file (an experiment's ``name``) are joined to the output folder with ``confined``: a name that would leave it
(``../x``, an absolute path, a drive, a NUL) is refused.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError

_FILE_MODE = 0o666  # what open(..., "w") asks for; the umask is taken off it
MAX_NAME_CHARS = 200  # a path component longer than this is refused (most file systems stop at 255 bytes)


def _folder(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def os_reason(exc: OSError) -> str:
    """The kernel's words for an OSError ("No space left on device"), or its class name."""
    return exc.strerror or type(exc).__name__


def _probe(folder: Path, name: str, flag: str, path: str | Path) -> None:
    """Create and remove a temporary file in ``folder``: permission bits, read-only mounts, pseudo file
    systems (/proc) and root's overrides are all answered by the kernel, not guessed."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{name[:40]}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise ConfigError(flag, str(path), f"cannot write in {folder}: {os_reason(exc)}") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)


def is_stream(p: Path) -> bool:
    """Whether ``p`` exists and is a character device or a FIFO: written in place, never renamed over."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _target(p: Path) -> Path:
    """Where the rename lands: a symbolic link's target (renaming over the link would replace the link)."""
    return p.resolve() if p.is_symlink() else p


def check_not_an_input(out: str | Path, inputs: Iterable[str | Path | None], flag: str) -> None:
    """An output that is one of the command's inputs, or a symbolic link to one, would overwrite it (outputs
    are written through links): refused before any work."""
    target = Path(out).resolve()
    for given in inputs:
        if given and Path(given).resolve() == target:
            raise ConfigError(flag, str(out), f"is the input {given} (or a link to it): writing it would "
                              "overwrite the input")


def _write_stream(p: Path, flag: str, write: Callable[[str], None]) -> None:
    try:
        write(str(p))
    except OSError as exc:
        raise ConfigError(flag, str(p), f"cannot be written: {os_reason(exc)}") from None


def check_output_path(path: str | Path, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """Fail before any work if ``path`` cannot be written: suffix, folder exists, a file can be created in it."""
    p = Path(path)
    if not str(path):
        raise ConfigError(flag, str(path), "must be a file path, not empty")
    if suffixes and p.suffix.lower() not in suffixes:
        raise ConfigError(flag, str(path), f"must end in {' or '.join(suffixes)}")
    if len(p.name) > MAX_NAME_CHARS:
        raise ConfigError(flag, str(path), f"its file name is longer than {MAX_NAME_CHARS} characters")
    folder = _folder(p)
    if not folder.is_dir():
        rule = "its directory is not a directory" if folder.exists() else "its directory does not exist"
        raise ConfigError(flag, str(path), rule)
    if p.is_dir():
        raise ConfigError(flag, str(path), "is a directory, not a file")
    if is_stream(p):
        if not os.access(p, os.W_OK):
            raise ConfigError(flag, str(path), "cannot be written: permission denied")
        return p
    if p.exists() and not p.is_file():
        raise ConfigError(flag, str(path), "must be a regular file, a character device or a FIFO (it is a block "
                          "device, a socket or similar)")
    _probe(folder, p.name, flag, path)
    return p


def check_output_dir(path: str | Path, flag: str) -> Path:
    """Fail before any work if a folder of outputs cannot be made at ``path``: it is a folder we can write in,
    or it does not exist and its nearest existing parent is a folder we can write in (nothing is created)."""
    p = Path(path)
    if not str(path):
        raise ConfigError(flag, str(path), "must be a folder path, not empty")
    if any(len(part) > MAX_NAME_CHARS for part in p.parts):
        raise ConfigError(flag, str(path), f"a name in it is longer than {MAX_NAME_CHARS} characters")
    if p.exists() and not p.is_dir():
        raise ConfigError(flag, str(path), "must be a folder (it is a file)")
    existing = p
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(flag, str(path), f"cannot be created: {existing} is a file, not a folder")
    _probe(existing, "dir", flag, path)
    return p


def make_output_dir(path: str | Path, flag: str) -> Path:
    """``mkdir -p`` with an OSError as a one-line ConfigError."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(flag, str(path), f"cannot be created: {os_reason(exc)}") from None
    return p


def current_umask() -> int:
    """The process umask (read by setting it and putting it back; the restrictive 0o077 meanwhile)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _stage(p: Path, write: Callable[[str], None], suffix: str) -> str:
    """Write a complete temporary file beside ``p`` (flushed to disk, the umask's mode); return its name.
    On any failure the temporary file is removed and the exception goes on."""
    fd, tmp = tempfile.mkstemp(prefix=f".{p.stem[:40]}.", suffix=suffix or p.suffix or ".tmp", dir=_folder(p))
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:  # the data reaches the disk before the rename makes it visible
            os.fsync(f.fileno())
        os.chmod(tmp, _FILE_MODE & ~current_umask())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: str | Path, flag: str, write: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, give it the umask's mode, rename it into place.

    An OSError on the way (folder gone, disk full, permission) becomes a ConfigError naming ``flag`` and
    ``path``; the temporary file is removed and ``path`` is left as it was.
    """
    p = _target(Path(path))
    batch = _BATCH.get()
    if batch is not None:  # inside all_or_none(): renamed with the command's other outputs at its end
        batch.add(p, flag, write, suffix)
        return p
    if is_stream(p):
        _write_stream(p, flag, write)
        return p
    tmp = ""
    try:
        tmp = _stage(p, write, suffix)
        os.replace(tmp, p)
        tmp = ""
    except OSError as exc:
        raise ConfigError(flag, str(path), f"cannot be written: {os_reason(exc)}") from None
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
    return p


def _text_writer(text: str) -> Callable[[str], None]:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)

    return write


def write_text_atomic(path: str | Path, text: str, flag: str = "out") -> Path:
    """``text`` (UTF-8) to ``path``, whole or not at all."""
    return write_atomic(path, flag, _text_writer(text))


def write_json_atomic(path: str | Path, doc: Any, flag: str = "out", indent: int | None = None) -> Path:
    """``doc`` as JSON to ``path``, whole or not at all (compact unless ``indent``)."""
    text = json.dumps(doc, indent=indent, separators=None if indent else (",", ":"))
    return write_text_atomic(path, text + ("\n" if indent else ""), flag)


class AtomicBatch:
    """Several outputs of one command, all or none: ``add`` stages each one as a complete temporary file,
    ``commit`` renames them all. A failure while staging (full disk) removes every temporary file and names the
    output that failed; nothing is written. A failure while renaming names what was written and what was not."""

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path, str]] = []  # (flag, target, temporary)
        self._streams: list[tuple[str, Path, Callable[[str], None]]] = []  # devices and pipes: written at commit

    def add(self, path: str | Path, flag: str, write: Callable[[str], None], suffix: str = "") -> None:
        p = _target(Path(path))
        if is_stream(p):
            self._streams.append((flag, p, write))
            return
        try:
            self._staged.append((flag, p, _stage(p, write, suffix)))
        except OSError as exc:
            staged = ", ".join(str(q) for _, q, _ in self._staged)
            self.abort()
            also = f" ({staged}, staged before it, removed)" if staged else ""
            raise ConfigError(flag, str(path), f"cannot be written: {os_reason(exc)}; no output of this command "
                              f"was written{also}") from None
        except BaseException:
            self.abort()
            raise

    def add_text(self, path: str | Path, flag: str, text: str) -> None:
        self.add(path, flag, _text_writer(text))

    def abort(self) -> None:
        for _, _, tmp in self._staged:
            Path(tmp).unlink(missing_ok=True)
        self._staged = []
        self._streams = []

    def commit(self) -> list[Path]:
        done: list[Path] = []
        try:
            for flag, p, tmp in self._staged:
                try:
                    os.replace(tmp, p)
                except OSError as exc:
                    left = [str(q) for _, q, _ in self._staged if q not in done]
                    wrote = f"written: {', '.join(map(str, done))}; " if done else "nothing was written; "
                    raise ConfigError(flag, str(p), f"cannot be written: {os_reason(exc)}; {wrote}"
                                      f"not written: {', '.join(left)}") from None
                done.append(p)
        finally:
            for _, p, tmp in self._staged:
                if p not in done:
                    Path(tmp).unlink(missing_ok=True)
            self._staged = []
        streams, self._streams = self._streams, []
        for flag, p, write in streams:  # after the files: a device that fails leaves them whole
            _write_stream(p, flag, write)
            done.append(p)
        return done

    def __enter__(self) -> AtomicBatch:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def check_plain_name(name: object, field: str) -> str:
    """``name`` if it is one plain folder or file name (it names something inside an output folder): a
    non-empty string with no separator, not ``.``/``..``, no control character, at most MAX_NAME_CHARS."""
    rule = ""
    if not isinstance(name, str) or not name or name.strip() != name:
        rule = "must be a non-empty name without leading or trailing spaces"
    elif len(name) > MAX_NAME_CHARS:
        rule = f"must be at most {MAX_NAME_CHARS} characters"
    elif "/" in name or "\\" in name or name in (".", "..") or any(ord(c) < 32 or c == "\x7f" for c in name):
        rule = "must be one plain name (no '/', '\\', '.', '..' or control characters): it names a folder " \
               "inside the output folder and may not leave it"
    if rule:
        raise ConfigError(field, name, rule)
    assert isinstance(name, str)
    return name


_BATCH: contextvars.ContextVar[AtomicBatch | None] = contextvars.ContextVar("greentrain_batch", default=None)


@contextlib.contextmanager
def all_or_none() -> Iterator[AtomicBatch]:
    """Every ``write_atomic`` inside the block is staged and renamed into place when the block ends without an
    exception, all together (``AtomicBatch``): a command that writes several outputs (``search --plot P
    --html H``) leaves all of them or none, and a failure or Ctrl-C part-way leaves none. Nested blocks join
    the outer one."""
    outer = _BATCH.get()
    if outer is not None:
        yield outer
        return
    batch = AtomicBatch()
    token = _BATCH.set(batch)
    try:
        yield batch
    except BaseException:
        _BATCH.reset(token)
        batch.abort()
        raise
    _BATCH.reset(token)
    batch.commit()


def confined(root: str | Path, name: str, field: str) -> Path:
    """``root / name`` for a ``name`` read from a file, refused unless it is one plain name
    (``check_plain_name``) and the result, symlinks followed, is still directly inside ``root``."""
    base = Path(root)
    out = base / check_plain_name(name, field)
    if out.resolve().parent != base.resolve():  # a symlink named like the experiment, pointing elsewhere
        raise ConfigError(field, name, f"must stay inside {base} ({out} is a link that leaves it)")
    return out


LOCK_NAME = ".lock"


@contextlib.contextmanager
def folder_lock(folder: str | Path, field: str, what: str) -> Iterator[Path]:
    """Hold ``folder/.lock`` (an advisory ``flock``, released by the kernel when the process dies, so a killed
    run never leaves a stale lock) while the block runs; the folder is created if needed. A second process
    on the same folder gets a one-line ConfigError naming the holder's pid. ``what`` names the holder kind
    in the message ("track run")."""
    p = make_output_dir(folder, field)
    try:
        f = (p / LOCK_NAME).open("a+", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(field, str(folder), f"cannot be written: {os_reason(exc)}") from None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise ConfigError(field, str(folder), f"is in use by another {what} (pid {holder}): wait for it to "
                              "finish or choose another folder") from None
        with contextlib.suppress(OSError):  # the pid is for the message only; a full disk does not stop the run
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
        yield p
