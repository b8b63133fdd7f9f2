"""Optuna pruning of a search (#26 item 4): the pruner refused in one line where Optuna cannot prune, a hopeless
trial stopped at its first evaluation and told PRUNED with what it measured, and its energy in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.experiment.results import VariantResult
from greentrain.experiment.spec import experiment_from_dict

EVALS = {"eval_steps": 2, "patience": 100}  # evaluations inside training, never stopping early by themselves


def pruned_search(make: Any, path: Path | None = None, **search: Any) -> Any:
    return make(path, model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                                                       "num_heads": 4}},
                data={"train_size": 32, "eval_size": 4, "test_size": 4, "max_source_tokens": 16,
                      "max_target_tokens": 4},
                train={"max_steps": 6, "per_device_train_batch_size": 4, "learning_rate": 1.0e-2},
                early_stopping=EVALS,
                search={"trials": 2, "sampler": "random", "objectives": {"eval_loss": "min"},
                        "space": {"train.learning_rate": [1.0e-2, 1.0e-7]},
                        "pruner": {"type": "median", "startup_trials": 1}, **search})


@pytest.mark.parametrize(("change", "match"), [
    ({"objectives": {"eval_loss": "min", "emissions_kg_co2e": "min"}},
     r"search\.pruner='median': prunes single-objective searches only .*not eval_loss, emissions_kg_co2e"),
    ({"objectives": {"rouge1": "max"}}, r"needs an objective measured during training: eval_loss or perplexity"),
    ({"pruner": "patient"}, r"search\.pruner='patient': must be one of none, median, hyperband"),
    ({"pruner": {"type": "hyperband", "startup_trials": 2}}, r"search\.pruner\.startup_trials=2: unknown key"),
    ({"pruner": {"type": "median", "warmup_steps": -1}}, r"search\.pruner\.warmup_steps=-1"),
    ({"timeout_s": 0}, r"search\.timeout_s=0"),
])
def test_the_pruner_is_refused_where_optuna_cannot_prune(make_experiment: Any, change: dict[str, Any],
                                                         match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        experiment_from_dict(pruned_search(make_experiment, **change))


def test_a_pruner_needs_evaluations_inside_training(make_experiment: Any) -> None:
    data = pruned_search(make_experiment)
    data["early_stopping"] = None
    with pytest.raises(ConfigError, match=r"needs evaluations inside training.*early_stopping section"):
        experiment_from_dict(data)


def test_hyperband_takes_its_resources_from_the_job(make_experiment: Any) -> None:
    optuna = pytest.importorskip("optuna")
    from greentrain.experiment.pruning import make_pruner

    exp = experiment_from_dict(pruned_search(make_experiment, pruner="hyperband"))
    assert exp.search is not None
    p = exp.search.pruner
    assert (p.kind, p.min_resource, p.max_resource, p.reduction_factor) == ("hyperband", 2, 6, 3)
    assert isinstance(make_pruner(optuna, p), optuna.pruners.HyperbandPruner)
    assert isinstance(make_pruner(optuna, exp.search.pruner.__class__()), optuna.pruners.NopPruner)


def test_the_pruner_flag_needs_a_search(tmp_path: Path, make_experiment: Any,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = make_experiment(tmp_path / "e.yaml")
    assert main(["experiment", "run", str(path), "--pruner", "median", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--pruner='median': applies to a search" in err
    assert not (tmp_path / "o").exists()


def test_the_finding_counts_what_pruned_trials_used_and_spared() -> None:
    from greentrain.experiment.pruning import pruning_finding

    ok = VariantResult(variant_id="base", config_hash="a", status="ok", num_steps=6, energy_j=60.0)
    pruned = VariantResult(variant_id="lr=1e-07", config_hash="b", status="pruned", num_steps=2, energy_j=30.0,
                           train_energy_j=20.0, emissions_kg_co2e=0.002)
    (f,) = pruning_finding([ok, pruned], {"base": 6, "lr=1e-07": 6})
    nums = dict(f.numbers)
    assert f.kind == "F12" and f.variants == ("lr=1e-07",) and "1 of 2 trial(s) pruned" in f.text
    assert nums["pruned_energy_j"] == 30.0 and nums["avoided_energy_j"] == pytest.approx(40.0)  # 4 steps x 10 J
    assert nums["pruned_g_co2e"] == pytest.approx(2.0)
    assert pruning_finding([ok], {"base": 6}) == []


@pytest.mark.slow
def test_a_hopeless_trial_is_pruned_at_its_first_evaluation(tmp_path: Path, make_experiment: Any) -> None:
    optuna = pytest.importorskip("optuna", reason="the search extra (optuna) is not installed")
    pytest.importorskip("transformers")
    from greentrain.experiment.report import build_report
    from greentrain.experiment.runner import RunOptions
    from greentrain.experiment.search import VARIANT_ATTR, _study, run_search

    out = tmp_path / "out"
    out.mkdir()
    exp = experiment_from_dict(pruned_search(make_experiment))
    study = _study(optuna, out, exp)
    study.enqueue_trial({"train.learning_rate": 1.0e-2})  # the base runs to the end (the pruner's startup trial)
    study.enqueue_trial({"train.learning_rate": 1.0e-7})  # learns nothing: worse than the base at step 2
    results = {r.variant_id: r for r in run_search(exp, RunOptions(out_dir=out, isolation="inline"))}
    bad = results["learning_rate=1e-07"]
    assert results["base"].status == "ok" and results["base"].num_steps == 6
    assert bad.status == "pruned" and bad.num_steps == 2 and "median pruner at step 2" in bad.reason
    assert bad.energy_j > 0 and bad.emissions_kg_co2e is not None and bad.rouge1 is None  # no generation
    trials = _study(optuna, out, exp).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]
    t = trials[1]
    assert t.user_attrs[VARIANT_ATTR] == bad.variant_id and t.user_attrs["energy_j"] == bad.energy_j
    assert set(t.intermediate_values) == {2} and t.values == [t.intermediate_values[2]]  # Optuna keeps the last
    assert set(trials[0].intermediate_values) == {2, 4, 6}
    rep = build_report(out, [])
    assert any(f.kind == "F12" and bad.variant_id in f.variants for f in rep.findings)
    before = (out / "variants" / bad.variant_id / "result.json").stat().st_mtime_ns
    run_search(exp, RunOptions(out_dir=out, isolation="inline"))  # resumed: the pruned trial is not run again
    assert (out / "variants" / bad.variant_id / "result.json").stat().st_mtime_ns == before
