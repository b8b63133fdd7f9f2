"""--fp8-recipe on plan and search, and the runs CSV's fp8_recipe column in validate: the recipe reaches the
prediction, the framework's default fills an empty one, and bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import framework_names

SMALL = ("--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "32", "--seq-len", "2048", "--steps", "10",
         "--dp", "8", "--micro-batch", "1", "--zero", "3")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    code, out, err = _run(capsys, "plan", *SMALL, "--json", *args)
    assert code == 0, err
    d: dict[str, object] = json.loads(out)
    return d


def test_plan_takes_the_recipe_and_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    default = _plan(capsys, "--precision", "fp8", "--framework", "torchtitan")
    assert default["fp8_recipe"] == "tensorwise"  # torchtitan's (torchao's) default
    rowwise = _plan(capsys, "--precision", "fp8", "--framework", "torchtitan", "--fp8-recipe", "rowwise")
    assert rowwise["fp8_recipe"] == "rowwise"
    assert float(str(rowwise["step_time_s"])) > float(str(default["step_time_s"]))
    assert _plan(capsys)["fp8_recipe"] == ""  # bf16
    mx = _plan(capsys, "--chip", "b200", "--precision", "fp8", "--fp8-recipe", "mxfp8")
    assert mx["fp8_recipe"] == "mxfp8"


@pytest.mark.parametrize(("args", "needle"), [
    (("--fp8-recipe", "delayed"), "--fp8-recipe='delayed': applies to --precision fp8 only (precision is bf16)"),
    (("--precision", "fp8", "--fp8-recipe", "mxfp8"), "--fp8-recipe='mxfp8': needs a chip with MXFP8 tensor cores"),
])
def test_bad_flags_are_one_line(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str) -> None:
    for command in ("plan", "search"):
        code, out, err = _run(capsys, command, *(SMALL if command == "plan" else SMALL[:10]), *args)
        assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1


def test_unknown_flag_value_names_the_recipes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "plan", "--precision", "fp8", "--fp8-recipe", "blockwise")
    assert code == 2 and "'tensorwise', 'delayed', 'rowwise', 'mxfp8'" in err


def test_a_file_recipe_goes_with_a_precision_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3.2-1b\ncluster: {chip: h100-sxm, num_chips: 8}\nworkload: {global_batch_size: 32, "
                 "seq_len: 2048, num_steps: 10, precision: fp8, fp8_recipe: rowwise}\n")
    assert _plan(capsys, str(f))["fp8_recipe"] == "rowwise"
    assert _plan(capsys, str(f), "--precision", "bf16")["fp8_recipe"] == ""
    code, _, err = _run(capsys, "plan", str(f), "--chip", "h200", "--fp8-recipe", "mxfp8")
    assert code == 2 and "--fp8-recipe='mxfp8'" in err


def test_search_ranks_with_the_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    def best(*args: str) -> float:
        code, out, err = _run(capsys, "search", *SMALL[:10], "--precision", "fp8", "--top", "1", "--json", *args)
        assert code == 0, err
        return float(json.loads(out)["ranked"][0]["step_time_s"])

    assert best("--fp8-recipe", "delayed") < best("--fp8-recipe", "rowwise")


HEADER = "run_id,framework,model,chip,num_chips,seq_len,global_batch,precision,fp8_recipe,status,measured_step_time_s"


def _csv(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    return p


def test_runs_column_and_framework_default(tmp_path: Path) -> None:
    r1, r2 = read_runs(_csv(tmp_path, "r1,nemo,llama3-8b,h100-sxm,8,2048,64,fp8,,ok,2",
                            "r2,torchtitan,llama3-8b,b200,8,2048,64,fp8,MXFP8,ok,2"), frameworks=framework_names())
    assert r1.scenario.workload.fp8_recipe == "" and r2.scenario.workload.fp8_recipe == "mxfp8"


@pytest.mark.parametrize(("row", "needle"), [
    ("r7,nemo,llama3-8b,h100-sxm,8,2048,64,fp8,blockwise,ok,2",
     "runs[r7].fp8_recipe='blockwise': must be one of tensorwise, delayed, rowwise, mxfp8"),
    ("r7,nemo,llama3-8b,h100-sxm,8,2048,64,fp8,mxfp8,ok,2",
     "runs[r7].fp8_recipe='mxfp8': needs a chip with MXFP8 tensor cores"),
    ("r7,nemo,llama3-8b,h100-sxm,8,2048,64,bf16,delayed,ok,2",
     "runs[r7].fp8_recipe='delayed': applies to precision fp8 only (precision is bf16)"),
])
def test_bad_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str, needle: str) -> None:
    path = _csv(tmp_path, "r1,nemo,llama3-8b,h100-sxm,8,2048,64,fp8,delayed,ok,2", row)
    with pytest.raises(ConfigError) as e:
        read_runs(path, frameworks=framework_names())
    assert needle in str(e.value)
    out = tmp_path / "profile.yaml"
    for args in (["validate", str(path)], ["calibrate", str(path), "-o", str(out)]):
        code, stdout, err = _run(capsys, *args)
        assert code == 2 and stdout == "" and needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
