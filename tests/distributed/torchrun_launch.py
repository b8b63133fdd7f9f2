"""Launch a script on 2 gloo ranks with ``python -m torch.distributed.run`` (shared by the tracker tests)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_two_ranks(script: Path, args: list[str], timeout_s: float) -> tuple[int, str]:
    """(exit status, combined output) of ``script args`` on 2 ranks; fails the test after ``timeout_s``,
    killing the agent and both ranks (their own process group)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(_free_port()), str(script), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        pytest.fail(f"2-rank job did not end in {timeout_s} s:\n{log[-3000:]}")
    return proc.returncode, log
