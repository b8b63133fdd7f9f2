"""Optuna search (the ``search`` extra): the section checked without optuna; with it, trials run as variants,
base first, the Pareto set equals Optuna's best trials, a rerun runs nothing again, more trials continue the
study, and a trial a killed runner left running is failed and re-run under the same variant."""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.experiment.spec import experiment_from_dict

SPACE = {"train.learning_rate": {"low": 1.0e-3, "high": 1.0e-2, "log": True},
         "train.optim": ["adamw_torch", "adafactor"]}


def tiny(make: Any, path: Path | None = None, **search: Any) -> Any:
    return make(path, model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                                                       "num_heads": 4}},
                data={"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24,
                      "max_target_tokens": 8},
                train={"max_steps": 4, "per_device_train_batch_size": 8, "learning_rate": 3.0e-3},
                search={"trials": 3, "space": SPACE, **search})


@pytest.mark.parametrize(("search", "match"), [
    ({"objectives": {"rouge_1": "max"}}, r"search\.objectives='rouge_1': unknown objective .*did you mean rouge1"),
    ({"objectives": {"rouge1": "up"}}, r"search\.objectives\.rouge1='up': must be max or min"),
    ({"space": {}}, r"search\.space=\{\}: must be a non-empty mapping"),
    ({"space": {"train.learnin_rate": [0.1]}}, r"train\.learnin_rate=0\.1: unknown training argument; did you mean"),
    ({"space": {"train.optim": []}}, r"search\.space\.train\.optim=\[\]: is empty"),
    ({"space": {"train.learning_rate": {"low": 0.1, "high": 0.01}}}, r"high=0\.01: must be above low"),
    ({"space": {"train.precision": ["fp32", "fp8"]}}, r"train\.precision='fp8': must be one of"),
    ({"sampler": "grid"}, r"search\.sampler='grid': must be one of nsga2, tpe, random"),
])
def test_the_search_section_is_checked_without_optuna(make_experiment: Any, search: dict[str, Any],
                                                      match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        experiment_from_dict(tiny(make_experiment, **search))


def test_a_search_replaces_axes(make_experiment: Any) -> None:
    data = tiny(make_experiment)
    data["axes"] = {"train.optim": ["adafactor"]}
    with pytest.raises(ConfigError, match=r"search='axes': a search replaces axes and repeats"):
        experiment_from_dict(data)


def test_a_missing_optuna_names_the_extra(tmp_path: Path, make_experiment: Any, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)
    exp = tiny(make_experiment, tmp_path / "e.yaml")
    assert main(["experiment", "run", str(exp), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'greentrain[search]'" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def study_of(out: Path, exp: Any) -> Any:
    optuna = pytest.importorskip("optuna")
    from greentrain.experiment.search import _study

    return _study(optuna, out, exp)


def mtimes(out: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (out / "variants").glob("*/result.json")}


@pytest.mark.slow
def test_trials_run_as_variants_and_resume(tmp_path: Path, make_experiment: Any) -> None:
    optuna = pytest.importorskip("optuna", reason="the search extra (optuna) is not installed")
    pytest.importorskip("transformers")
    from greentrain.experiment.report import build_report
    from greentrain.experiment.runner import RunOptions
    from greentrain.experiment.search import VARIANT_ATTR, run_search, told

    out = tmp_path / "out"
    exp = experiment_from_dict(tiny(make_experiment))
    opts = RunOptions(out_dir=out, isolation="inline")
    results = run_search(exp, opts)
    study = study_of(out, exp)
    assert len(told(study)) == 3 and study.trials[0].user_attrs[VARIANT_ATTR] == "base"
    assert results[0].variant_id == "base" and all(r.status == "ok" for r in results)
    # the Pareto set (ROUGE-1 up, CO2e and $ down) equals Optuna's best trials over the same objectives
    rep = build_report(out, [])
    assert set(rep.pareto) == {t.user_attrs[VARIANT_ATTR] for t in study.best_trials}
    before = mtimes(out)
    run_search(exp, opts)  # nothing left to do
    assert mtimes(out) == before and len(told(study_of(out, exp))) == 3
    # a runner killed during a trial: the trial stays RUNNING and its folder holds a partial record
    study.enqueue_trial({"train.learning_rate": 0.005, "train.optim": "adafactor"})
    killed = study.ask()
    killed.suggest_float("train.learning_rate", 1e-3, 1e-2, log=True)
    killed.suggest_categorical("train.optim", ["adamw_torch", "adafactor"])
    folder = out / "variants" / "learning_rate=0.005+optim=adafactor"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text("")
    more = experiment_from_dict(tiny(make_experiment, trials=4))  # one more trial: the same study goes on
    run_search(more, opts)
    study = study_of(out, more)
    assert study.trials[killed.number].state == optuna.trial.TrialState.FAIL
    assert len(told(study)) == 4 and told(study)[-1].user_attrs[VARIANT_ATTR] == folder.name
    assert {k: v for k, v in mtimes(out).items() if k in before} == before  # finished trials were not re-run
    with (out / "attempts.csv").open() as f:
        assert [(r["variant_id"], r["status"]) for r in csv.DictReader(f)] == [(folder.name, "killed")]
    assert os.path.isfile(folder / "result.json")


def test_a_search_is_planned_as_its_base_times_its_trials(make_experiment: Any) -> None:
    from greentrain.experiment.plan import plan_experiment

    data = tiny(make_experiment, trials=5)
    data["site"] = {"chip": "a100-80gb", "grid_g_co2e_per_kwh": 300.0, "usd_per_hour": 4.0}
    plan = plan_experiment(experiment_from_dict(data))
    (row,) = plan.rows
    assert row.variant_id == "base" and plan.search_trials == 5
    assert plan.cost_usd == pytest.approx(5 * (row.prediction.cost_usd or 0.0))
    assert plan.energy_j == pytest.approx(5 * (row.prediction.energy_j or 0.0))
