"""benchmarks/bench_gpu_kernels.py, the per-chip microbenchmarks a lent GPU runs for estimate/efficiency.yaml:
its fits recover the efficiency model's constants, and on CPU (tiny shapes) it writes a chip entry that
efficiency.Efficiency accepts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from greentrain.estimate.efficiency import CHIP_KEYS, Efficiency

pytest.importorskip("torch")


def _bench() -> ModuleType:
    path = Path(__file__).parents[3] / "benchmarks" / "bench_gpu_kernels.py"
    spec = importlib.util.spec_from_file_location("bench_gpu_kernels", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fits_recover_the_model_constants() -> None:
    kb = _bench()
    truth = Efficiency(matmul_max=0.8, matmul_half_dim=480.0, memory=0.9, intra_node_link=0.8, inter_node_link=0.9,
                       reserved_bytes=0.0, attention_max_d128=0.34, attention_half_seq_causal=560.0)
    points = [{"m": m, "k": k, "n": n, "fraction": truth.matmul(m, k, n)}
              for m, k, n in kb.matmul_shapes(quick=False)]
    assert kb.fit_half_dim(points, 0.8) == pytest.approx(480.0, rel=0.02)
    seqs = [512, 1024, 2048, 4096, 8192, 16384]
    top, half = kb.fit_saturating(seqs, [truth.attention(128, s, causal=True) for s in seqs])
    assert top == pytest.approx(0.34, rel=0.01) and half == pytest.approx(560.0, rel=0.02)
    # FlashAttention-2's count: forward 4 s^2 d per head, backward 2.5 x; causal half
    assert kb.attention_flop(1, 1, 1024, 128, False) == pytest.approx(3.5 * 4 * 1024**2 * 128)
    assert kb.attention_flop(2, 8, 1024, 128, True) == pytest.approx(8 * 3.5 * 4 * 1024**2 * 128)


def test_cpu_quick_run_writes_an_efficiency_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The code path on CPU with tiny shapes; each kernel runs once for real but is timed by a fixed clock, so
    the fitted entry does not depend on the machine's load (a loaded CPU's fraction of an H100 rounded to 0)."""
    kb = _bench()

    def fixed_clock(fn: object, device: str, warmup: int, repeats: int) -> float:
        fn()  # type: ignore[operator]
        return 1e-3

    monkeypatch.setattr(kb, "timed_s", fixed_clock)
    assert kb.main(["--device", "cpu", "--quick", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["kind"] == "kernel-microbenchmarks" and len(results["matmul"]) == 4
    assert {"pinned_h2d_gb_per_s", "pageable_d2h_gb_per_s"} <= set(results["host_link"])
    entry = yaml.safe_load((tmp_path / "efficiency-chip.yaml").read_text())["chips"]["h100-sxm"]
    assert set(entry) <= set(CHIP_KEYS) and "QUICK" in entry["source"]
    fields = {k: float(v) for k, v in entry.items() if k != "source"}
    Efficiency(**fields, intra_node_link=0.8, inter_node_link=0.9, reserved_bytes=0.0)  # in range, or raises


def test_tiny_fractions_keep_their_significant_figures() -> None:
    kb = _bench()
    assert kb.sig(1.23456e-5) == pytest.approx(1.235e-5) and kb.sig(0.91234) == 0.9123
