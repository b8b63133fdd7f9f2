"""Preemption for `greentrain track`: signals reach the training, and the training never outlives the tracker.

Slurm and Kubernetes preempt with SIGTERM, then SIGKILL after a grace period (Slurm's KillWait and
Kubernetes' terminationGracePeriodSeconds both default to 30 s); a closed terminal sends SIGHUP. The child
runs in its own process group (so a launcher such as torchrun and its workers are reached together):

- ``Supervisor`` (in the tracker) forwards SIGTERM, SIGHUP and SIGINT to that group, gives the training
  ``grace_s`` to stop, then SIGKILLs the group; a second signal skips the rest of the grace. The tracker then
  writes its outputs from what was recorded, marked incomplete, and exits 128 + the signal number.
- ``Watchdog``: a small separate process that holds the read end of a pipe from the tracker. If the tracker
  dies without saying "done" (``kill -9``, OOM killer), the pipe closes and the watchdog sends SIGTERM to the
  training's group, waits ``grace_s``, then SIGKILL: the training is never left running unobserved.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType, TracebackType
from typing import Any

from greentrain import units

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
DEFAULT_GRACE_S = 10.0  # leaves 20 s of a 30 s scheduler grace for writing the outputs
MAX_GRACE_S = units.HOUR_S
POLL_S = 0.05

# Run with `python -S -c`: reads the group id, then blocks until the tracker closes the pipe.
_WATCHDOG = r"""
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
grace_s = float(sys.argv[1])
data = sys.stdin.buffer.read()
lines = data.split(b"\n")
if not lines[0].strip() or b"done" in lines[1:]:
    sys.exit(0)
pgid = int(lines[0])
try:
    os.killpg(pgid, signal.SIGTERM)
except (ProcessLookupError, PermissionError):
    sys.exit(0)
deadline = time.monotonic() + grace_s
while time.monotonic() < deadline:
    time.sleep(0.05)
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        sys.exit(0)
try:
    os.killpg(pgid, signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
"""


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def kill_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group has already gone
        os.killpg(pgid, signum)


class Watchdog:
    """Kills the training's process group if this process dies without calling ``done``."""

    def __init__(self, grace_s: float) -> None:
        read_fd, self._write_fd = os.pipe()
        try:
            self._proc = subprocess.Popen([sys.executable, "-S", "-c", _WATCHDOG, str(grace_s)], stdin=read_fd,
                                          stdout=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(read_fd)

    def watch(self, pgid: int) -> None:
        os.write(self._write_fd, f"{pgid}\n".encode())

    def done(self) -> None:
        """The training has ended under our eyes: the watchdog exits without killing anything."""
        if self._write_fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"done\n")
        os.close(self._write_fd)
        self._write_fd = -1
        self._proc.wait()


class Supervisor:
    """Forwards termination signals to the child's process group and enforces the grace period.

    Use as a context manager around the child's whole life *and* the writing of the outputs: a signal that
    arrives after the child ended is recorded (it sets the exit status) instead of killing the tracker
    half-way through a file. Handlers are installed only in the main thread (Python's rule)."""

    def __init__(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.grace_s = grace_s
        self.signum: int | None = None
        self.killed = False  # the group was SIGKILLed after the grace period (or a second signal)
        self._pgid: int | None = None
        self._deadline: float | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Supervisor:
        if threading.current_thread() is threading.main_thread():
            for s in FORWARDED_SIGNALS:
                self._old[s] = signal.signal(s, self._on_signal)
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
            self._deadline = time.monotonic() + self.grace_s
        if self._pgid is not None:
            self.killed = self.killed or not first
            kill_group(self._pgid, signum if first else signal.SIGKILL)

    def wait(self, child: subprocess.Popen[Any]) -> int:
        """Wait for ``child`` (leader of its own process group); returns its wait status."""
        self._pgid = child.pid
        if self.signum is not None:  # arrived while the child was starting
            kill_group(child.pid, self.signum)
        while True:
            try:
                return child.wait(timeout=POLL_S if self._deadline is not None else 1.0)
            except subprocess.TimeoutExpired:
                if self._deadline is not None and time.monotonic() > self._deadline and not self.killed:
                    self.killed = True
                    kill_group(child.pid, signal.SIGKILL)

    def reap_group(self) -> None:
        """After the child: members of its group still running (a launcher's workers) get SIGKILL once the
        tracker was told to stop; a normal exit leaves them alone."""
        if self._pgid is not None and self.signum is not None:
            kill_group(self._pgid, signal.SIGKILL)

    @property
    def status(self) -> str:
        """"" when no signal arrived, else e.g. "incomplete (SIGTERM)"."""
        if self.signum is None:
            return ""
        return f"incomplete ({signal_name(self.signum)}{', killed after the grace period' if self.killed else ''})"

    def exit_code(self, child_code: int) -> int:
        """128 + the signal the tracker received (what a shell reports for a signalled process); else the
        child's status (128 + N when the child died of signal N)."""
        if self.signum is not None:
            return 128 + self.signum
        return child_code if child_code >= 0 else 128 - child_code
