"""benchmarks/bench_gpu_moe_layer.py, the MoE block a lent GPU times against greentrain's prediction: the tiny CPU
run writes its record, and the prediction's two byte counts differ where the expert GEMMs are memory bound."""

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
    (row,) = record["rows"]
    assert record["quick"] and row["experts_local"] == 2 and row["copies"] == 64 * 8 and row["measured_s"] > 0


def test_operand_bytes_only_move_memory_bound_expert_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_gpu_moe_layer as bench

    small = bench.predicted_s("gpt-oss-120b", 4096, 8, "h100-sxm")  # 1,024 tokens per expert
    large = bench.predicted_s("gpt-oss-120b", 16384, 8, "h100-sxm")
    assert small["predicted_operand_bytes_s"] < 0.85 * small["predicted_s"]
    assert large["predicted_operand_bytes_s"] == pytest.approx(large["predicted_s"])
