"""Issue 25 item 5: a new pipeline schedule is one record (parallel/schedules.PipelineSchedule) given to
``register`` (docs/extending.md, "A pipeline schedule"); nothing else is edited.

A fake schedule, "test-zb", runs 1F1B's event order and keeps 1F1B's memory rule but claims no bubble (as a
zero-bubble schedule would). Every predictor then prices it or refuses it in one line: `plan` prices its record's
bubble and memory, `simulate step` runs its record's event order, the vectorised `search` refuses it (its record
says it is not searched), `emulate pipeline` refuses it (emulate runs its own schedules), a YAML scenario
accepts it and `catalog schedules` lists it. The record is unregistered after each test.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.parallel.schedules import ONE_F_ONE_B, PIPELINE_SCHEDULES, PipelineSchedule, register, unregister

FAKE = "test-zb"
STRATEGY = ["--pp", "4", "--tp", "8", "--dp", "2", "--zero", "1", "--recompute", "selective", "--micro-batch", "1"]


@pytest.fixture
def fake_schedule() -> Iterator[PipelineSchedule]:
    record = register(dataclasses.replace(ONE_F_ONE_B, name=FAKE, help="a test's bubble-free 1F1B", searched=False,
                                          bubble=lambda pp, vpp: 0.0 * pp, source="a test"))
    yield record
    unregister(FAKE)


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_plan_prices_the_record_s_bubble_and_memory(fake_schedule: PipelineSchedule,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    base = _json(capsys, "plan", *STRATEGY, "--schedule", "1f1b")
    fake = _json(capsys, "plan", *STRATEGY, "--schedule", FAKE)
    assert fake["strategy"]["schedule"] == FAKE
    assert fake["memory_bytes_per_device"] == base["memory_bytes_per_device"]  # 1F1B's held micro-batches
    bubble = base["step_breakdown_s"]["bubble"]
    assert fake["step_breakdown_s"]["bubble"] == 0.0 < bubble
    assert fake["step_time_s"] == pytest.approx(base["step_time_s"] - bubble, rel=1e-12)


def test_simulate_runs_the_record_s_event_order(fake_schedule: PipelineSchedule,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    base = _json(capsys, "simulate", "step", *STRATEGY, "--schedule", "1f1b")
    fake = _json(capsys, "simulate", "step", *STRATEGY, "--schedule", FAKE)
    assert fake["schedule"] == FAKE and fake["pipeline_time_s"] == base["pipeline_time_s"]  # 1F1B's order
    assert fake["analytic_step_time_s"] < base["analytic_step_time_s"]  # the estimator took its bubble


def test_search_and_emulate_refuse_it_in_one_line(fake_schedule: PipelineSchedule, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3.2-1b\ncluster: {chip: h100-sxm, num_chips: 8}\nworkload: {global_batch_size: 16, "
                   f"seq_len: 2048, train_tokens: 1.0e+9}}\nstrategy: {{pp: 2, schedule: {FAKE}}}\n")
    err = _refused(capsys, "search", str(job), "--json", "--max-micro-batch", "2")
    assert f"strategy.schedule='{FAKE}': cannot be searched (the search enumerates 1f1b and interleaved)" in err
    err = _refused(capsys, "emulate", "pipeline", "--schedule", FAKE)
    assert f"invalid choice: '{FAKE}'" in err


def test_a_scenario_file_takes_it_and_its_chunk_rule(fake_schedule: PipelineSchedule, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"strategy: {{dp: 2, tp: 8, pp: 4, zero: 1, schedule: {FAKE}}}\n")
    assert _json(capsys, "plan", str(job))["strategy"]["schedule"] == FAKE
    job.write_text(f"strategy: {{dp: 2, tp: 8, pp: 4, vpp: 2, schedule: {FAKE}}}\n")
    err = _refused(capsys, "plan", str(job))
    assert f"strategy.schedule='{FAKE}': conflicts with strategy.vpp=2" in err


def test_catalog_lists_it_with_its_source(fake_schedule: PipelineSchedule, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["catalog", "schedules", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert listed[FAKE]["source"] == "a test" and listed[FAKE]["bubble_micro_batches"] == 0.0
    assert not listed[FAKE]["searched"] and listed[FAKE]["held_micro_batches_stage_0"] == 8.0  # 1F1B's at pp 8


def test_without_its_record_the_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert FAKE not in PIPELINE_SCHEDULES
    assert main(["plan", *STRATEGY, "--schedule", FAKE]) == 2
    assert f"invalid choice: '{FAKE}'" in capsys.readouterr().err
