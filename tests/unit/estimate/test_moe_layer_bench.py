"""benchmarks/bench_gpu_moe_layer.py, the MoE block a lent GPU times against greentrain's prediction: the tiny CPU
run writes its record, and the prediction prices the same block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
BENCH = Path(__file__).parents[3] / "benchmarks"


def test_quick_run_writes_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_gpu_moe_layer as bench

    assert bench.main(["--device", "cpu", "--quick", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "moe-layer.json").read_text())
    qwen, oss = record["rows"]
    assert record["quick"] and qwen["experts_local"] == 2 and qwen["copies"] == 64 * 8 and qwen["measured_s"] > 0
    assert not qwen["expert_bias"] and not qwen["gpt_oss_swiglu"]
    # GPT-OSS's block adds its experts' biases (their gradients accumulated by index) and its clamped SwiGLU
    assert oss["experts_local"] == 2 and oss["copies"] == 64 * 4 and oss["measured_s"] > 0
    assert oss["expert_bias"] and oss["gpt_oss_swiglu"]


def test_the_prediction_prices_the_same_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_gpu_moe_layer as bench

    # GPT-OSS-120B at 4,096 tokens a rank: 16 local experts of 1,024 rows at ep 8, 2 of 8,192 rows at ep 64; the
    # same GEMM work, 8x fewer weights read at ep 64 (estimate/compute.py _local), so that block is faster
    ep8 = bench.predicted_s("gpt-oss-120b", 4096, 8, "h100-sxm")["predicted_s"]
    ep64 = bench.predicted_s("gpt-oss-120b", 4096, 64, "h100-sxm")["predicted_s"]
    assert 0 < ep64 < ep8
