"""Typed results in and out: every command's JSON reads back as its view and writes back unchanged; an
unknown kind, another schema version or a malformed field is one line naming the file, field, value, rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.results.codec import from_dict, kind_of, load_result, stamp
from greentrain.results.kinds import PlanResult, SearchResultView, TrackResult
from greentrain.results.view import SCHEMA_VERSION

KINDS = ("plan", "search", "simulate", "trace", "track", "compare", "footprint", "footprint_best", "regions",
         "traffic", "batch_time", "offload_heatmap", "experiment")
OTHER_NAMES = {"regions": "footprint", "footprint_best": "footprint", "experiment": "experiment_report"}


@pytest.mark.parametrize("name", KINDS)
def test_every_writer_round_trips(result_files: dict[str, Path], name: str) -> None:
    data = json.loads(result_files[name].read_text())
    view = load_result(result_files[name])
    kind = OTHER_NAMES.get(name, name)
    assert kind == view.KIND
    assert view.to_dict() == stamp(kind, data)
    assert from_dict(view.to_dict()).to_dict() == view.to_dict()  # a stamped file reads the same


def test_typed_fields_are_the_files_numbers(result_files: dict[str, Path]) -> None:
    plan = load_result(result_files["plan"])
    raw = json.loads(result_files["plan"].read_text())
    assert isinstance(plan, PlanResult)
    assert plan.step_time_s == raw["step_time_s"] and plan.mfu == raw["mfu"]
    assert plan.memory_bytes_per_device["total"] == raw["memory_bytes_per_device"]["total"]
    search = load_result(result_files["search"])
    assert isinstance(search, SearchResultView)
    assert search.ranked[0].estimate is not None and search.ranked[0].estimate.model == "llama3-8b"
    track = load_result(result_files["track"])
    assert isinstance(track, TrackResult) and [m.name for m in track.modules] == ["blocks.0", "blocks.1"]


def _write(tmp_path: Path, data: dict[str, object], name: str = "r.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _plan(result_files: dict[str, Path]) -> dict[str, object]:
    return dict(json.loads(result_files["plan"].read_text()))


@pytest.mark.parametrize("change, field, rule", [
    ({"kind": "heatmap"}, "kind", "is not a result kind"),
    ({"schema_version": SCHEMA_VERSION + 1}, "schema_version", "is newer than this greentrain reads"),
    ({"schema_version": 0}, "schema_version", "is not one this greentrain reads"),
    ({"step_time_s": "fast"}, "step_time_s", "must be a finite number"),
    ({"num_chips": 6.5}, "num_chips", "must be an integer"),
    ({"step_breakdown_s": {"compute": None}}, "step_breakdown_s.compute", "must be a finite number"),
])
def test_bad_files_name_file_field_value_rule(tmp_path: Path, result_files: dict[str, Path],
                                              change: dict[str, object], field: str, rule: str) -> None:
    path = _write(tmp_path, {**stamp("plan", _plan(result_files)), **change})
    with pytest.raises(ConfigError) as e:
        load_result(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {field}=") and rule in msg and "\n" not in msg


def test_missing_field_and_nested_error(tmp_path: Path, result_files: dict[str, Path]) -> None:
    plan = _plan(result_files)
    del plan["mfu"]
    with pytest.raises(ConfigError, match=r"plan\.json: mfu=None: is missing: a plan result has it"):
        load_result(_write(tmp_path, stamp("plan", plan), "plan.json"))
    search = json.loads(result_files["search"].read_text())
    search["ranked"][1]["mfu"] = "high"
    with pytest.raises(ConfigError, match=r"s\.json: ranked\[1\]\.mfu='high': must be a finite number"):
        load_result(_write(tmp_path, search, "s.json"))


def test_files_without_a_kind(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"x\.json: kind=None: is missing and the keys \(a, b\) are not"):
        load_result(_write(tmp_path, {"a": 1, "b": 2}, "x.json"))
    assert kind_of({"mode": "swarm"}) == "simulate"
    with pytest.raises(ConfigError, match=r"file='r\.yaml': must be a \.json result file \(plan, search, "):
        load_result("r.yaml")
    (tmp_path / "broken.json").write_text("{\"kind\": ")
    with pytest.raises(ConfigError, match="malformed JSON at line 1"):
        load_result(tmp_path / "broken.json")


def test_cli_bad_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path, {"kind": "plan", "schema_version": 99}, "new.json")
    out = tmp_path / "report.html"
    out.write_text("before")
    assert main(["report", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "new.json: schema_version=99: is newer" in err
    assert out.read_text() == "before"  # nothing half-written over the old page
    assert main(["report", str(bad), "-o", str(tmp_path / "report.txt")]) == 2
    assert "must end in .html or .htm" in capsys.readouterr().err


@pytest.mark.parametrize("name", KINDS)
def test_every_writer_stamps_its_kind_first(result_files: dict[str, Path], name: str) -> None:
    """Each command's JSON opens with its kind and schema version (measure/ and experiment/ write them as
    literals: they sit below report/)."""
    data = json.loads(result_files[name].read_text())
    assert list(data)[:2] == ["kind", "schema_version"]
    assert (data["kind"], data["schema_version"]) == (OTHER_NAMES.get(name, name), SCHEMA_VERSION)
