"""Pure bf16 training from the command line (issue 23 item 10): bf16 weights, gradients and Adam moments with no
fp32 master copy keep 8 bytes per parameter, against 18 for mixed precision with fp32 gradients (Korthikanti et al.
2022 Fig. 1)."""

from __future__ import annotations

import json

import pytest

from greentrain.cli.main import main
from greentrain.model.load import load_model

ARGS = ["plan", "--model", "llama3.2-1b", "--chip", "h100-sxm", "--num-chips", "1", "--global-batch", "8",
        "--seq-len", "1024", "--dp", "1", "--zero", "0", "--micro-batch", "1", "--json"]


def _state_bytes_per_param(extra: list[str], capsys: pytest.CaptureFixture[str]) -> float:
    assert main([*ARGS, *extra]) == 0
    mem = json.loads(capsys.readouterr().out)["memory_bytes_per_device"]
    state = mem["weights"] + mem["gradients"] + mem["optimizer"]  # megatron: no allocator fragmentation
    return float(state) / load_model("llama3.2-1b").num_params()


def test_pure_bf16_is_8_bytes_per_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    assert _state_bytes_per_param([], capsys) == pytest.approx(18.0)
    pure = ["--optimizer-dtype", "bf16", "--no-master-weights", "--grad-dtype", "bf16"]
    assert _state_bytes_per_param(pure, capsys) == pytest.approx(8.0)


def test_bad_optimizer_dtype_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--optimizer-dtype", "fp16"]) == 2
    err = capsys.readouterr().err
    assert "fp16" in err and "bf16" in err


def test_nemo_automodel_trains_in_bf16_unless_told_fp32(capsys: pytest.CaptureFixture[str]) -> None:
    """NeMo AutoModel loads a model in bf16 (from_config: torch_dtype "auto" -> bfloat16) and Adam's moments follow
    the weights' dtype: its default is the pure-bf16 recipe (bf16 gradients and moments, 2 + 4 bytes per parameter
    beside the weights); --optimizer-dtype fp32 is its float32 load."""
    n = load_model("llama3.2-1b").num_params()

    def grads_and_moments(extra: list[str]) -> float:
        assert main([*ARGS, "--framework", "nemo-automodel", "--zero", "3", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        mem = out["memory_bytes_per_device"]
        return float(mem["gradients"] + mem["optimizer"]) / n

    assert grads_and_moments([]) == pytest.approx(6.0)
    assert grads_and_moments(["--optimizer-dtype", "fp32"]) >= 10.0  # fp32 moments
