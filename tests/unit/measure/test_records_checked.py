"""Run records are checked where they are read (measure/records.py read_jsonl): a hand-edited or foreign
`track.jsonl` / `steps.jsonl` with a field that is not a finite number >= 0 gets one line naming the file, the
line and the field, exit 2 (it was a traceback deep in the summary: float('abc'), float(None))."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main

START = {"type": "start", "t_unix": 1000.0, "t0_unix": 1000.0, "run_id": "r", "world_size": 1, "meters": []}


def _folder(tmp_path: Path, sample: dict[str, Any], step: dict[str, Any]) -> Path:
    track = [START, {"type": "sample", "t_s": 0.5, "gpu_energy_j": 5.0, "rss_bytes": 1e6} | sample,
             {"type": "end", "t_s": 1.0, "status": "ok", "error": ""}]
    steps = [START, {"type": "step", "t_s": 0.6, "step": 0, "step_time_s": 0.1, "tokens": 8.0} | step,
             {"type": "modules", "num_steps": 1, "modules": [{"name": "m", "calls": 1, "forward_s": 0.01,
                                                              "backward_s": 0.02, "forward_flop": 1.0,
                                                              "backward_flop": 2.0, "memory_bytes": 0.0}]}]
    for name, recs in (("track.jsonl", track), ("steps.jsonl", steps)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return tmp_path


@pytest.mark.parametrize(("sample", "step", "where"), [
    ({"gpu_energy_j": "abc"}, {}, "track.jsonl:2': gpu_energy_j='abc'"),
    ({"t_s": -1.0}, {}, "track.jsonl:2': t_s=-1.0"),
    ({}, {"t_s": None}, "steps.jsonl:2': t_s=None"),
    ({}, {"tokens": True}, "steps.jsonl:2': tokens=True"),
    ({}, {"step_time_s": float("nan")}, "steps.jsonl:2': step_time_s=nan"),
])
def test_a_bad_field_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], sample: dict[str, Any],
                                 step: dict[str, Any], where: str) -> None:
    out = _folder(tmp_path, sample, step)
    assert main(["track", "--summarize", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and where in err and "must be a finite number >= 0" in err


def test_a_bad_module_field_names_the_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _folder(tmp_path, {}, {})
    lines = (out / "steps.jsonl").read_text().splitlines()
    lines[-1] = lines[-1].replace('"forward_s": 0.01', '"forward_s": "fast"')
    (out / "steps.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["track", "--summarize", str(out)]) == 2
    assert "modules[].forward_s='fast'" in capsys.readouterr().err


def test_good_records_summarize(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["track", "--summarize", str(_folder(tmp_path, {}, {})), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_steps"] == 1
