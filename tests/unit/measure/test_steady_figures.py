"""Rates and energy per step over the steady steps (found on an H100, 2026-11-26): a compiled Llama 3.2 1B
spent 43 s compiling in its first step, so tokens/s over every step read 6,100 where the steps ran 58,000;
greentrain.auto counts no tokens in the first step (it attaches during that forward) while its time was
counted; and the energy per step was the run's average power (model loading included: 264 W) times the step
time, where the H100 drew about 700 W through the steps."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from greentrain.measure.meters import tree_cpu_s
from greentrain.measure.records import it_energy_at, read_jsonl, steady_energy_j
from greentrain.measure.summary import summarize
from greentrain.measure.track import merge
from greentrain.measure.tracker import Tracker

IDLE_W, BUSY_W = 100.0, 700.0  # IT power before the steps (loading, compiling) and through them


def _energy_j(t: float) -> float:
    return IDLE_W * t if t < 2.0 else IDLE_W * 2.0 + BUSY_W * (t - 2.0)


def _samples(until_s: float) -> list[dict[str, Any]]:
    return [{"type": "sample", "t_s": 0.5 * i, "gpu_energy_j": _energy_j(0.5 * i), "rss_bytes": 1e6}
            for i in range(1, int(until_s / 0.5) + 1)]


def _steps(shift_s: float = 0.0) -> list[dict[str, Any]]:
    """A 1.5 s first step (compile) ending at 2 s with no tokens counted, then 12 steps of 0.25 s to 5 s."""
    out = [{"type": "step", "t_s": 2.0 - shift_s, "step": 0, "step_time_s": 1.5, "tokens": 0.0, "flop": 0.0}]
    out += [{"type": "step", "t_s": 2.0 + 0.25 * i - shift_s, "step": i, "step_time_s": 0.25, "tokens": 8.0,
             "samples": 2.0, "flop": 100.0} for i in range(1, 13)]
    return out


def test_the_energy_between_two_times_is_interpolated() -> None:
    recs = _samples(6.0)
    assert it_energy_at(recs, 0.25) == pytest.approx(25.0)  # from 0 J at t = 0
    assert it_energy_at(recs, 2.25) == pytest.approx(_energy_j(2.25))
    assert it_energy_at(recs, 9.0) == pytest.approx(_energy_j(6.0))  # held past the last sample
    assert steady_energy_j(recs, 2.0, 5.0) == pytest.approx(BUSY_W * 3.0)
    assert steady_energy_j(recs, 2.0, 7.0) is None  # not covered by the samples
    reset = [*recs[:5], *({**r, "gpu_energy_j": 1.0} for r in recs[5:])]  # the counter went down after 2.5 s
    assert steady_energy_j(reset, 2.0, 5.0) is None  # the run's mean power is used instead, never a negative


def test_a_record_rates_and_energy_are_the_steady_steps() -> None:
    start = {"type": "start", "t_unix": 1000.0, "t0_unix": 1000.0, "run_id": "r", "world_size": 1, "meters": []}
    end = {"type": "end", "t_s": 6.0, "status": "ok", "error": ""}
    m = summarize([start, *_samples(6.0), *_steps(), end], None)
    assert m.num_steps == 13 and m.step_time_s == pytest.approx(0.25)
    assert m.tokens_per_s == pytest.approx(8.0 / 0.25)  # was 96 / 4.5 s
    assert m.samples_per_s == pytest.approx(2.0 / 0.25)
    assert m.flop_per_s == pytest.approx(100.0 / 0.25)
    assert m.energy_j_per_step == pytest.approx(BUSY_W * 0.25)  # was the run's 533 W average x the step
    assert m.power_w == pytest.approx(_energy_j(6.0) / 6.0)  # the run's average stays the run's


def test_track_merge_puts_the_steps_on_the_trackers_clock(tmp_path: Path) -> None:
    """`greentrain track`: the child's clock starts 1 s after the tracker's."""
    tracker = [{"type": "start", "t_unix": 1000.0, "t0_unix": 1000.0, "run_id": "r", "world_size": 1,
                "meters": [], "cpu_count": 4}, *_samples(6.0),
               {"type": "end", "t_s": 6.0, "status": "ok", "error": "", "cpu_s": 12.0}]
    child = [{"type": "start", "t_unix": 1001.0, "t0_unix": 1001.0, "run_id": "r", "world_size": 1,
              "meters": []}, *_steps(shift_s=1.0)]
    for name, recs in (("track.jsonl", tracker), ("steps.jsonl", child)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    m = merge(tmp_path, None, pue=1.5)
    assert m.tokens_per_s == pytest.approx(32.0)
    assert m.energy_j_per_step == pytest.approx(BUSY_W * 0.25 * 1.5)
    assert m.cpu_utilization_percent == pytest.approx(100.0 * 12.0 / (6.0 * 4))


def test_live_rates_leave_the_first_step_out(tmp_path: Path) -> None:
    with Tracker(None, out_dir=tmp_path, meters=[], print_summary=False) as t:
        t.step(tokens=1e12)  # the first step: compile, or tokens the hooks did not see
        t.step(tokens=10.0)
        t.step(tokens=10.0)
        live = t.live()
    steps = [r for r in read_jsonl(tmp_path / "greentrain.jsonl") if r.get("type") == "step"]
    assert live["tokens_per_s"] == pytest.approx(20.0 / sum(r["step_time_s"] for r in steps[1:]))


@pytest.mark.slow
def test_track_records_the_commands_cpu_time(tmp_path: Path) -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    r = subprocess.run([sys.executable, "-m", "greentrain.cli.main", "track", "--out", str(tmp_path / "o"),
                        "--json", "--", sys.executable, "-c", busy], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["cpu_utilization_percent"] > 0  # was 0: the end record of `track` had no CPU time
    end = [x for x in read_jsonl(tmp_path / "o" / "track.jsonl") if x.get("type") == "end"][-1]
    assert end["cpu_s"] >= 0.3


def test_a_worker_that_ends_during_the_run_keeps_its_cpu_time(tmp_path: Path) -> None:
    """A child alive at the start (a DataLoader worker) that exits before the stop: its CPU time left the live
    tree and the end record's cpu_s went negative, which the record check then refused (stop raised)."""
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
    child = subprocess.Popen([sys.executable, "-c", busy])
    while child.poll() is None and tree_cpu_s([child.pid]) < 0.5:  # it has run before the Tracker starts
        time.sleep(0.01)
    with Tracker(None, out_dir=tmp_path, meters=[], print_summary=False) as t:
        t.step(tokens=1.0)
        child.wait(timeout=60)  # reaped: its time is now the parent's cutime
    end = [r for r in read_jsonl(tmp_path / "greentrain.jsonl") if r.get("type") == "end"][-1]
    assert end["cpu_s"] >= 0.0 and t.measurement is not None


def test_a_recompile_after_the_first_step_is_warm_up_too() -> None:
    """A compiled Llama 3.2 1B under `track` on an H100 (2026-11-27): 56 s compiling in the first step, a 3.87 s
    recompile in the second, then 0.285 s steps; the steady step read 461 ms (the recompile in the mean)."""
    start = {"type": "start", "t_unix": 1000.0, "t0_unix": 1000.0, "run_id": "r", "world_size": 1, "meters": []}
    steps = _steps()
    steps[1] = {**steps[1], "step_time_s": 1.0}  # the second step recompiles: 4 x the others
    m = summarize([start, *_samples(6.0), *steps, {"type": "end", "t_s": 6.0, "status": "ok", "error": ""}], None)
    assert m.step_time_s == pytest.approx(0.25)  # the 11 steps after the recompile
    assert m.tokens_per_s == pytest.approx(8.0 / 0.25)
    assert m.energy_j_per_step == pytest.approx(BUSY_W * 0.25)  # the samples from the end of step 2 on
    assert any(n.startswith("steady steps 3-13") for n in m.notes)


def test_warm_up_is_the_first_step_and_the_slow_ones_right_after_it() -> None:
    from greentrain.measure.summary import warmup_steps

    assert warmup_steps([]) == 0 and warmup_steps([5.0]) == 0  # one step: it is all there is
    assert warmup_steps([40.0, 1.0, 1.0, 1.0]) == 1
    assert warmup_steps([40.0, 3.0, 1.0, 1.0, 1.0]) == 2
    assert warmup_steps([40.0, 1.0, 1.0, 3.0, 1.0]) == 1  # a slow step later (evaluation, a checkpoint) stays in
    assert warmup_steps([40.0, 3.0, 3.0]) == 1  # the median is the steps' own time: none slower than twice it
    assert warmup_steps([40.0, 9.0]) == 1  # two steps: the second is the steady one
