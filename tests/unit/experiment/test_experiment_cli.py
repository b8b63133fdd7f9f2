"""Bad input to `greentrain experiment`: one line naming field, value and rule, exit 2, nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.experiment.data import read_pairs, synthetic_news


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_unknown_key_is_refused_with_did_you_mean(tmp_path: Path, make_experiment: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    exp = make_experiment(tmp_path / "e.yaml", trian={"max_steps": 3})
    rc, _, err = run_cli(["experiment", "run", str(exp), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "trian" in one_line(err) and "did you mean train" in err
    assert not (tmp_path / "o").exists()


def test_a_plan_over_budget_is_refused_unless_allowed(tmp_path: Path, make_experiment: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    exp = make_experiment(tmp_path / "e.yaml", site={"chip": "a100-80gb", "grid_g_co2e_per_kwh": 300,
                                                     "usd_per_hour": 4.0}, budget={"max_usd": 1e-9})
    rc, _, err = run_cli(["experiment", "run", str(exp), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "budget.max_usd" in one_line(err) and "over budget" in err
    assert not (tmp_path / "o").exists()
    rc, out, _ = run_cli(["experiment", "plan", str(exp), "--json"], capsys)
    plan = json.loads(out)
    assert rc == 0 and plan["over_budget"] and plan["cost_usd"] > 0
    assert plan["cost_usd"] == pytest.approx(sum(v["cost_usd"] for v in plan["variants"]))


def test_a_data_file_with_a_missing_column(tmp_path: Path, make_experiment: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"source": s, "summary": t}) + "\n"
                            for s, t in zip(*(lambda p: (p.sources, p.targets))(synthetic_news(300, 0)), strict=True)))
    exp = make_experiment(tmp_path / "e.yaml", data={"source": "file", "path": str(data), "train_size": 100,
                                                     "eval_size": 10, "test_size": 10})
    rc, _, err = run_cli(["experiment", "plan", str(exp)], capsys)
    assert rc == 2 and "data.target_column='target'" in one_line(err) and "column missing" in err
    assert len(read_pairs(data, "source", "summary")) == 300


def test_a_missing_extra_names_it(tmp_path: Path, make_experiment: Any, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "rouge_score", None)
    exp = make_experiment(tmp_path / "e.yaml")
    rc, _, err = run_cli(["experiment", "run", str(exp), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "rouge_score" in one_line(err) and "greentrain[experiment]" in err
    assert not (tmp_path / "o").exists()


def test_a_training_argument_the_installed_transformers_does_not_know(make_experiment: Any) -> None:
    pytest.importorskip("transformers")
    import dataclasses

    from greentrain.errors import ConfigError
    from greentrain.experiment.build import check_training_args
    from greentrain.experiment.spec import experiment_from_dict

    job = experiment_from_dict(make_experiment()).variants[0].job
    args = {**job.train.args, "no_such_argument": 0.1}
    bad = dataclasses.replace(job, train=dataclasses.replace(job.train, args=args))
    with pytest.raises(ConfigError, match=r"train\.no_such_argument=0\.1: not a training argument of the installed"):
        check_training_args(bad)
    check_training_args(job)


def test_status_of_a_folder_that_is_not_an_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["experiment", "status", str(tmp_path)], capsys)
    assert rc == 2 and "no experiment.json" in one_line(err)
