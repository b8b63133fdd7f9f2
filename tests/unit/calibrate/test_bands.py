"""Error bands (calibrate/bands.py): built from scored runs, shipped as data, matched to a scenario's class."""

from __future__ import annotations

import pytest

from greentrain.calibrate.bands import (
    ANY,
    Band,
    band_for,
    build_bands,
    scale_class,
    shipped_bands,
)


def _band(fw: str, chip: str, moe: bool, scale: str, runs: int, band: float) -> Band:
    return Band(framework=fw, chip=chip, moe=moe, scale=scale, runs=runs, band=band, mean_abs=band / 2, bias=0.0)


TABLE = (
    _band("nemo", "b200", False, "1 node", 5, 0.10),
    _band("nemo", "b200", False, ANY, 7, 0.12),
    _band("nemo", "h100-sxm", True, "1 node", 1, 0.50),
    _band("nemo", "h100-sxm", True, ANY, 2, 0.40),
    _band("nemo", ANY, True, ANY, 4, 0.20),
    _band(ANY, "a100-80gb", False, ANY, 9, 0.05),
    _band("all", "all", False, "all", 100, 0.9),
)


def test_scale_classes() -> None:
    assert [scale_class(n, 8) for n in (4, 8, 16, 128, 136)] == ["1 node", "1 node", "2-16 nodes", "2-16 nodes",
                                                                 "> 16 nodes"]


def test_a_scenario_takes_its_own_class_then_wider_pools() -> None:
    exact = band_for("megatron-bridge", "b200", False, 8, 8, TABLE)  # the same framework under another name
    assert exact.how == "exact" and exact.band is TABLE[0] and not exact.outside
    assert "+/-10 %" in exact.describe() and "5 validated runs" in exact.describe()
    # the 2-node class has no runs: the class pooled over scales is the scenario's own framework, chip and kind
    pooled = band_for("nemo", "b200", False, 16, 8, TABLE)
    assert pooled.band is TABLE[1]
    # a class with fewer than 3 runs gives way to the same framework and kind on any chip
    wider = band_for("nemo", "h100-sxm", True, 8, 8, TABLE)
    assert wider.band is TABLE[4] and not wider.outside and "own class has 1 validated run" in wider.describe()
    elsewhere = band_for("nemo", "b200", True, 8, 8, TABLE)  # no MoE run on b200 at all
    assert elsewhere.band is TABLE[4] and elsewhere.outside and "other chip" in elsewhere.describe()
    other_fw = band_for("torchtitan", "a100-80gb", False, 64, 8, TABLE)
    assert other_fw.band is TABLE[5] and other_fw.how == "other framework"
    out = band_for("deepspeed", "mi300x", False, 8, 8, TABLE)
    assert out.how == "outside" and out.band is TABLE[6]
    assert out.describe().startswith("outside every validated class")


def test_build_bands_takes_the_80th_percentile_of_each_class() -> None:
    from dataclasses import dataclass

    @dataclass
    class _Chip:
        name: str = "h100-sxm"

    @dataclass
    class _Cluster:
        chip: _Chip
        num_chips: int = 8
        chips_per_node: int = 8

    @dataclass
    class _Model:
        is_moe: bool = False

    @dataclass
    class _Scenario:
        cluster: _Cluster
        model: _Model

    @dataclass
    class _Run:
        framework: str
        scenario: _Scenario

    @dataclass
    class _Pred:
        throughput_error: float | None

    errs = [0.01 * i for i in range(-5, 6)]
    runs = [_Run("nemo", _Scenario(_Cluster(_Chip()), _Model())) for _ in errs] + \
        [_Run("nemo", _Scenario(_Cluster(_Chip()), _Model()))]
    preds = [_Pred(e) for e in errs] + [_Pred(None)]  # an unscored run counts nowhere
    bands = {(b.framework, b.chip, b.scale): b for b in build_bands(runs, preds)}  # type: ignore[arg-type]
    own = bands[("nemo", "h100-sxm", "1 node")]
    assert own.runs == 11
    assert own.band == pytest.approx(0.04)  # 80th percentile of |error| over 0, .01, .01, ..., .05, .05
    assert own.bias == pytest.approx(0.0, abs=1e-12)
    assert bands[("all", "all", "all")].runs == 11


def test_the_shipped_table_has_every_pool_and_the_calibration_classes() -> None:
    table = shipped_bands()
    keys = {(b.framework, b.chip, b.moe) for b in table}
    assert ("all", "all", False) in keys
    assert ("nemo", "b200", True) in keys and ("llm-foundry", "a100-80gb", False) in keys
    assert all(b.band >= 0 and b.runs >= 1 for b in table)
