"""`greentrain track --summarize` after a kill (issue 16 item 4): duration and energy cover the run up to its
last recorded step, on the tracker's clock, as a complete run of those steps would; per-module FLOPs are a
complete run's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from greentrain.measure.track import merge

RUN_ID = "r-1"
POWER_W = 10.0  # the hand-made tracker's constant IT power


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _tracker_records(last_sample_s: float, end: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "start", "t_unix": 1000.0, "t0_unix": 1000.0, "run_id": RUN_ID,
                                  "world_size": 1, "meters": []}]
    t = 0.5
    while t <= last_sample_s + 1e-9:
        out.append({"type": "sample", "t_s": t, "cpu_energy_j": POWER_W * t, "ram_energy_j": 0.0,
                    "rss_bytes": 1e6})
        t += 0.5
    if end:
        out.append({"type": "end", "t_s": last_sample_s, "status": "ok", "error": ""})
    return out


def _step_records(first_s: float, last_s: float, child_t0_unix: float = 1001.0) -> list[dict[str, Any]]:
    """Steps every 0.25 s from ``first_s`` to ``last_s`` on the tracker's clock (the child started 1 s later)."""
    off = child_t0_unix - 1000.0
    out: list[dict[str, Any]] = [{"type": "start", "t_unix": child_t0_unix + 0.01, "t0_unix": child_t0_unix,
                                  "run_id": RUN_ID, "world_size": 1, "meters": []}]
    n = round((last_s - first_s) / 0.25) + 1
    for i in range(n):
        out.append({"type": "step", "t_s": first_s + 0.25 * i - off, "step": i, "step_time_s": 0.25,
                    "flop": 100.0, "tokens": 8.0})
    return out


def test_a_tracker_killed_before_its_child_covers_the_steps_after_its_last_sample(tmp_path: Path) -> None:
    """kill -9 of `track` at 4 s; the script finishes its steps until 6 s (it checkpoints on SIGTERM). The
    duration was the tracker's last sample (4 s) while 17 steps ran until 6 s."""
    _write(tmp_path / "track.jsonl", _tracker_records(4.0))
    _write(tmp_path / "steps.jsonl", _step_records(2.0, 6.0))
    m = merge(tmp_path, None)
    assert m.num_steps == 17 and m.status.startswith("incomplete")
    assert m.duration_s == pytest.approx(6.0)
    assert m.it_energy_j == pytest.approx(POWER_W * 6.0)  # extrapolated at the mean power, and said so
    assert any("extrapolated" in n for n in m.notes)


def test_samples_after_the_last_flushed_step_are_not_counted(tmp_path: Path) -> None:
    """kill -9 of everything: the tracker sampled until 6.0 s, the child's steps were flushed until 4.6 s."""
    _write(tmp_path / "track.jsonl", _tracker_records(6.0))
    _write(tmp_path / "steps.jsonl", _step_records(2.1, 4.6))
    m = merge(tmp_path, None)
    assert m.duration_s == pytest.approx(4.6)
    assert m.it_energy_j == pytest.approx(POWER_W * 4.6)  # interpolated between the samples at 4.5 and 5.0
    assert m.power_w == pytest.approx(POWER_W)
    assert not any("extrapolated" in n for n in m.notes)


def test_a_complete_run_is_not_cut(tmp_path: Path) -> None:
    _write(tmp_path / "track.jsonl", _tracker_records(6.0, end=True))
    _write(tmp_path / "steps.jsonl", _step_records(2.0, 5.0))
    m = merge(tmp_path, None)
    assert m.status == "ok" and m.duration_s == pytest.approx(6.0)
    assert m.it_energy_j == pytest.approx(POWER_W * 6.0)


_TRAIN = """
import signal, sys, time, torch
from torch import nn
torch.set_num_threads(1)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(time.monotonic() + 1.0))  # finish steps for 1 s
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(16, 32)
while not stop or time.monotonic() < stop[0]:
    model(x).square().mean().backward(); opt.step(); opt.zero_grad()
    time.sleep(0.05)
    if not stop:
        open(sys.argv[1], "w").close()  # a step is done
"""


def test_track_killed_then_summarized(tmp_path: Path) -> None:
    """A real run: kill -9 of `track` while a torch script trains; the script stops within 1 s of the
    watchdog's SIGTERM. --summarize covers the steps recorded after the tracker died, and each module's
    FLOPs per step are its own (2 x 16 x 32 x 64 forward, as in a complete run)."""
    pytest.importorskip("torch")
    script, started, out = tmp_path / "train.py", tmp_path / "started", tmp_path / "out"
    script.write_text(_TRAIN)
    track = subprocess.Popen([sys.executable, "-m", "greentrain.cli.main", "track", "--grace-s", "5",
                              "--out", str(out), "--", sys.executable, str(script), str(started)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and track.poll() is None, "the script did not start"
        time.sleep(0.05)
    time.sleep(0.6)  # a sample or two after the first steps
    track.send_signal(signal.SIGKILL)
    track.wait(timeout=10)
    steps_file = out / "steps.jsonl"
    while '"type":"end"' not in steps_file.read_text():  # the script stops about 1 s after the SIGTERM
        assert time.monotonic() < deadline, "the script did not stop"
        time.sleep(0.1)
    last_sample_s = max(json.loads(x)["t_s"] for x in (out / "track.jsonl").read_text().splitlines()
                        if '"sample"' in x)
    r = subprocess.run([sys.executable, "-m", "greentrain.cli.main", "track", "--summarize", str(out), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["status"].startswith("incomplete") and m["num_steps"] > 1
    assert m["duration_s"] > last_sample_s + 0.5  # the steps of the last second are covered
    assert any("last recorded step" in n for n in m["notes"])
    fwd = {x["name"]: x["forward_flop"] for x in m["modules"]}
    assert fwd["0"] == 2 * 16 * 32 * 64 and fwd["2"] == 2 * 16 * 64 * 32


def test_a_killed_trackers_own_record_is_cut_at_its_last_step() -> None:
    """A Tracker's record (samples and steps from one process) after a kill: the samples written after the
    last flushed step are not counted (duration was the last sample's, 6.0 s, for steps until 4.6 s)."""
    from greentrain.measure.summary import summarize

    records = _tracker_records(6.0) + [r for r in _step_records(2.1, 4.6, child_t0_unix=1000.0)
                                       if r["type"] == "step"]
    m = summarize(records, None)
    assert m.num_steps == 11 and m.duration_s == pytest.approx(4.6)
    assert m.it_energy_j == pytest.approx(POWER_W * 4.6) and m.power_w == pytest.approx(POWER_W)
    assert any("last recorded step" in n for n in m.notes)
