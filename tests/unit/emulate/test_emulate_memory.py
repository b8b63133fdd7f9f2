"""Issue 24: a case whose tensors cannot fit in this machine's memory is refused before any rank starts, in one
line with the memory it needs and what is available (an allocator error in the launcher was a traceback)."""

from __future__ import annotations

import pytest

from greentrain.cli.main import main
from greentrain.emulate import memory as launcher
from greentrain.errors import ConfigError


@pytest.mark.parametrize("shape", [["--m", "1e12"], ["--m", "200000", "--k", "200000"]])
def test_a_case_larger_than_memory_is_one_line_exit_2(shape: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emulate", "matmul", *shape]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs about" in err and "GiB available: use smaller shapes" in err


def test_the_estimate_counts_operands_and_result_on_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    from greentrain.emulate.cases import MatMulCase
    from greentrain.emulate.sharding import Mesh2D, TensorSharding

    one = TensorSharding.parse("1x1,1x1", "a")
    case = MatMulCase(mesh=Mesh2D.parse("1x2"), m=64, k=32, n=16, a=one, b=one, c=one)
    assert launcher.case_bytes(case) == (64 * 32 + 32 * 16 + 64 * 16) * 4 * 2 * case.world_size
    monkeypatch.setattr(launcher, "available_bytes", lambda: 1000.0)
    with pytest.raises(ConfigError, match=r"needs about 0\.0 GiB .* this machine has 0\.0 GiB available"):
        launcher.check_memory([case], case.world_size)
