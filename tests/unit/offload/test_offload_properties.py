"""Properties of the offload planner (hypothesis): more device memory, more host memory or a faster host link
never predicts fewer tokens/s (ml_dataflow's own recorded sweep breaks this in dozens of cell pairs); every plan
fits its caps; home activations move the same bytes each way."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.errors import InfeasibleError
from greentrain.offload.calibrate import cell_scenario
from greentrain.offload.config import FrameworkProfile, OffloadCaps, OffloadPolicy, ml_dataflow_profile, pytorch_profile
from greentrain.offload.plan import OffloadPlan, plan_offload
from greentrain.scenario import Scenario

CELLS = [("llama3.2-1b", 4096), ("llama3.2-1b", 16384), ("llama3-8b", 8192), ("llama3-8b", 32768)]


@cache
def _sc(model: str, seq: int) -> Scenario:
    return cell_scenario(model, "h100-sxm", seq)


def _profile(name: str) -> FrameworkProfile:
    return ml_dataflow_profile() if name == "ml_dataflow" else pytorch_profile()


def _tps(cell: tuple[str, int], dev: float, host: float, prof: str, link_share: int = 1) -> float:
    try:
        return plan_offload(_sc(*cell), OffloadCaps.from_gib(dev, host), OffloadPolicy(chips_per_host_link=link_share),
                            _profile(prof)).tokens_per_s
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
        p: OffloadPlan = plan_offload(_sc(*cell), OffloadCaps.from_gib(dev, host), profile=_profile(prof))
    except InfeasibleError:
        return
    assert p.device.total_bytes <= p.caps.device_bytes and p.host.total_bytes <= p.caps.host_bytes
    lt = p.per_layer
    weights = 2 * p.device.as_dict()["prefetch_ring"] > 0
    grads_in = lt.h2d_bytes - lt.d2h_bytes  # h2d = 2 W + acts (+ G); d2h = acts + G
    assert grads_in >= -1e-6 or not weights
