"""`greentrain track` under preemption (issue 16 item 1): SIGTERM/SIGHUP reach the command's process group,
the outputs are written from what was recorded and marked incomplete, the exit status names the signal, and
after `kill -9` of the tracker the command does not keep running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A "training" that records its pid (and its own child's), then works until stopped.
_TRAIN = """
import os, signal, subprocess, sys, time
out = sys.argv[1]
if sys.argv[2] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(out + ".pids.tmp", "w") as f:
    f.write(f"{os.getpid()} {kid.pid}")
os.replace(out + ".pids.tmp", out + ".pids")
while True:
    time.sleep(0.05)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _start(tmp_path: Path, mode: str = "run", grace_s: float = 5.0) -> tuple[subprocess.Popen[bytes], Path,
                                                                            list[int]]:
    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    out = tmp_path / "out"
    track = subprocess.Popen([sys.executable, "-m", "greentrain.cli.main", "track", "--no-hooks",
                              "--grid-g-per-kwh", "100", "--interval-s", "0.1", "--grace-s", str(grace_s),
                              "--out", str(out), "--", sys.executable, str(script), str(tmp_path / "t"), mode],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pids_file = tmp_path / "t.pids"
    deadline = time.monotonic() + 20
    while not pids_file.exists():
        assert time.monotonic() < deadline and track.poll() is None, "the tracked command did not start"
        time.sleep(0.05)
    return track, out, [int(x) for x in pids_file.read_text().split()]


def _wait_gone(pids: list[int], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still running after {within_s} s: {[p for p in pids if _alive(p)]}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_reaches_the_group_and_outputs_are_written(tmp_path: Path, sig: signal.Signals) -> None:
    track, out, pids = _start(tmp_path)
    time.sleep(0.3)  # a few samples
    track.send_signal(sig)
    assert track.wait(timeout=20) == 128 + sig
    _wait_gone(pids, 1.0)  # the training and its own child: the whole process group
    data = json.loads((out / "measurement.json").read_text())
    assert data["status"] == f"incomplete ({sig.name})" and data["duration_s"] > 0.2
    assert data["emissions_kg_co2e"] > 0 and any("before the signal" in n for n in data["notes"])
    rows = (out / "emissions.csv").read_text().splitlines()
    assert len(rows) == 2 and data["run_id"] in rows[1]


def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    track, out, pids = _start(tmp_path, mode="ignore", grace_s=0.5)
    t0 = time.monotonic()
    track.send_signal(signal.SIGTERM)
    assert track.wait(timeout=20) == 143
    assert time.monotonic() - t0 < 15  # grace 0.5 s; a hang guard with room for a loaded machine
    _wait_gone(pids, 1.0)
    status = json.loads((out / "measurement.json").read_text())["status"]
    assert status == "incomplete (SIGTERM, killed after the grace period)"


def test_kill_9_of_the_tracker_does_not_leave_the_training_running(tmp_path: Path) -> None:
    track, out, pids = _start(tmp_path, grace_s=1.0)
    # the tracker starts the command before it writes its start record: wait for the record, not for time
    deadline = time.monotonic() + 120
    while not (out / "track.jsonl").is_file() or '"type":"start"' not in (out / "track.jsonl").read_text():
        assert time.monotonic() < deadline and track.poll() is None, "no start record"
        time.sleep(0.05)
    track.send_signal(signal.SIGKILL)
    track.wait(timeout=10)
    _wait_gone(pids, 5.0)
    assert not (out / "measurement.json").exists()
    # what was recorded is still there for `track --summarize`
    assert (out / "track.jsonl").read_text().startswith('{"type":"start"')


def test_kill_9_of_the_tracker_kills_a_child_ignoring_sigterm_after_the_grace(tmp_path: Path) -> None:
    track, out, pids = _start(tmp_path, mode="ignore", grace_s=0.5)
    # the watchdog is armed before the start record is written: wait for the record, not for the child's pids
    deadline = time.monotonic() + 120
    while not (out / "track.jsonl").is_file() or '"type":"start"' not in (out / "track.jsonl").read_text():
        assert time.monotonic() < deadline and track.poll() is None, "no start record"
        time.sleep(0.05)
    track.send_signal(signal.SIGKILL)
    track.wait(timeout=10)
    _wait_gone(pids, 5.0)


def test_a_normal_exit_leaves_no_watchdog(tmp_path: Path) -> None:
    """The watchdog exits with the tracker (no stray process after a run)."""
    out = tmp_path / "o"
    grace = "7.125"  # marks this run's watchdog (its last argument)
    r = subprocess.run([sys.executable, "-m", "greentrain.cli.main", "track", "--no-hooks", "--grace-s", grace,
                        "--out", str(out), "--", sys.executable, "-c", "pass"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0
    mine = [p for p in os.listdir("/proc") if p.isdigit() and _is_watchdog(int(p), grace)]
    assert mine == []


def _is_watchdog(pid: int, grace: str) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return _alive(pid) and any(b"os.killpg(pgid" in c for c in cmd) and grace.encode() in cmd
    except OSError:
        return False


_GPT = """
import sys, torch
sys.path.insert(0, {here!r})
from tiny_gpt import GPT, train_step
m = GPT(d=32, layers=1, heads=2, seq=16); opt = torch.optim.SGD(m.parameters(), lr=1e-3)
idx = torch.randint(0, 512, (2, 16))
while True:
    train_step(m, opt, idx)
"""


def test_sigterm_keeps_the_steps_recorded_by_the_hooks(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(_GPT.format(here=str(Path(__file__).parent)))
    out = tmp_path / "out"
    track = subprocess.Popen([sys.executable, "-m", "greentrain.cli.main", "track", "--out", str(out), "--json",
                              "--", sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (out / "steps.jsonl").exists() or (out / "steps.jsonl").read_text().count('"type":"step"') < 3:
        assert time.monotonic() < deadline and track.poll() is None
        time.sleep(0.1)
    track.send_signal(signal.SIGTERM)
    stdout, _ = track.communicate(timeout=30)
    assert track.returncode == 143
    data = json.loads(stdout)
    assert data["status"] == "incomplete (SIGTERM)" and data["num_steps"] >= 3 and data["flop_per_step"] > 0
