"""fp8 training: only the transformer layers' linear GEMMs run at the fp8 peak (estimate/compute.compute_peaks)."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.estimate import fp8
from greentrain.estimate.compute import OpsTime, Peaks, Sharding, compute_peaks, ops_time
from greentrain.estimate.efficiency import default_efficiency
from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.model.ops import OpKind, model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload


def test_fp8_peaks() -> None:
    h100 = get_chip("h100-sxm")
    p = compute_peaks(h100, "fp8")
    # fp8 GEMMs at the fp8 peak times the MAMF fp8/bf16 ratio (estimate/fp8.py)
    assert p.matmul == pytest.approx(h100.peak_flop_per_s("fp8") * fp8.gemm_ratio("h100-sxm"))
    assert p.attention == p.ends == h100.peak_flop_per_s("bf16")
    b = compute_peaks(h100, "bf16")
    assert b.matmul == b.attention == b.ends == h100.peak_flop_per_s("bf16")


def test_attention_ops_take_the_attention_peak() -> None:
    ops = model_ops(load_model("llama3-8b"), 1, 8192, 2.0).layers[0].ops
    eff, bw = default_efficiency(), 3.35e12

    def t(peak: float, att: float) -> OpsTime:
        return ops_time(ops, Sharding(), Peaks(matmul=peak, attention=att or peak, ends=peak), bw, eff)

    att_only = tuple(o for o in ops if o.kind is OpKind.ATTENTION)
    assert att_only
    same, split = t(2e15, 0.0), t(2e15, 1e15)
    slower = (ops_time(att_only, Sharding(), Peaks(matmul=1e15, attention=1e15, ends=1e15), bw, eff).forward_s
              - ops_time(att_only, Sharding(), Peaks(matmul=2e15, attention=2e15, ends=2e15), bw, eff).forward_s)
    assert split.forward_s == pytest.approx(same.forward_s + slower, rel=1e-12)


def test_fp8_speedup_is_below_the_peak_ratio() -> None:
    """H100 fp8 peak is 2x bf16; with attention and the LM head in bf16 the step gains less (published fp8
    training speedups are about 1.3-1.5x, e.g. NVIDIA's Transformer Engine / NeMo reports)."""
    sc = Scenario(model=load_model("llama3-8b"), cluster=build_cluster(get_chip("h100-sxm"), 8),
                  workload=Workload(global_batch_size=64, seq_len=8192), site=Site())
    s = Strategy(dp=8, zero=3, micro_batch_size=1, recompute="selective")
    bf16 = estimate_step(sc, s)
    fp8 = estimate_step(dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, precision="fp8")), s)
    speedup = bf16.step_time_s / fp8.step_time_s
    assert 1.2 < speedup < 1.8


def test_an_fp32_gemm_runs_at_the_fp32_peak_on_cuda_cores() -> None:
    """peft's fp32 adapters (Op.fp32): the chip's fp32 peak (67 of H200's 989.5 dense bf16 TFLOP/s) at matmul_max,
    without the tensor cores' shape factor; not quantized under an fp8 recipe."""
    from greentrain.model.ops import Shard, matmul

    chip, eff = get_chip("h200"), default_efficiency()
    peaks = compute_peaks(chip, "bf16")
    assert peaks.fp32 == chip.peak_fp32_flop_per_s * chip.compute_clock_ratio
    mm = dataclasses.replace(matmul("attn.qkv.lora_a.q", 8192, 4096, 4096, 4.0, Shard.REPLICATED), fp32=True,
                             kernels=(0.0, 0.0))
    t = ops_time((mm,), Sharding(), peaks, chip.memory_bytes_per_s, eff).forward_s
    assert t == pytest.approx(mm.flop / (peaks.fp32 * eff.matmul_max * eff.kernel_efficiency), rel=1e-9)
    fp8 = dataclasses.replace(compute_peaks(chip, "fp8"), cast_bytes_per_elt=6.0, cast_kernels=1.0)
    assert ops_time((mm,), Sharding(), fp8, chip.memory_bytes_per_s, eff).forward_s == pytest.approx(t, rel=1e-9)
