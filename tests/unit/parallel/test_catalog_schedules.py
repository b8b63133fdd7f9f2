"""`greentrain catalog schedules [--json]`: every registered PipelineSchedule record, its rules and source."""

from __future__ import annotations

import json

import pytest

from greentrain.cli.main import main
from greentrain.parallel.schedules import PIPELINE_SCHEDULES


def test_json_lists_each_record_with_its_rules_at_the_shown_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "schedules", "--json"]) == 0
    out, err = capsys.readouterr()
    data = {d["name"]: d for d in json.loads(out)}
    assert err == "" and list(data) == list(PIPELINE_SCHEDULES)
    for name, record in PIPELINE_SCHEDULES.items():
        d = data[name]
        assert (d["source"], d["searched"], d["interleaved"]) == (record.source, record.searched, record.interleaved)
        assert d["bubble_rule"] and d["held_rule"] and d["order_rule"]  # each rule's docstring, with its source
    # pp 8, 16 micro-batches, vpp 2 where interleaved: bubble (pp - 1) / vpp (Narayanan et al. 2021 §2.2); stage 0
    # holds pp micro-batches under 1F1B, x (1 + (pp - 1) / (pp vpp)) interleaved (Korthikanti et al. 2022 §4.2.3),
    # all of them under GPipe
    assert data["interleaved"]["shown_at"] == {"pp": 8, "vpp": 2, "num_micro_batches": 16}
    assert {n: d["bubble_micro_batches"] for n, d in data.items()} == {"1f1b": 7.0, "interleaved": 3.5, "gpipe": 7.0}
    assert data["1f1b"]["held_micro_batches_stage_0"] == 8.0
    assert data["interleaved"]["held_micro_batches_stage_0"] == pytest.approx(8 * (1 + 7 / 16))
    assert data["gpipe"]["held_micro_batches_stage_0"] == 16.0
    assert data["interleaved"]["micro_batch_multiple_of_pp"] and not data["gpipe"]["searched"]


def test_table_names_each_schedule_and_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "schedules"]) == 0
    out = capsys.readouterr().out
    for record in PIPELINE_SCHEDULES.values():
        assert record.name in out
    assert "Huang et al. 2019" in out and "multiple of pp" in out and "11.50" in out
