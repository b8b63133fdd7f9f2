"""`greentrain compare` reads its two files through results/codec.py as typed views (PlanResult, TrackResult):
the relative errors and the same-job warnings from the views; an unknown kind, a newer schema version, a
malformed field or a file of the wrong kind is one line naming the file and the field, exit status 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.report.compare import mismatch_warnings
from greentrain.results.codec import from_dict
from greentrain.results.kinds import PlanResult, TrackResult


def _read(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def _same_job(result_files: dict[str, Path], tmp_path: Path) -> tuple[str, str]:
    """The README plan and a measurement of the same job: 10 % slower predicted, 20 % less memory."""
    plan = _read(result_files["plan"])
    plan.update(step_time_s=1.1, tokens_per_s=900.0, flop_per_step=2e12, tokens_per_step=4096, energy_kwh=10.0,
                run_time_s=36000.0)
    # 9.5e9 on the device, 1.5e9 of it outside PyTorch's allocator (CUDA context, NCCL): 8e9 compared
    plan["memory_bytes_per_device"] = {**plan["memory_bytes_per_device"], "total": 9.5e9, "reserved": 1.5e9}
    track = _read(result_files["track"])
    track.update(step_time_s=1.0, tokens_per_s=1000.0, flop_per_step=2e12, memory_bytes=1e10, energy_j_per_step=1000.0,
                 tokens=4096 * 10, num_steps=10)
    return _write(tmp_path / "plan.json", plan), _write(tmp_path / "measurement.json", track)


def test_compare_relative_errors(result_files: dict[str, Path], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    pred, meas = _same_job(result_files, tmp_path)
    assert main(["compare", pred, meas, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "compare" and data["warnings"] == []  # the same job: FLOPs and tokens per step agree
    rows = {r["quantity"]: r for r in data["rows"]}
    assert rows["step_time_s"]["relative_error"] == pytest.approx(0.1)
    assert rows["tokens_per_s"]["relative_error"] == pytest.approx(-0.1)
    assert rows["memory_bytes"]["relative_error"] == pytest.approx(-0.2)
    assert rows["flop_per_step"]["relative_error"] == pytest.approx(0.0)
    # 10 kWh over 36000 s / 1.1 s per step = 3.6e7 J / 32727 steps = 1100 J per step
    assert rows["energy_j_per_step"]["predicted"] == pytest.approx(1100.0)
    assert "mfu" not in rows  # not measured
    assert main(["compare", pred, meas]) == 0
    out = capsys.readouterr().out
    assert "predicted vs measured" in out and "+10.0%" in out and "-20.0%" in out and "warning" not in out


def test_compare_warns_on_different_jobs(result_files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The README plan (llama3-8b on 64 chips) against a 2-layer d=64 measurement: both per-step figures differ."""
    assert main(["compare", str(result_files["plan"]), str(result_files["track"])]) == 0
    out = capsys.readouterr().out
    assert "warning: flop_per_step: predicted" in out and "warning: tokens per step" in out


def test_mismatch_warnings_of_the_views(result_files: dict[str, Path]) -> None:
    plan = from_dict(_read(result_files["plan"]))
    track = from_dict(_read(result_files["track"]))
    assert isinstance(plan, PlanResult) and isinstance(track, TrackResult)
    warnings = mismatch_warnings(plan, track)
    assert len(warnings) == 2 and warnings[0].startswith("flop_per_step: predicted ")
    assert "tokens per step" in warnings[1] and "different jobs" in warnings[1]
    empty = from_dict({**_read(result_files["track"]), "num_steps": 0, "tokens": 0, "flop_per_step": 0.0})
    assert isinstance(empty, TrackResult) and mismatch_warnings(plan, empty) == []  # nothing measured: no mismatch


@pytest.mark.parametrize("side, change, needle", [
    ("predicted", {"schema_version": 99}, "schema_version=99: is newer than this greentrain reads"),
    ("measured", {"schema_version": 99}, "schema_version=99: is newer than this greentrain reads"),
    ("predicted", {"kind": "heatmap"}, "kind='heatmap': is not a result kind greentrain reads"),
    ("predicted", {"step_time_s": "slow"}, "step_time_s='slow': must be a finite number"),
    ("measured", {"num_steps": 2.5}, "num_steps=2.5: must be an integer"),
    ("predicted", {"flop_per_step": "many"}, "predicted.flop_per_step='many': must be a number"),
])
def test_compare_bad_files_are_one_line(result_files: dict[str, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str], side: str, change: dict[str, Any],
                                        needle: str) -> None:
    """Before the codec, schema_version 99 and an unknown kind were compared as if they were plans."""
    files = {"predicted": _read(result_files["plan"]), "measured": _read(result_files["track"])}
    files[side].update(change)
    paths = [_write(tmp_path / f"{k}.json", v) for k, v in files.items()]
    assert main(["compare", *paths]) == 2
    out, err = capsys.readouterr()
    assert out == "" and needle in err and err.count("\n") == 1 and "Traceback" not in err
    if "flop_per_step" not in needle:
        assert paths[0 if side == "predicted" else 1] in err  # the codec names the file


def test_compare_wants_a_plan_then_a_measurement(result_files: dict[str, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    plan, track, search = (str(result_files[k]) for k in ("plan", "track", "search"))
    partial = _write(tmp_path / "p.json", {"step_time_s": 1.1, "mfu": 0.4})  # no kind and not one kind's keys
    for argv, needle in (([plan, plan], "is a prediction (greentrain plan --json), not a measurement"),
                         ([track, track], "is a track result, not a prediction"),
                         ([search, track], "is a search result, not a prediction"),
                         ([partial, track], "kind=None: is missing and the keys (mfu, step_time_s) are not those")):
        assert main(["compare", *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and needle in err and err.count("\n") == 1, err
