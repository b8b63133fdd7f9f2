"""`greentrain compare`: the files it reads go through config.load_mapping (one-line errors, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli.main import main


def test_binary_directory_and_duplicate_key_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "plan.json"
    good.write_text(json.dumps({"step_time_s": 1.0}))
    png = tmp_path / "some.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    dup = tmp_path / "dup.json"
    dup.write_text('{"step_time_s": 1.0, "step_time_s": 2.0}')
    for argv, needle in (([str(png), str(good)], "predicted="), ([str(good), str(tmp_path)], "is a directory"),
                         ([str(dup), str(good)], "duplicate key 'step_time_s'")):
        assert main(["compare", *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and needle in err and err.count("\n") == 1 and "Traceback" not in err
