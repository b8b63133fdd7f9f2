"""Step terms written once over floats and columns (estimate/step_terms.py): the data-parallel reduction as
frameworks run it, host-bound micro-batches."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step_terms import dp_sync_s, micro_batch_s
from greentrain.hardware.catalog import get_chip
from greentrain.scenario import build_cluster

CL = build_cluster(get_chip("h100-sxm"), 64)
KW = dict(dp_per_node=8.0, grad_bytes=4e9, weight_bytes=2e9, layers=16.0, backward_s=0.2, micro_batch_s=0.3,
          num_micro=4.0, cl=CL, params=1e9)


def _dp(eff: object, zero: float = 0.0, dp: float = 64.0) -> float:
    return float(dp_sync_s(zero=zero, dp_group=dp, dp=dp, eff=eff, **KW))  # type: ignore[arg-type]


def test_scalar_equals_column() -> None:
    eff = efficiency_for("h100-sxm", "nanotron")
    zero, dp = np.array([0.0, 1, 3, 0, 1]), np.array([64.0, 64, 64, 8, 1])
    cols = dp_sync_s(zero=zero, dp_group=dp, dp=dp, eff=eff, **{k: (np.full(5, v) if isinstance(v, float) else v)
                                                        for k, v in KW.items()})
    for i in range(5):
        assert cols[i] == pytest.approx(_dp(eff, zero[i], dp[i]), rel=1e-12)


def test_overlap_hides_all_but_the_last_bucket() -> None:
    base = efficiency_for("h100-sxm", "ddp")  # 25 MiB buckets overlapped with the backward
    exposed = _dp(base)
    serial = _dp(dataclasses.replace(base, dp_overlap=False))
    assert 0 < exposed < serial
    one_bucket = _dp(dataclasses.replace(base, dp_overlap=False, dp_bucket_bytes=0.0))
    assert one_bucket < serial  # fewer collectives, fewer latencies
    assert _dp(base, dp=1.0) == 0.0


def test_zero1_all_gathers_the_weights_after_the_step() -> None:
    eff = efficiency_for("h100-sxm", "megatron")
    assert _dp(eff, zero=1.0) > 0
    nano = efficiency_for("h100-sxm", "nanotron")  # all-reduce + all-gather: more than zero 0
    assert _dp(nano, zero=1.0) > _dp(nano, zero=0.0)


def test_host_bound_micro_batch() -> None:
    eff = efficiency_for("h100-sxm", "nanotron")
    assert micro_batch_s(0.010, 16.0, eff, tp=1.0, pp=1.0, cl=CL) == pytest.approx(16 * eff.host_layer_s)
    assert micro_batch_s(1.0, 16.0, eff, tp=1.0, pp=1.0, cl=CL) == 1.0


def test_pipeline_across_nodes_adds_host_time_per_tensor_parallel_rank() -> None:
    eff = efficiency_for("h100-sxm", "nanotron")
    per_tp = eff.host_layer_s_per_tp_pp_nodes
    assert per_tp > 0
    one_node = build_cluster(get_chip("h100-sxm"), 8)
    # a pipeline inside one node, or no pipeline: the host floor alone
    assert micro_batch_s(0.010, 8.0, eff, tp=4.0, pp=2.0, cl=one_node) == pytest.approx(8 * eff.host_layer_s)
    assert micro_batch_s(0.010, 8.0, eff, tp=4.0, pp=1.0, cl=CL) == pytest.approx(8 * eff.host_layer_s)
    # a pipeline across nodes: per_tp more per layer for each tensor-parallel rank
    assert micro_batch_s(0.010, 8.0, eff, tp=4.0, pp=2.0, cl=CL) == pytest.approx(8 * (eff.host_layer_s + 4 * per_tp))
    assert micro_batch_s(10.0, 8.0, eff, tp=4.0, pp=2.0, cl=CL) == 10.0  # device-bound: unchanged
    # the column form is the same formula
    tp, pp = np.array([1.0, 2, 8, 8]), np.array([1.0, 2, 1, 4])
    cols = micro_batch_s(np.full(4, 0.001), np.full(4, 8.0), eff, tp=tp, pp=pp, cl=CL)
    for i in range(4):
        assert cols[i] == pytest.approx(micro_batch_s(0.001, 8.0, eff, tp=tp[i], pp=pp[i], cl=CL), rel=1e-12)
    # frameworks without the measured cost (Megatron-LM) do not pay it
    meg = efficiency_for("h100-sxm", "megatron")
    assert micro_batch_s(0.001, 8.0, meg, tp=8.0, pp=4.0, cl=CL) == pytest.approx(max(0.001, 8 * meg.host_layer_s))


def test_step_breakdown_sums_to_the_step_when_host_bound() -> None:
    """A host-bound nanotron step (1B, tp 8 and pp 4 over four nodes, micro-batch 1): its parts, the device waiting
    for the host included, add up to the step; the simulator runs the same micro-batches."""
    import dataclasses

    from greentrain.estimate.step import estimate_step
    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict
    from greentrain.sim.cluster import simulate_step

    eff = efficiency_for("h100-sxm", "nanotron")
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 32},
                             "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}})
    s = Strategy(dp=1, tp=8, pp=4, sp=True, micro_batch_size=1)
    e = estimate_step(sc, s, check_fit=False, eff=eff)
    parts = (e.compute_time_s + e.tp_comm_time_s + e.cp_comm_time_s + e.ep_comm_time_s + e.pp_comm_time_s
             + e.dp_comm_time_s + e.grad_accum_time_s + e.host_wait_time_s + e.bubble_time_s + e.optimizer_time_s)
    assert e.host_wait_time_s > 0.5 * e.step_time_s  # host-bound: 4.4 ms + 8 x 2.3 ms a layer
    assert parts == pytest.approx(e.step_time_s, rel=1e-9)
    sim = simulate_step(dataclasses.replace(sc, strategy=s), eff=eff)
    assert sim.step_time_s == pytest.approx(e.step_time_s, rel=0.02)
