"""A board run below its die's full power limit (hardware/chip.py power_limited_clock_ratio): compute-bound
kernels at the sustained clock the limit leaves, memory streaming unchanged; the catalog's 500 W H100 uses it;
chips at their full limit are untouched."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.compute import compute_peaks
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.estimate.vector import estimate_steps
from greentrain.hardware.catalog import chip_from_dict, get_chip
from greentrain.hardware.chip import power_limited_clock_ratio
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.space import SearchSpace, table

# ml-engineering's MAMF table (stas00/ml-engineering @744d01e): A100 SXM at 400 W 271.2 TFLOP/s, A100 PCIe
# (300 W) 252.9: the exponent is fitted on this pair, so the formula must give it back (0.2 % tolerance).
A100_PCIE_OVER_SXM = 252.9 / 271.2


def test_the_published_a100_pair_is_reproduced() -> None:
    a100 = get_chip("a100-80gb")
    assert power_limited_clock_ratio(300, a100.tdp_w, a100.idle_w) == pytest.approx(A100_PCIE_OVER_SXM, rel=2e-3)


def test_full_power_and_unknown_limits_leave_the_clock_alone() -> None:
    for name in ("a100-80gb", "h100-sxm", "h200", "b200", "mi300x"):
        assert get_chip(name).compute_clock_ratio == 1.0
    assert power_limited_clock_ratio(0, 700, 70) == 1.0
    assert power_limited_clock_ratio(700, 0, 70) == 1.0
    assert power_limited_clock_ratio(800, 700, 70) == 1.0


def test_a_lower_limit_runs_slower_and_never_stops() -> None:
    ratios = [power_limited_clock_ratio(w, 700, 70) for w in (650, 500, 350, 200, 71)]
    assert all(1 > a > b > 0 for a, b in itertools.pairwise(ratios))
    assert ratios[-1] > 0


def test_the_500_w_h100_is_the_700_w_die_at_a_lower_clock() -> None:
    part = get_chip("h100-sxm-96gb")
    assert (part.tdp_w, part.max_power_w) == (500, 700)
    ratio = power_limited_clock_ratio(500, 700, part.idle_w)
    assert 0.9 < part.compute_clock_ratio == ratio < 0.95
    full = dataclasses.replace(part, max_power_w=0.0)
    for precision in ("bf16", "fp8"):
        slow, fast = compute_peaks(part, precision), compute_peaks(full, precision)
        assert slow.matmul == pytest.approx(fast.matmul * ratio)
        assert slow.attention == pytest.approx(fast.attention * ratio)


def test_a_max_power_below_the_limit_is_refused_naming_the_field() -> None:
    data = {"memory_gib": 80, "bf16_tflop_per_s": 989.5, "memory_bandwidth_gb_per_s": 3350, "tdp_w": 700,
            "max_power_w": 500}
    with pytest.raises(ConfigError, match=r"chip\(x\)\.max_power_w.*500.*tdp_w"):
        chip_from_dict("x", data)


def _sc(chip_limit_w: float) -> Scenario:
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 10}})
    chip = dataclasses.replace(sc.cluster.chip, tdp_w=chip_limit_w, max_power_w=700.0)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, chip=chip))


def test_a_capped_run_is_slower_in_compute_and_the_search_agrees() -> None:
    s = Strategy(dp=8, zero=1, micro_batch_size=1)
    eff = efficiency_for("h100-sxm")
    full, capped = (estimate_step(_sc(w), s, eff=eff, check_fit=False) for w in (700.0, 400.0))
    assert capped.step_time_s > full.step_time_s
    assert capped.compute_time_s / full.compute_time_s < 1 / power_limited_clock_ratio(400, 700, 70) + 1e-9
    assert capped.compute_time_s > full.compute_time_s * 1.05
    sc = _sc(400.0)
    rows = table(sc, SearchSpace(max_micro_batch=1))
    arrays = estimate_steps(sc, rows, eff=eff, check_fit=False)
    i = next(i for i, r in enumerate(arrays.index)
             if (rows.dp[r], rows.tp[r], rows.pp[r], rows.zero[r], rows.micro_batch_size[r]) == (8, 1, 1, 1, 1))
    assert arrays.step_time_s[i] == pytest.approx(capped.step_time_s, rel=1e-9)


def test_a_scenario_file_sets_the_limit_and_keeps_it_through_its_dict() -> None:
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8,
                                                               "power_limit_w": 400}})
    assert (sc.cluster.chip.tdp_w, sc.cluster.chip.max_power_w) == (400.0, 700.0)
    again = scenario_from_dict(sc.to_dict())
    assert again.cluster.chip == sc.cluster.chip
    assert "power_limit_w" not in scenario_from_dict({"cluster": {"chip": "h100-sxm"}}).to_dict()["cluster"]


@pytest.mark.parametrize("limit", [0, 50, 701, "high", float("nan")])
def test_a_limit_outside_idle_and_full_power_is_refused(limit: object) -> None:
    with pytest.raises(ConfigError, match=r"cluster\.power_limit_w"):
        scenario_from_dict({"cluster": {"chip": "h100-sxm", "power_limit_w": limit}})


def test_search_runs_every_chip_type_at_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    """The first chip type comes from the scenario, the others are built by the search: both at the limit."""
    import json

    from greentrain.cli.main import main

    args = ["search", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "32", "--seq-len", "2048",
            "--tokens", "1e10", "--top", "3", "--json"]
    main([*args, "--chip", "a100-80gb,h100-sxm", "--power-limit-w", "300"])
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    assert {(r["estimate"]["chip"], r["estimate"]["power_w_per_chip"]) for r in ranked} == {("h100-sxm", 300.0)}
    assert main([*args, "--chip", "h100-sxm,a100-80gb", "--power-limit-w", "450"]) == 2  # above the A100's 400 W
    assert "--power-limit-w=450" in capsys.readouterr().err
