"""`greentrain footprint RUN.json`: a plan or track result is read through results/codec.py as its typed view
(an unknown kind, a newer schema version, a malformed field or a result that is not a run: one line naming the
file and the field, exit 2); a hand-written run file is read key by key as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.footprint import read_run_file
from greentrain.cli.main import main
from greentrain.footprint.inputs import RunFile, run_inputs

PLAN = ["plan", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048",
        "--tokens", "1e9", "--region", "FRA", "--json"]


def _plan(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(PLAN) == 0
    return dict(json.loads(capsys.readouterr().out))


def _write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_a_plan_file_is_its_typed_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _plan(capsys)
    run = read_run_file(_write(tmp_path / "plan.json", plan))
    assert run == RunFile(where="plan.json", num_chips=8, run_time_s=plan["run_time_s"],
                          device_hours=plan["device_hours"], chip=plan["chip"], region="FRA", pue=plan["pue"],
                          power_w_per_chip=plan["power_w_per_chip"], utilization=plan["utilization"],
                          mfu=plan["mfu"], energy_kwh=plan["energy_kwh"], predicted=True)
    inputs = run_inputs(run)
    assert inputs.power_predicted and inputs.num_chips == 8 and inputs.duration_s == plan["run_time_s"]
    assert main(["footprint", str(tmp_path / "plan.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["energy_basis"] == "predicted" and out["num_chips"] == 8 and out["region"] == "FRA"


@pytest.mark.parametrize("change, needle", [
    ({"schema_version": 99}, "schema_version=99: is newer than this greentrain reads"),
    ({"kind": "heatmap"}, "kind='heatmap': is not a result kind greentrain reads"),
    ({"num_chips": 8.5}, "num_chips=8.5: must be an integer"),
    ({"run_time_s": "long"}, "run_time_s='long': must be a finite number"),
])
def test_a_bad_plan_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any],
                                     needle: str) -> None:
    """Before the codec, schema_version 99 and an unknown kind were read as if they were plans."""
    path = _write(tmp_path / "plan.json", {**_plan(capsys), **change})
    assert main(["footprint", path, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and needle in err and path in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_result_that_is_not_a_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["footprint", "--chip", "h100-sxm", "--num-chips", "8", "--hours", "2", "--region", "FRA",
                 "--json"]) == 0
    path = _write(tmp_path / "footprint.json", json.loads(capsys.readouterr().out))
    assert main(["footprint", path]) == 2
    err = capsys.readouterr().err
    assert "is a footprint result, not a run" in err and err.count("\n") == 1


def test_a_hand_written_run_is_read_key_by_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "run.json", {"num_chips": 4, "device_hours": 8, "chip": {"name": "h100-sxm"},
                                          "power_w_per_chip": 500})
    run = read_run_file(path)
    assert run == RunFile(where="run.json", num_chips=4, device_hours=8, chip="h100-sxm", power_w_per_chip=500)
    assert run_inputs(run).duration_s == 2 * 3600.0
    bad = _write(tmp_path / "bad.json", {"num_chips": 4, "run_time_s": -1, "power_w_per_chip": 500})
    assert main(["footprint", bad]) == 2
    assert "bad.json.run_time_s=-1: must be >= 0.0" in capsys.readouterr().err
