"""Per-kernel fixed costs (estimate/compute.py kernels_s, op_kernels): every kernel of the op list costs
max(roofline, the chip's floor) + its launch gap, eager chains launch more kernels than fused ones, torch.compile
folds adjacent element-wise ops, CUDA graphs drop the gap, fp8 quantization adds its kernels."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.estimate.compute import Peaks, Sharding, kernels_s, op_kernels, ops_time
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.model.ops import Op, Shard, elementwise, matmul, model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload

PEAKS = Peaks(matmul=1e15, attention=1e15, ends=1e15)


def _layer(name: str = "llama3.2-1b") -> tuple[Op, ...]:
    return model_ops(load_model(name), 1, 2048, 2.0, flash=True).layers[0].ops


def _by_name(ops: tuple[Op, ...]) -> dict[str, Op]:
    return {op.name: op for op in ops}


def test_kernel_floor_and_gap() -> None:
    a100 = efficiency_for("a100-80gb", "torchtitan")
    assert (a100.kernel_floor_s, a100.kernel_gap_s) == (1.3e-6, 1.3e-6)  # gpu-small-kernels: 2.6 us eager, 1.3 graph
    h200 = efficiency_for("h200", "torchtitan")
    assert h200.kernel_floor_s + h200.kernel_gap_s == pytest.approx(2.4e-6)
    assert kernels_s(0.0, 3, a100) == pytest.approx(3 * 2.6e-6)  # tiny kernels: the floor and the gap
    assert kernels_s(1e-3, 3, a100) == pytest.approx(1e-3 + 3 * 1.3e-6)  # long ones: the gap only
    graphs = dataclasses.replace(a100, cuda_graphs=True)
    assert kernels_s(0.0, 3, graphs) == pytest.approx(3 * 1.3e-6)
    assert kernels_s(1e-3, 0, a100) == 1e-3  # fused into a neighbour: no kernel of its own


def test_kernels_per_op_follow_the_framework() -> None:
    ops = _by_name(_layer())
    eager, compiled, megatron = (efficiency_for("h100-sxm", f) for f in ("torchtitan", "torchtitan-compile",
                                                                           "megatron"))
    assert op_kernels(ops["attn.qkv"], eager, False) == (1.0, 2.0)  # a GEMM: forward, input and weight gradients
    assert op_kernels(ops["attn.flash"], eager, False) == (1.0, 3.0)  # FA2's backward: preprocess, main, dq
    assert op_kernels(ops["attn.rope"], eager, False) == (10.0, 10.0)  # torchtitan eager_ops: rope, glu
    assert op_kernels(ops["mlp.act"], eager, False) == (2.0, 4.0)
    assert op_kernels(ops["attn.norm"], eager, True) == (1.0, 2.0)  # nn.RMSNorm: one fused kernel
    assert op_kernels(ops["mlp.act"], megatron, False) == (1.0, 1.0)  # bias_swiglu_impl
    # torch.compile: the residual add and the norm after it are one generated kernel
    assert op_kernels(ops["mlp.norm"], compiled, True) == (0.0, 0.0)
    assert op_kernels(ops["attn.rope"], compiled, False) == (1.0, 1.0)


def test_elementwise_time_is_bytes_over_bandwidth() -> None:
    """kernel_efficiency scales GEMM and attention kernels only: an element-wise op is its bytes over the chip's
    streaming bandwidth, plus its kernels' fixed costs."""
    eff = efficiency_for("h100-sxm", "megatron")
    op = elementwise("x", 1e9, 2.0, Shard.TOKENS)
    bw = 3.35e12
    for ke in (0.5, 1.0):
        t = ops_time((op,), Sharding(), PEAKS, bw, dataclasses.replace(eff, kernel_efficiency=ke))
        assert t.forward_s == pytest.approx(op.bytes / (bw * eff.memory) + eff.kernel_gap_s)
    mm = matmul("mm", 4096, 4096, 4096, 2.0, Shard.COLUMN)
    slow = ops_time((mm,), Sharding(), PEAKS, bw, dataclasses.replace(eff, kernel_efficiency=0.5)).forward_s
    assert slow > 1.9 * ops_time((mm,), Sharding(), PEAKS, bw, eff).forward_s - 1e-5


def test_fp8_quantize_kernels_are_kernels() -> None:
    eff = efficiency_for("h100-sxm", "nemo")
    mm = matmul("attn.qkv", 8, 64, 64, 2.0, Shard.COLUMN)  # tiny: every kernel at its floor
    fp8 = dataclasses.replace(PEAKS, cast_bytes_per_elt=6.0)
    none = ops_time((mm,), Sharding(), fp8, 3.35e12, eff)
    three = ops_time((mm,), Sharding(), dataclasses.replace(fp8, cast_kernels=3.0), 3.35e12, eff)
    per_kernel = eff.kernel_floor_s + eff.kernel_gap_s
    assert three.forward_s - none.forward_s == pytest.approx(3 * per_kernel, rel=0.01)
    assert three.backward_s - none.backward_s == pytest.approx(3 * per_kernel, rel=0.01)


def _step_s(chip: str, framework: str, eff: Efficiency | None = None) -> float:
    sc = Scenario(model=load_model("llama3.2-1b"), cluster=build_cluster(get_chip(chip), 8),
                  workload=Workload(global_batch_size=8, seq_len=2048, train_tokens=1e9), site=Site())
    s = Strategy(dp=8, zero=3, micro_batch_size=1, recompute="none")
    return estimate_step(sc, s, eff=eff or efficiency_for(chip, framework), check_fit=False).step_time_s


def test_fixed_costs_weigh_more_on_faster_chips() -> None:
    """The same model and framework: the kernels' fixed costs do not shrink with the chip, so their share of the
    step grows from A100 to H100 to B200, and eager PyTorch loses more to torch.compile on Hopper and Blackwell than
    on Ampere (between H100 and B200 the order follows their FLOP/s over memory bandwidth: 295 and 281 FLOP/byte,
    the memory-bound element-wise chains and losses that Inductor fuses weigh about the same)."""
    shares, ratios = [], []
    for chip in ("a100-80gb", "h100-sxm", "b200"):
        eff = efficiency_for(chip, "torchtitan")
        no_fixed = dataclasses.replace(eff, kernel_floor_s=0.0, kernel_gap_s=0.0)
        shares.append(_step_s(chip, "torchtitan") / _step_s(chip, "torchtitan", no_fixed) - 1)
        ratios.append(_step_s(chip, "torchtitan") / _step_s(chip, "torchtitan-compile"))
    assert 0 < shares[0] < shares[1] < shares[2]
    assert 1 < ratios[0] < min(ratios[1], ratios[2])


def test_kernel_fields_checked() -> None:
    eff = efficiency_for("", "megatron")
    with pytest.raises(Exception, match="kernel_gap_s"):
        dataclasses.replace(eff, kernel_gap_s=-1.0)
