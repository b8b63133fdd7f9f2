"""Outputs named by a device, a pipe or a symbolic link: written in place or through the link, never renamed
over (as root, a rename onto /dev/full turned the device into a regular file and broke every later ENOSPC
test on the machine)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.files import AtomicBatch, check_output_path, write_text_atomic


def _is_char_device(path: str) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_dev_full_is_a_full_disk_and_stays_a_device() -> None:
    assert check_output_path("/dev/full", "out") == Path("/dev/full")
    with pytest.raises(ConfigError, match="No space left on device"):
        write_text_atomic("/dev/full", "x" * 100_000)
    assert _is_char_device("/dev/full")


def test_dev_null_takes_the_output_and_stays_a_device(tmp_path: Path) -> None:
    check_output_path("/dev/null", "out")
    write_text_atomic("/dev/null", "{}")
    with AtomicBatch() as batch:
        batch.add_text("/dev/null", "plot", "png")
        batch.add_text(tmp_path / "a.json", "out", "{}")
    assert _is_char_device("/dev/null") and (tmp_path / "a.json").read_text() == "{}"


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_text_atomic(fifo, "hello")
    reader.join(10)
    assert got == ["hello"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_symbolic_link_is_written_through(tmp_path: Path) -> None:
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_socket_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(ConfigError, match="must be a regular file, a character device or a FIFO"):
            check_output_path(path, "out")


@pytest.mark.parametrize("argv", [["catalog", "models", "--json"], ["plan", "--model", "nope"]])
@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_a_closed_stdout_or_stderr_is_no_traceback(argv: list[str], closed: str, tmp_path: Path) -> None:
    """`greentrain ... >&-` or `2>&-`: Python starts with sys.stdout (sys.stderr) None; json.dump onto it raised
    AttributeError. The other stream goes to a file, which must hold no traceback."""
    fd = 1 if closed == "stdout" else 2
    code = (f"import os, sys; os.close({fd}); sys.{closed} = None; from greentrain.cli.main import main; "
            f"sys.exit(main({argv!r}))")
    other = tmp_path / "other.txt"
    with other.open("w") as f:
        kw = {"stderr": f} if closed == "stdout" else {"stdout": f}
        done = subprocess.run([sys.executable, "-c", code], timeout=120, **kw)  # type: ignore[call-overload]
    assert "Traceback" not in other.read_text()
    assert done.returncode == (0 if argv[0] == "catalog" else 2)
