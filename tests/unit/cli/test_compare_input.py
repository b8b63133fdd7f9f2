"""`greentrain compare`: the files it reads go through config.load_mapping, then results/codec.py (one-line
errors, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.cli.main import main


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["plan", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048",
                 "--tokens", "1e9", "--json"]) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(capsys.readouterr().out)
    return plan


def test_binary_directory_and_duplicate_key_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _plan(tmp_path, capsys)
    png = tmp_path / "some.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    dup = tmp_path / "dup.json"
    dup.write_text('{"step_time_s": 1.0, "step_time_s": 2.0}')
    for argv, needle in (([str(png), str(good)], "predicted="), ([str(good), str(tmp_path)], "is a directory"),
                         ([str(dup), str(good)], "duplicate key 'step_time_s'")):
        assert main(["compare", *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_real_plan_is_refused_as_the_measurement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 9 with the file `plan --json` really writes (it has num_steps, as a measurement does):
    `compare PLAN.json PLAN.json` reported +0.0 %."""
    plan = _plan(tmp_path, capsys)
    assert main(["compare", str(plan), str(plan)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "is a prediction (greentrain plan --json)" in err
