"""The offload planner's ml_dataflow profile against ml_dataflow's own recorded runs.

Source: als244/ml_dataflow at d6f941d0 (LGPL-2.1; measurements only), bench/reproduce_results/recorded_data/
h100_8b_short_results.csv and h100_8b_medium_results.csv, copied with a header to
shared/reference/calibration/dataflow-h100_8b_{short,medium}.csv: Llama 3 8B on one H100 under host- and
device-memory caps. Issue 14 goals: tokens/s median error <= 10 %, >= 80 % of cells within 15 %, ran/failed
right on >= 90 % of cells; the seed example (1B, 16,384 tokens, 80/20 GiB) within 10 % of 41,923 tokens/s.
Two constants are fitted, on two cells only (design/offload.md section 4.4); the test checks that the shipped
values are what the fit gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.offload.calibrate import cell_scenario, fit_kernel_constants, read_recorded, score
from greentrain.offload.config import OffloadCaps, OffloadPolicy, offload_framework
from greentrain.offload.plan import plan_offload

CAL = Path(__file__).resolve().parents[1] / "data" / "calibration"  # copies of shared/reference/calibration
SWEEPS = [CAL / "dataflow-h100_8b_short.csv", CAL / "dataflow-h100_8b_medium.csv"]
needs_data = pytest.mark.skipif(not all(p.exists() for p in SWEEPS), reason="calibration data not present")


def test_shipped_constants_are_the_two_cell_fit() -> None:
    k = offload_framework("ml_dataflow")  # its entry in estimate/efficiency.yaml
    mm, att = fit_kernel_constants()
    assert k.matmul_scale == pytest.approx(mm, abs=2e-4)
    assert k.attention_scale == pytest.approx(att, abs=2e-4)


@needs_data
@pytest.mark.parametrize("path", SWEEPS, ids=["8b-short", "8b-medium"])
def test_recorded_sweep(path: Path) -> None:
    s = score(read_recorded(path))
    assert s.median_abs_error <= 0.10
    assert s.within_15 >= 0.80
    assert s.feasibility_right >= 0.99  # measured 2026-11-25: 100 % on both (offload/dataflow.py's buffers)


def test_seed_example_with_the_recorded_placement() -> None:
    """1B, 16,384 tokens, device 20 / host 80 GiB: 41,923 tokens/s (Sept. 2025 build, README example) with
    10 home slots (6 attention, 4 full) and 6 on the device; all 10 home slots at full (the July build, no
    downgrade: 33,748 recorded) must come out slower, with the link exposed."""
    sc = cell_scenario("llama3.2-1b", "h100-sxm", 16384)
    caps = OffloadCaps.from_gib(device_gib=20, host_gib=80)
    recorded = plan_offload(sc, caps, OffloadPolicy(activation_levels={"device": 6, "attention": 6, "full": 4}),
                            offload_framework("ml_dataflow"))
    assert recorded.tokens_per_s == pytest.approx(41923, rel=0.10)
    all_full = plan_offload(sc, caps, OffloadPolicy(activation_levels={"device": 6, "full": 10}),
                            offload_framework("ml_dataflow"))
    # prev_data/h100_1B_results.csv (July 2025): +10.9 % since the loss is priced as ml_dataflow's fused softmax and
    # cross-entropy kernels of the September build (model/loss.py "fused"; +9.2 % at 18 B per logit), whose July
    # kernels are not known: 12 %
    assert all_full.tokens_per_s == pytest.approx(33748, rel=0.12)
    assert all_full.tokens_per_s < 0.9 * recorded.tokens_per_s
    assert all_full.per_layer.exposed_s > 10 * recorded.per_layer.exposed_s  # the link, not the compute, waits


def test_seed_example_with_the_planners_own_placement() -> None:
    """The planner's own plan for the seed example within 10 % of 41,923 tokens/s: with ml_dataflow's device
    buffers (offload/dataflow.py) it keeps 7 slots on the device (ml_dataflow 6: it also holds a gradient
    block per whole layer it keeps); measured +6.6 % on 2026-11-25."""
    plan = plan_offload(cell_scenario("llama3.2-1b", "h100-sxm", 16384), OffloadCaps.from_gib(device_gib=20,
                                                                                              host_gib=80),
                        profile=offload_framework("ml_dataflow"))
    assert plan.tokens_per_s == pytest.approx(41923, rel=0.10)
    assert plan.slots()["device"] in (6, 7)
