"""`greentrain emulate cases FILE` (issue 16 item 14): a cases file is checked line by line before any rank
starts; a bad line is one line naming the file, the line and the rule, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.cli.emulate import MAX_CASES, read_cases
from greentrain.cli.main import main
from greentrain.emulate.cases import FfnCase, MatMulCase, MatMulPolicy, MlpCase
from greentrain.errors import ConfigError


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cases.txt"
    path.write_text(text)
    return str(path)


def test_a_cases_file_reads_as_the_command_line_would(tmp_path: Path) -> None:
    path = _file(tmp_path, "# the seed's cases\n"
                           "matmul --mesh 2x4 --a 1x1,1x4 --b 1x4,1x1   # matched inner\n\n"
                           "ffn --mesh 2x4 --unsharded --seed 3\n"
                           "mlp --tp 2 --tokens 16\n")
    mm, ffn, mlp = read_cases(path)
    assert isinstance(mm, MatMulCase) and mm.derived_policy is MatMulPolicy.MATCHED_INNER and mm.m == 4096
    assert isinstance(ffn, FfnCase) and not ffn.gspmd and ffn.seed == 3
    assert isinstance(mlp, MlpCase) and mlp.tp == 2 and mlp.world_size == 2


@pytest.mark.parametrize(("text", "message"), [
    ("matmul --mesh 2x4\nmatmul --mesh 2y4\n", ":2: mesh='2y4'"),
    ("matmul --bogus 1\n", ":1='matmul --bogus 1': unrecognized arguments: --bogus 1"),
    ("matmul --backend nccl\n", ":1='--backend': a launch option"),
    ("cases other.txt\n", ":1='cases': a cases file cannot name another one"),
    ("matmul --a '1x1\n", ":1=\"matmul --a '1x1\": No closing quotation"),
    ("# nothing\n\n", "has no case"),
])
def test_a_bad_line_is_one_line_with_its_number(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                                message: str) -> None:
    pytest.importorskip("torch")  # without torch the command stops earlier, naming the extra
    path = _file(tmp_path, text)
    assert main(["emulate", "cases", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("greentrain emulate: error: ") and message in err, err


def test_a_cases_file_is_bounded(tmp_path: Path) -> None:
    path = _file(tmp_path, "mlp --tp 2\n" * (MAX_CASES + 1))
    with pytest.raises(ConfigError, match=f"at most {MAX_CASES:,} per call"):
        read_cases(path)
