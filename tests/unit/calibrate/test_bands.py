"""Error bands (calibrate/bands.py): built from scored runs, shipped as data, matched to a scenario's class."""

from __future__ import annotations

import pytest

from greentrain.calibrate.bands import (
    ANY,
    COMPUTE_BOUND_SHARE,
    MIN_RUNS,
    Band,
    band_for,
    build_bands,
    conformal_band,
    conformal_rank,
    scale_class,
    shipped_bands,
)


def _band(fw: str, chip: str, moe: bool, scale: str, runs: int, band: float, classes: int = 0) -> Band:
    return Band(framework=fw, chip=chip, moe=moe, scale=scale, runs=runs, band=band, mean_abs=band / 2, bias=0.0,
                classes=classes)


TABLE = (
    _band("nemo", "b200", False, "1 node", 5, 0.10),
    _band("nemo", "b200", False, ANY, 7, 0.12),
    _band("nemo", "h100-sxm", True, "1 node", 1, 0.50),
    _band("nemo", "h100-sxm", True, ANY, 2, 0.40),
    _band("torchtitan", "a100-80gb", False, "2-16 nodes", 2, 0.03),
    _band("torchtitan", "a100-80gb", False, ANY, 6, 0.05),
    _band(ANY, ANY, False, "1 node", 8, 0.50, classes=2),
    _band(ANY, ANY, False, "2-16 nodes", 2, 0.03, classes=1),
    _band("all", "all", False, "all", 100, 0.9, classes=3),
)


def test_scale_classes() -> None:
    assert [scale_class(n, 8, 0.9) for n in (4, 8, 16, 128, 136)] == ["1 node", "1 node", "2-16 nodes",
                                                                      "2-16 nodes", "> 16 nodes, compute-bound"]
    # beyond 16 nodes the regime of the predicted step splits the scale (a playbook run at 1-4 % MFU, waiting on
    # the network, says nothing of a compute-bound run there); below it does not
    assert scale_class(136, 8, 0.49) == "> 16 nodes, mostly waiting"
    assert scale_class(136, 8, COMPUTE_BOUND_SHARE) == "> 16 nodes, compute-bound"
    assert scale_class(128, 8, 0.1) == "2-16 nodes" and scale_class(8, 8, 0.1) == "1 node"


def test_conformal_rank_needs_four_runs_for_an_80_percent_band() -> None:
    assert [conformal_rank(n) for n in (1, 3, 4, 9, 10)] == [2, 4, 4, 8, 9]
    assert min(n for n in range(1, 20) if conformal_rank(n) <= n) == MIN_RUNS
    assert conformal_band([0.05, 0.01, 0.03, 0.02]) == 0.05  # rank 4 of 4
    assert conformal_band([0.01 * i for i in range(1, 10)]) == pytest.approx(0.08)  # rank 8 of 9
    assert conformal_band([0.2, 0.1]) == 0.2  # too few: capped at the largest


def test_a_scenario_takes_its_own_class_then_wider_pools() -> None:
    exact = band_for("megatron-bridge", "b200", False, 8, 8, compute_share=0.9, bands=TABLE)  # nemo, another name
    assert exact.how == "exact" and exact.band is TABLE[0] and not exact.outside
    assert "+/-10 %" in exact.describe() and "5 validated runs" in exact.describe()
    for variant in ("nemo-deepep", "nemo-a2a-overlap", "nemo-deepep-a2a-overlap", "nemo-full-graph"):  # same code
        assert band_for(variant, "b200", False, 8, 8, compute_share=0.9, bands=TABLE).band is TABLE[0]
    # a class with runs at this scale, fewer than MIN_RUNS: the same framework, chip and kind over every scale
    pooled = band_for("torchtitan-compile", "a100-80gb", False, 16, 8, compute_share=0.9, bands=TABLE)
    assert pooled.band is TABLE[5] and pooled.own_runs == 2 and not pooled.outside
    assert "own class has 2 validated run(s) only" in pooled.describe()
    # no run at the scenario's scale: the class is new there, whatever it scored at another scale
    new_scale = band_for("nemo", "b200", False, 16, 8, compute_share=0.9, bands=TABLE)
    # ... and never narrower than a smaller scale's pool: 2-16 nodes' 3 % gives way to one node's 50 %
    assert new_scale.band is TABLE[6] and new_scale.outside
    assert "applied to 2-16 nodes too" in new_scale.describe()
    wide = tuple(b if b is not TABLE[6] else _band(ANY, ANY, False, "1 node", 8, 0.01, classes=2) for b in TABLE)
    assert band_for("nemo", "b200", False, 16, 8, compute_share=0.9, bands=wide).band is TABLE[7]
    # fewer than MIN_RUNS everywhere: the scale's pool of classes, the worst of them
    few = band_for("nemo", "h100-sxm", True, 8, 8, compute_share=0.9, bands=TABLE)
    assert few.band is TABLE[6] and not few.outside and "the worst of the 2 validated classes" in few.describe()
    out = band_for("deepspeed", "mi300x", False, 8, 8, compute_share=0.9, bands=TABLE)
    assert out.how == "outside" and out.band is TABLE[6]
    assert out.describe().startswith("outside every validated class") and "+/-50 %" in out.describe()
    beyond = band_for("deepspeed", "mi300x", False, 512, 8, compute_share=0.9, bands=TABLE)  # none there: every class
    assert beyond.band is TABLE[8] and beyond.outside


def test_build_bands_takes_the_conformal_80th_percentile_of_each_class() -> None:
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
        compute_share: float | None = 0.9

    errs = [0.01 * i for i in range(-5, 6)]
    runs = [_Run("nemo", _Scenario(_Cluster(_Chip()), _Model())) for _ in errs] + \
        [_Run("nemo", _Scenario(_Cluster(_Chip()), _Model()))]
    preds = [_Pred(e) for e in errs] + [_Pred(None)]  # an unscored run counts nowhere
    # beyond 16 nodes: four compute-bound runs off by 10 %, four waiting on the network off by 3x: two classes
    runs += [_Run("nemo", _Scenario(_Cluster(_Chip(), num_chips=256), _Model())) for _ in range(8)]
    preds += [_Pred(0.1, 0.8)] * 4 + [_Pred(3.0, 0.2)] * 4
    bands = {(b.framework, b.chip, b.scale): b for b in build_bands(runs, preds)}  # type: ignore[arg-type]
    assert bands[("nemo", "h100-sxm", "> 16 nodes, compute-bound")].band == pytest.approx(0.1)
    assert bands[("nemo", "h100-sxm", "> 16 nodes, mostly waiting")].band == pytest.approx(3.0)
    assert bands[("nemo", "h100-sxm", ANY)].runs == 19
    for share, band in ((0.8, 0.1), (0.2, 3.0)):  # a scenario's own regime decides which class it is in
        match = band_for("nemo", "h100-sxm", False, 256, 8, compute_share=share, bands=tuple(bands.values()))
        assert match.how == "exact" and match.band is not None and match.band.band == pytest.approx(band)
    runs, preds = runs[:12], preds[:12]
    bands = {(b.framework, b.chip, b.scale): b for b in build_bands(runs, preds)}  # type: ignore[arg-type]
    own = bands[("nemo", "h100-sxm", "1 node")]
    assert own.runs == 11
    assert own.band == pytest.approx(0.05)  # rank ceil(0.8 x 12) = 10 of |error| 0, .01, .01, ..., .05, .05
    assert own.bias == pytest.approx(0.0, abs=1e-12)
    assert bands[("all", "all", "all")].runs == 11 and bands[("all", "all", "all")].classes == 1
    assert bands[(ANY, ANY, "1 node")].band == own.band and (ANY, ANY, "> 16 nodes, compute-bound") not in bands


def test_the_shipped_table_has_every_pool_and_the_calibration_classes() -> None:
    table = shipped_bands()
    keys = {(b.framework, b.chip, b.moe) for b in table}
    assert ("all", "all", False) in keys and (ANY, ANY, False) in keys
    assert ("nemo", "b200", True) in keys and ("llm-foundry", "a100-80gb", False) in keys
    assert all(b.band >= 0 and b.runs >= 1 for b in table)


def test_validate_counts_the_runs_their_stated_band_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """`validate` says for how many scored runs the band `plan` states for their class held: each run's |error|
    against its class's band (check_bands), the same numbers in the table and the JSON."""
    import json
    from pathlib import Path

    from greentrain.calibrate.bands import check_bands
    from greentrain.calibrate.runs import read_runs
    from greentrain.calibrate.validate import validate
    from greentrain.cli.main import main

    src = Path(__file__).parents[2] / "data" / "calibration" / "megatron-bridge-2509.csv"
    runs = read_runs(src)
    preds, _ = validate(runs)
    check = check_bands(runs, preds)
    assert check.scored == sum(p.throughput_error is not None for p in preds) > 0
    expected = [band_for(r.framework, r.scenario.cluster.chip.name, r.scenario.model.is_moe,
                         r.scenario.cluster.num_chips, r.scenario.cluster.chips_per_node,
                         compute_share=p.compute_share or 0.0).band for r, p in zip(runs, preds, strict=True)]
    assert list(check.bands) == [b.band if b else None for b in expected]
    inside = [abs(p.throughput_error) <= b for p, b in zip(preds, check.bands, strict=True)
              if p.throughput_error is not None and b is not None]
    assert check.held == sum(inside) and 0 < check.held <= check.scored
    # a band of 0 everywhere holds for no run with an error
    zero = tuple(_band(b.framework, b.chip, b.moe, b.scale, b.runs, 0.0, b.classes) for b in shipped_bands())
    assert check_bands(runs, preds, bands=zero).held == sum(p.throughput_error == 0 for p in preds)
    assert main(["validate", str(src), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["error_band_held"] == check.held and out["summary"]["error_band_scored"] == check.scored
    assert [r["within_error_band"] for r in out["rows"]] == [
        None if b is None or p.throughput_error is None else abs(p.throughput_error) <= b
        for p, b in zip(preds, check.bands, strict=True)]
    assert main(["validate", str(src)]) == 0
    assert f"{check.held} of {check.scored} runs inside the error band" in " ".join(capsys.readouterr().out.split())
