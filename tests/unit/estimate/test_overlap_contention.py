"""Overlapped data-parallel collectives are not free (estimate/step_terms.py overlap_cost_s): the compute kernels
that run beside them take (1 + x) times as long (the chip's overlap_slowdown), so x / (1 + x) of the overlapped
collective time is added to the step; and FSDP1's mixed-precision gradient path (llm-foundry) moves 14 bytes per
parameter and micro-batch outside the GEMMs."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.estimate.comm import Collective, collective_s
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step_terms import dp_sync_s, grad_accum_s, num_buckets, overlap_cost_s
from greentrain.hardware.catalog import get_chip
from greentrain.scenario import build_cluster

CL = build_cluster(get_chip("h100-sxm"), 8)
GRAD, WEIGHT, LAYERS, M = 4e9, 2e9, 16.0, 3.0


def _dp(eff: object, *, zero: float, micro_batch_s: float, backward_s: float = 0.2) -> float:
    return float(dp_sync_s(zero=zero, dp_group=8.0, dp_per_node=8.0, grad_bytes=GRAD, weight_bytes=WEIGHT,
                           layers=LAYERS, backward_s=backward_s, micro_batch_s=micro_batch_s, num_micro=M,
                           cl=CL, eff=eff, params=GRAD / 4.0, dp=8.0))  # type: ignore[arg-type]


def _zero3_comm(eff: object) -> float:
    return float(2 * collective_s(Collective.ALL_GATHER, 8.0, 8.0, WEIGHT, CL, eff)  # type: ignore[arg-type]
                 + collective_s(Collective.REDUCE_SCATTER, 8.0, 8.0, GRAD, CL, eff))  # type: ignore[arg-type]


def test_the_chips_figures() -> None:
    # Hopper: the H100 Nsight measurement (1.70x); every other chip takes the A100's (1.76x)
    for chip in ("h100-sxm", "h200", "h100-sxm-96gb", "h800", "h100-pcie"):
        assert efficiency_for(chip).overlap_slowdown == pytest.approx(0.70)
    for chip in ("a100-80gb", "a100-40gb", "b200", "mi300x"):
        assert efficiency_for(chip).overlap_slowdown == pytest.approx(0.76)


def test_overlap_cost_is_the_share_the_compute_loses() -> None:
    eff = efficiency_for("h100-sxm")
    assert overlap_cost_s(1.0, eff) == pytest.approx(0.70 / 1.70)
    assert overlap_cost_s(1.0, dataclasses.replace(eff, overlap_slowdown=0.0)) == 0.0
    assert overlap_cost_s(0.0, eff) == 0.0


@pytest.mark.parametrize("x", [0.0, 0.3, 0.76])
def test_zero3_hidden_collectives_cost_their_share(x: float) -> None:
    eff = dataclasses.replace(efficiency_for("h100-sxm", "fsdp2"), overlap_slowdown=x)
    comm = _zero3_comm(eff)
    # compute longer than the collectives: all of them overlap, x / (1 + x) of their time is lost
    assert _dp(eff, zero=3.0, micro_batch_s=10 * comm) == pytest.approx(M * comm * x / (1 + x), rel=1e-12)
    # compute shorter: the excess is exposed, the compute's own length overlaps
    short = comm / 2
    assert _dp(eff, zero=3.0, micro_batch_s=short) == pytest.approx(
        M * ((comm - short) + short * x / (1 + x)), rel=1e-12)


def test_bucketed_reduction_adds_the_hidden_buckets_share() -> None:
    base = dataclasses.replace(efficiency_for("h100-sxm", "ddp"), overlap_slowdown=0.0)
    slow = dataclasses.replace(base, overlap_slowdown=0.76)
    nb = float(num_buckets(GRAD, GRAD / 4.0, 8.0, LAYERS, base))
    red_one = float(collective_s(Collective.ALL_REDUCE, 8.0, 8.0, GRAD / nb, CL, base))
    exposed = _dp(base, zero=0.0, micro_batch_s=1.0, backward_s=10.0)
    assert exposed == pytest.approx(red_one, rel=1e-9)  # a long backward hides all but the last bucket
    hidden = nb * red_one - exposed
    assert _dp(slow, zero=0.0, micro_batch_s=1.0, backward_s=10.0) == pytest.approx(
        exposed + hidden * 0.76 / 1.76, rel=1e-9)
    # without overlap nothing runs beside the compute: no contention
    serial = dataclasses.replace(slow, dp_overlap=False)
    assert _dp(serial, zero=0.0, micro_batch_s=1.0) == pytest.approx(
        _dp(dataclasses.replace(serial, overlap_slowdown=0.0), zero=0.0, micro_batch_s=1.0), rel=1e-12)


def test_llm_foundry_fsdp1_gradient_traffic() -> None:
    # cast to the fp32 reduce dtype (2 + 4 bytes) and the pre-divide (4 + 4) of every unsharded gradient
    eff = efficiency_for("a100-80gb", "llm-foundry")
    assert eff.grad_accum_bytes_per_param == 14.0
    bw = get_chip("a100-80gb").memory_bytes_per_s
    assert grad_accum_s(1e9, bw, eff) == pytest.approx(1e9 * 14.0 / (bw * eff.memory * eff.kernel_efficiency))
