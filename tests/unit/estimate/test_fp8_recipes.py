"""fp8 recipes as a run chooses them (estimate/fp8.py, fp8.yaml): the workload's fp8_recipe, else its framework's
default; MXFP8 on Blackwell only; each recipe's quantize traffic, kernels and GEMM speed reach the step time, the
same through the vectorised search as through estimate_step."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate import fp8
from greentrain.estimate.compute import compute_peaks
from greentrain.estimate.efficiency import efficiency_for, framework_names
from greentrain.estimate.step import estimate_step
from greentrain.estimate.vector import estimate_steps
from greentrain.hardware.catalog import get_chip
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.space import SearchSpace, table
from greentrain.workload import FP8_RECIPES, Workload


def _sc(chip: str = "h100-sxm", recipe: str = "", model: str = "llama3-8b") -> Scenario:
    return scenario_from_dict({"model": model, "cluster": {"chip": chip, "num_chips": 8},
                               "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 10,
                                            "precision": "fp8", **({"fp8_recipe": recipe} if recipe else {})}})


STRATEGY = Strategy(dp=2, tp=4, sp=True, zero=1, micro_batch_size=1)


def _step_s(sc: Scenario, framework: str = "megatron") -> float:
    return estimate_step(sc, STRATEGY, eff=efficiency_for(sc.cluster.chip.name, framework)).step_time_s


def test_the_yaml_prices_every_recipe_a_workload_may_name() -> None:
    assert fp8.recipe_names() == FP8_RECIPES
    defaults = {efficiency_for("", f).fp8_recipe for f in framework_names()}  # each framework record's knob
    assert defaults <= set(FP8_RECIPES) - {"mxfp8"}  # a framework's default runs on every fp8 chip
    assert "framework_recipes" not in fp8._data() and "saves_fp8_inputs" not in fp8._data()  # one record each
    assert all(get_chip(c).peak_fp8_flop_per_s > 0 for c in fp8.mxfp8_chips())


def test_a_run_recipe_beats_its_framework_default() -> None:
    assert fp8.recipe_for("fp8", "", "megatron", "h100-sxm") == "delayed"  # Megatron-LM --fp8-recipe default
    assert fp8.recipe_for("fp8", "", "nemo", "h100-sxm") == "tensorwise"  # Megatron-Bridge fp8-cs recipes
    assert fp8.recipe_for("fp8", "", "torchtitan", "h100-sxm") == "tensorwise"  # torchao's default
    assert fp8.recipe_for("fp8", "", "ddp", "h100-sxm") == fp8.DEFAULT_RECIPE  # no default of its own
    assert fp8.recipe_for("fp8", "rowwise", "megatron", "h100-sxm") == "rowwise"
    assert fp8.recipe_for("bf16", "", "megatron", "h100-sxm") == ""


def test_a_bad_framework_recipe_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"efficiency.fp8_recipe='blockwise': must be one of tensorwise"):
        dataclasses.replace(efficiency_for("h100-sxm", "megatron"), fp8_recipe="blockwise")


def test_mxfp8_needs_blackwell() -> None:
    assert fp8.check_chip("mxfp8", "b200") == "mxfp8"
    with pytest.raises(ConfigError) as e:
        fp8.check_chip("mxfp8", "h100-sxm")
    assert e.value.field == "fp8_recipe" and "b200" in str(e.value) and "h100-sxm" in str(e.value)
    with pytest.raises(ConfigError, match="needs a chip with MXFP8"):
        _step_s(_sc("h200", "mxfp8"))  # an estimate refuses it too (a scenario file, the Python API)
    with pytest.raises(ConfigError, match="tensorwise, delayed, rowwise, mxfp8"):
        fp8.recipe("per-block")


def test_workload_field_rules() -> None:
    with pytest.raises(ConfigError, match="applies to precision fp8 only"):
        Workload(global_batch_size=8, seq_len=128, precision="bf16", fp8_recipe="delayed")
    with pytest.raises(ConfigError, match="must be one of tensorwise"):
        Workload(global_batch_size=8, seq_len=128, precision="fp8", fp8_recipe="fp8-cs")
    w = Workload(global_batch_size=8, seq_len=128, precision="fp8", fp8_recipe="rowwise")
    assert Workload.from_dict(w.to_dict()) == w
    assert "fp8_recipe" not in dataclasses.replace(w, fp8_recipe="").to_dict()  # files stay as they were


def test_rowwise_gemms_run_slower_than_tensorwise() -> None:
    chip = get_chip("h200")
    tw, rw = compute_peaks(chip, "fp8", "tensorwise"), compute_peaks(chip, "fp8", "rowwise")
    assert rw.matmul == pytest.approx(tw.matmul * fp8.recipe("rowwise").gemm_factor)
    assert 0.92 <= fp8.recipe("rowwise").gemm_factor <= 0.99  # 1-8 % slower (BENCHMARKS.md Session 8)
    assert rw.cast_bytes_per_elt > tw.cast_bytes_per_elt and rw.attention == tw.attention


def test_recipes_order_the_step_as_their_quantize_work() -> None:
    """Delayed scaling casts in one pass (no amax pass): fastest; rowwise reads twice per copy and its GEMMs
    apply per-row scales: slowest; the framework's default is what an empty recipe runs."""
    h100 = {r: _step_s(_sc("h100-sxm", r)) for r in ("delayed", "tensorwise", "rowwise")}
    assert h100["delayed"] < h100["tensorwise"] < h100["rowwise"]
    assert _step_s(_sc("h100-sxm")) == pytest.approx(h100["delayed"])  # megatron's own
    assert _step_s(_sc("h100-sxm"), "nemo") == pytest.approx(_step_s(_sc("h100-sxm", "tensorwise"), "nemo"))
    b200 = {r: _step_s(_sc("b200", r)) for r in ("delayed", "mxfp8", "tensorwise")}
    assert b200["delayed"] < b200["mxfp8"] < b200["tensorwise"]  # one pass, 1/32 more bytes of scales


@pytest.mark.parametrize("recipe", ["delayed", "rowwise"])
def test_the_search_prices_the_recipe_as_estimate_step(recipe: str) -> None:
    sc = _sc("h100-sxm", recipe, model="llama3.2-1b")
    eff = efficiency_for("h100-sxm", "nemo")
    rows = table(sc, SearchSpace(max_micro_batch=2))
    est = estimate_steps(sc, rows, eff=eff)
    assert len(est.index) >= 3
    for j, i in enumerate(est.index[:5]):
        assert est.step_time_s[j] == pytest.approx(estimate_step(sc, rows.row(int(i)), eff=eff).step_time_s,
                                                   rel=1e-12)
    other = estimate_steps(_sc("h100-sxm", "tensorwise", model="llama3.2-1b"), rows, eff=eff)
    assert list(other.index) == list(est.index)
    # delayed is never slower than tensorwise, rowwise never faster (equal where the host's launches bound a step)
    lo, hi = (est, other) if recipe == "delayed" else (other, est)
    assert (lo.step_time_s <= hi.step_time_s * (1 + 1e-12)).all() and (lo.step_time_s < hi.step_time_s).mean() > 0.5
