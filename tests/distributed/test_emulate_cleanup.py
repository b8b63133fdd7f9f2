"""Issue 16 item 2: `emulate` stopped by SIGTERM or SIGKILL leaves no rank (nor a forkserver or a resource
tracker where ranks come from one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

_HANG = """
from greentrain.emulate.cases import FaultCase
from greentrain.emulate.launcher import LaunchOptions, emulate
emulate([FaultCase(world_size=2, rank=1, kind="hang")], LaunchOptions(timeout_s=120))
"""


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(d))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, out, todo = _children(), set(), [pid]
    while todo:
        for c in tree.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_no_process_left_within_5_s(sig: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _HANG], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    # the 2 ranks (forked from the launcher on Linux with gloo; else a forkserver and a resource tracker too)
    while len(_descendants(proc.pid)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the ranks did not start"
        time.sleep(0.1)
    time.sleep(0.5)
    kids = _descendants(proc.pid)
    proc.send_signal(sig)
    code = proc.wait(timeout=10)
    assert code == (143 if sig == signal.SIGTERM else -9)
    t0 = time.monotonic()
    while left := [p for p in kids if _running(p)]:
        assert time.monotonic() - t0 < 5, f"still running 5 s after {sig.name}: {left}"
        time.sleep(0.1)


def test_ctrl_c_stops_every_rank_with_one_line() -> None:
    """Ctrl-C reaches the terminal's whole process group (the launcher and its forked ranks): the launcher
    says so in one line and exits 130 (it printed a KeyboardInterrupt traceback); no rank is left."""
    proc = subprocess.Popen([sys.executable, "-c", _HANG], stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group, as a terminal's foreground job
    deadline = time.monotonic() + 60
    while len(_descendants(proc.pid)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the ranks did not start"
        time.sleep(0.1)
    time.sleep(0.5)
    kids = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130
    assert err.splitlines() == ["greentrain: emulation stopped by SIGINT; stopping the ranks"], err
    t0 = time.monotonic()
    while left := [p for p in kids if _running(p)]:
        assert time.monotonic() - t0 < 5, f"still running 5 s after SIGINT: {left}"
        time.sleep(0.1)
