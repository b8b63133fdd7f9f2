"""Properties of the offload planner (hypothesis): more device memory, more host memory or a faster host link
(shared by fewer chips, or any speed) never predicts fewer tokens/s (ml_dataflow's own recorded sweep breaks this
in dozens of cell pairs); every plan fits its caps; home activations move the same bytes each way; caps at or
above the no-offload need reproduce estimate_step within 1 %."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain import units
from greentrain.errors import InfeasibleError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.offload.calibrate import cell_scenario
from greentrain.offload.config import OffloadCaps, OffloadFramework, OffloadPolicy, offload_framework
from greentrain.offload.plan import OffloadPlan, plan_offload
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, scenario_from_dict

CELLS = [("llama3.2-1b", 4096), ("llama3.2-1b", 16384), ("llama3-8b", 8192), ("llama3-8b", 32768)]


@cache
def _sc(model: str, seq: int) -> Scenario:
    return cell_scenario(model, "h100-sxm", seq)


def _profile(name: str) -> OffloadFramework:
    return offload_framework("ml_dataflow") if name == "ml_dataflow" else offload_framework("pytorch")


def _tps(cell: tuple[str, int], dev: float, host: float, prof: str, link_share: int = 1) -> float:
    try:
        return plan_offload(_sc(*cell), OffloadCaps.from_gib(device_gib=dev, host_gib=host),
                            OffloadPolicy(chips_per_host_link=link_share), _profile(prof)).tokens_per_s
    except InfeasibleError:
        return 0.0


grid = st.tuples(st.sampled_from(CELLS), st.floats(8, 76), st.floats(20, 250), st.floats(0.5, 4.0),
                 st.floats(1, 60), st.sampled_from(["ml_dataflow", "pytorch"]))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(grid)
def test_more_memory_or_bandwidth_never_slower(case: tuple) -> None:
    cell, dev, host, d_dev, d_host, prof = case
    base = _tps(cell, dev, host, prof)
    assert _tps(cell, dev + d_dev, host, prof) >= base * (1 - 1e-9)
    assert _tps(cell, dev, host + d_host, prof) >= base * (1 - 1e-9)
    assert base >= _tps(cell, dev, host, prof, link_share=2) * (1 - 1e-9)  # shared link: half the bandwidth


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(CELLS), st.floats(8, 80), st.floats(20, 250), st.sampled_from(["ml_dataflow", "pytorch"]))
def test_plans_fit_and_move_activations_both_ways(cell: tuple[str, int], dev: float, host: float, prof: str) -> None:
    try:
        p: OffloadPlan = plan_offload(_sc(*cell), OffloadCaps.from_gib(device_gib=dev,
                                                                       host_gib=host), profile=_profile(prof))
    except InfeasibleError:
        return
    assert p.device.total_bytes <= p.caps.device_bytes and p.host.total_bytes <= p.caps.host_bytes
    lt = p.per_layer
    weights = 2 * p.device.as_dict()["prefetch_ring"] > 0
    grads_in = lt.h2d_bytes - lt.d2h_bytes  # h2d = 2 W + acts (+ G); d2h = acts + G
    assert grads_in >= -1e-6 or not weights


def _with_link(sc: Scenario, factor: float) -> Scenario:
    """The scenario with its host link ``factor`` times as fast."""
    link = sc.cluster.host_link
    assert link is not None
    faster = dataclasses.replace(link, bytes_per_s=link.bytes_per_s * factor)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, host_link=faster))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.sampled_from(CELLS), st.floats(8, 78), st.floats(20, 250), st.floats(0.25, 4.0), st.floats(1.0, 3.0),
       st.sampled_from(["ml_dataflow", "pytorch"]))
def test_a_faster_link_never_predicts_fewer_tokens(cell: tuple[str, int], dev: float, host: float, base: float,
                                                   gain: float, prof: str) -> None:
    """Any link speed, not only the catalog's: x ``base``, then ``gain`` times faster."""
    caps = OffloadCaps.from_gib(device_gib=dev, host_gib=host)

    def tps(factor: float) -> float:
        try:
            return plan_offload(_with_link(_sc(*cell), factor), caps, profile=_profile(prof)).tokens_per_s
        except InfeasibleError:
            return 0.0

    assert tps(base * gain) >= tps(base) * (1 - 1e-9)


def _fused_pytorch() -> OffloadFramework:
    """The pytorch profile with its element-wise ops fused as estimate_step's default framework prices them (the
    executor's eager bytes, offload/eager.py, are checked in test_offload_eager.py)."""
    return dataclasses.replace(offload_framework("pytorch"), eager_ops=())


@cache
def _no_offload(seq: int) -> tuple[float, float, float]:
    """(device bytes, host bytes, estimate_step tokens/s) of llama3.2-1b at ``seq`` with nothing offloaded."""
    sc = _sc("llama3.2-1b", seq)
    plan = plan_offload(sc, OffloadCaps.from_gib(device_gib=80,
                                                 host_gib=1000), OffloadPolicy(optimizer_on="device-streamed"),
                        _fused_pytorch(), eff=efficiency_for("h100-sxm"))
    w = sc.workload.to_dict() | {"global_batch_size": plan.num_rounds}
    sc2 = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 1}, "workload": w})
    # the planner prices rooflines without the estimator's per-kernel launch floor and gap (estimate/compute.py
    # kernels_s; 1-4 % of a 1B step): both sides without them
    no_launch = dataclasses.replace(efficiency_for("h100-sxm"), kernel_floor_s=0.0, kernel_gap_s=0.0)
    est = estimate_step(sc2, Strategy(recompute="none", flash_attention=True), check_fit=False, eff=no_launch)
    return plan.device.total_bytes, plan.host.total_bytes, est.tokens_per_s


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.sampled_from([1024, 2048, 4096, 8192]), st.floats(0, 1), st.floats(1.0, 4.0))
def test_caps_above_the_no_offload_need_reproduce_estimate_step(seq: int, dev_share: float, host_x: float) -> None:
    """Goal: caps at or above the no-offload need give estimate_step's tokens/s within 1 % (same ops, roofline
    and efficiency, element-wise ops fused; everything resident and on the device, the optimizer on the device)."""
    need_dev, need_host, est = _no_offload(seq)
    cap_dev = need_dev + dev_share * (units.gib_to_bytes(80) - need_dev)
    plan = plan_offload(_sc("llama3.2-1b", seq), OffloadCaps(device_bytes=cap_dev, host_bytes=need_host * host_x),
                        OffloadPolicy(optimizer_on="device-streamed"), _fused_pytorch(),
                        eff=efficiency_for("h100-sxm"))
    assert plan.resident_layers == 16 and plan.slots()["device"] == 16
    assert plan.tokens_per_s == pytest.approx(est, rel=0.01)
