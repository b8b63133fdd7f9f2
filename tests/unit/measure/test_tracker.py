"""Tracker: outputs, CO2e only with an explicit site, records surviving an exception and a SIGKILL."""

from __future__ import annotations

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from tiny_gpt import GPT, train_step

import greentrain
from greentrain.errors import ConfigError
from greentrain.measure.records import read_jsonl
from greentrain.measure.summary import summarize, warmup_steps


def _train(t: greentrain.Tracker, model: GPT, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    idx = torch.randint(0, 512, (2, 16))
    for _ in range(steps):
        train_step(model, opt, idx)
        t.step()


def test_outputs_with_grid_intensity(tmp_path: Path) -> None:
    model = GPT(d=32, layers=1, heads=2, seq=16)
    with greentrain.Tracker(model, grid_g_per_kwh=100.0, pue=1.2, out_dir=tmp_path, print_summary=False) as t:
        _train(t, model, 3)
    m = t.measurement
    assert m is not None and m.status == "ok" and m.num_steps == 3 and m.tokens == 3 * 32
    data = json.loads((tmp_path / "measurement.json").read_text())
    for key in ("step_time_s", "tokens_per_s", "flop", "memory_bytes", "energy_j", "energy_kwh",
                "emissions_kg_co2e", "cost_usd"):
        assert key in data
    assert data["energy_j"] == pytest.approx(1.2 * data["it_energy_j"])
    # kg = J / 3.6e6 J/kWh x 100 g/kWh / 1000 g/kg
    assert data["emissions_kg_co2e"] == pytest.approx(data["energy_j"] / 3.6e6 * 0.1)
    row = next(csv.DictReader((tmp_path / "emissions.csv").open()))
    assert float(row["emissions"]) == pytest.approx(data["emissions_kg_co2e"])
    assert float(row["energy_consumed"]) == pytest.approx(data["energy_kwh"])
    card = yaml.safe_load((tmp_path / "model_card_co2.yaml").read_text())
    assert card["co2_eq_emissions"]["emissions"] == pytest.approx(1000 * data["emissions_kg_co2e"])


def test_no_region_means_energy_only(tmp_path: Path) -> None:
    with greentrain.Tracker(out_dir=tmp_path, print_summary=False) as t:
        time.sleep(0.05)
    m = t.measurement
    assert m is not None and m.emissions_kg_co2e is None and m.pue == 1.0
    assert any("needs a region" in n for n in m.notes)
    assert not (tmp_path / "model_card_co2.yaml").exists()


@pytest.mark.parametrize("kwargs, field", [({"pue": 0.9}, "pue"), ({"grid_g_per_kwh": -1.0}, "grid_g_per_kwh"),
                                           ({"interval_s": 0.0}, "interval_s"),
                                           ({"interval_s": 1e9}, r"interval_s=1000000000.0: must be in \[0.001, 60\]"),
                                           ({"cpu_tdp_w": 1e9}, r"cpu_tdp_w=1000000000.0: must be in \[0.5, 10,000\]"),
                                           ({"model_parallel_size": 0}, "model_parallel_size"),
                                           ({"model_parallel_size": 2**30}, "model_parallel_size=1073741824: must be"),
                                           ({"peak_flop_per_s": 1e30}, "peak_flop_per_s=1e[+]30: must be in"),
                                           ({"depth": 0}, "depth"), ({"cpu_tdp_w": -5.0}, "cpu_tdp_w"),
                                           ({"region": "fr", "grid_g_per_kwh": 5.0}, "not both"),
                                           ({"backward_hooks": "module"}, "backward_hooks")])
def test_bad_input(tmp_path: Path, kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        greentrain.Tracker(out_dir=tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_exception_is_recorded_and_reraised(tmp_path: Path) -> None:
    model = GPT(d=32, layers=1, heads=2, seq=16)
    with pytest.raises(RuntimeError, match="boom"), greentrain.Tracker(model, out_dir=tmp_path,
                                                                        print_summary=False) as t:
        _train(t, model, 2)
        raise RuntimeError("boom")
    records = read_jsonl(tmp_path / "greentrain.jsonl")
    assert records[-1]["type"] == "end" and records[-1]["status"] == "error"
    assert "boom" in records[-1]["error"]
    assert sum(r["type"] == "step" for r in records) == 2


_KILLED = """
import sys, time, torch
sys.path.insert(0, {here!r})
from tiny_gpt import GPT, train_step
import greentrain
m = GPT(d=32, layers=1, heads=2, seq=16); opt = torch.optim.SGD(m.parameters(), lr=1e-3)
idx = torch.randint(0, 512, (2, 16))
with greentrain.Tracker(m, out_dir={out!r}, interval_s=0.2) as t:
    while True:
        train_step(m, opt, idx); t.step(); time.sleep(0.02)
"""


def test_records_survive_sigkill(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(_KILLED.format(here=str(Path(__file__).parent), out=str(tmp_path)))
    proc = subprocess.Popen([sys.executable, str(script)])
    path = tmp_path / "greentrain.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until 5 steps are on disk
        if path.exists() and path.read_text().count('"type":"step"') >= 5:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    records = read_jsonl(path)
    assert records[0]["type"] == "start"
    assert sum(r["type"] == "step" for r in records) >= 5
    assert sum(r["type"] == "sample" for r in records) >= 1
    m = summarize(records)
    assert m.status.startswith("incomplete") and m.num_steps >= 5 and m.it_energy_j > 0


def test_decorator_marks_a_step_per_optimizer_step(tmp_path: Path) -> None:
    model = GPT(d=32, layers=1, heads=2, seq=16)
    tracker = greentrain.Tracker(model, region="fr", out_dir=tmp_path, print_summary=False)

    @tracker
    def train(steps: int) -> None:  # no handle on the tracker: steps come from the optimizer
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        for _ in range(steps):
            train_step(model, opt, torch.randint(0, 512, (2, 16)))

    train(3)
    m = tracker.measurement
    assert m is not None and m.num_steps == 3 and m.tokens == 3 * 32 and m.region == "FRA"
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    train_step(model, opt, torch.randint(0, 512, (2, 16)))  # the global optimizer hook is gone
    assert sum(r["type"] == "step" for r in read_jsonl(tmp_path / "greentrain.jsonl")) == 3


def test_module_times_are_steady_state_like_the_step_time(tmp_path: Path) -> None:
    """Module and phase times leave out the first step (FLOP counting, warm-up), as step_time_s does."""
    model = GPT(d=32, layers=2, heads=2, seq=16)
    with greentrain.Tracker(model, out_dir=tmp_path, print_summary=False, write_outputs=False) as t:
        _train(t, model, 5)
    records = read_jsonl(tmp_path / "greentrain.jsonl")
    first = next(r for r in records if r["type"] == "modules" and r.get("first_step"))
    last = [r for r in records if r["type"] == "modules" and not r.get("first_step")][-1]
    steps = [r for r in records if r["type"] == "step"]
    m = t.measurement
    assert m is not None and m.num_steps == 5
    for mod, f, z in zip(m.modules, first["modules"], last["modules"], strict=True):
        assert mod.forward_s == pytest.approx((z["forward_s"] - f["forward_s"]) / 4, rel=1e-9)
        assert mod.forward_flop == pytest.approx(f["forward_flop"], rel=1e-9)  # same shapes every step
    # the phase times cover step_time_s's window: after the first step and any slow steps right after it (a
    # loaded machine can make step 2 take twice the median: CI, 2026-11-27), so the window comes from the records
    warm = warmup_steps([s["step_time_s"] for s in steps])
    assert m.forward_s == pytest.approx(statistics.fmean(s["forward_s"] for s in steps[warm:]), rel=1e-9)
    # the top-level modules run one after another inside each step after the first (their window)
    assert sum(x.forward_s + x.backward_s for x in m.modules) <= statistics.fmean(
        s["step_time_s"] for s in steps[1:])


def test_runs_into_the_same_folder_are_not_merged(tmp_path: Path) -> None:
    """Issue 16 item 3: a second run reports its own steps and duration; emissions.csv gains one row each."""
    model = GPT(d=32, layers=1, heads=2, seq=16)
    with greentrain.Tracker(model, grid_g_per_kwh=100.0, out_dir=tmp_path, print_summary=False) as t1:
        _train(t1, model, 5)
        time.sleep(0.3)
    t0 = time.perf_counter()
    with greentrain.Tracker(model, grid_g_per_kwh=100.0, out_dir=tmp_path, print_summary=False) as t2:
        _train(t2, model, 2)
    wall2 = time.perf_counter() - t0
    m1, m2 = t1.measurement, t2.measurement
    assert m1 is not None and m2 is not None and m2.num_steps == 2 and m1.duration_s >= 0.3
    assert m2.duration_s <= wall2  # nothing of the first run's time
    assert json.loads((tmp_path / "measurement.json").read_text())["num_steps"] == 2
    rows = list(csv.DictReader((tmp_path / "emissions.csv").open()))
    assert [r["run_id"] for r in rows] == [m1.run_id, m2.run_id] and m1.run_id != m2.run_id
    assert float(rows[1]["duration"]) == pytest.approx(m2.duration_s)
    # both runs' records are kept in the file (nothing lost)
    assert sum(r["type"] == "step" for r in read_jsonl(tmp_path / "greentrain.jsonl")) == 7


def test_one_tracker_started_twice_counts_each_run_alone(tmp_path: Path) -> None:
    model = GPT(d=32, layers=1, heads=2, seq=16)
    t = greentrain.Tracker(model, out_dir=tmp_path, print_summary=False)
    for steps in (4, 1):
        with t:
            _train(t, model, steps)
        assert t.measurement is not None and t.measurement.num_steps == steps


def test_module_figures_after_a_kill_use_the_steps_of_the_last_snapshot() -> None:
    """Issue 16 item 4: killed after step 5 with the last module snapshot at step 3, the per-step module FLOPs
    are those of a complete run (100 per step), not the snapshot's totals over all 5 steps (50)."""
    def snap(n: int, first: bool = False) -> dict[str, object]:
        mod = {"name": "blocks.0", "calls": n, "forward_s": 0.01 * n, "backward_s": 0.02 * n,
               "forward_flop": 100.0 * n, "backward_flop": 200.0 * n, "memory_bytes": 1.0}
        return {"type": "modules", "num_steps": n, "modules": [mod], **({"first_step": True} if first else {})}

    records: list[dict[str, object]] = [{"type": "start", "run_id": "r", "world_size": 1}]
    for i in range(5):
        records.append({"type": "step", "t_s": 0.1 * (i + 1), "step": i, "step_time_s": 0.1, "flop": 300.0})
        if i == 0:
            records.append(snap(1, first=True))
        if i == 2:
            records.append(snap(3))
    m = summarize(records, None)  # no end record: killed
    assert m.status.startswith("incomplete") and m.num_steps == 5
    (mod,) = m.modules
    assert mod.forward_flop == pytest.approx(100.0) and mod.backward_flop == pytest.approx(200.0)
    assert mod.forward_s == pytest.approx(0.01) and mod.backward_s == pytest.approx(0.02)
    assert mod.forward_flop + mod.backward_flop <= m.flop_per_step


def test_the_tracker_says_which_files_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 14: every command that writes a file says so in one line."""
    with greentrain.Tracker(out_dir=tmp_path, grid_g_per_kwh=100.0) as t:
        t.step(tokens=8)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("greentrain: wrote")]
    assert lines == [f"greentrain: wrote {tmp_path / 'measurement.json'}, {tmp_path / 'emissions.csv'}, "
                     f"{tmp_path / 'model_card_co2.yaml'}"]
