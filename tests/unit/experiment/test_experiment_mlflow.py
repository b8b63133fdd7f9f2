"""MLflow (the ``mlflow`` extra): one run per finished variant in a SQLite store under the experiment folder,
none twice when ``report --mlflow`` runs again; without mlflow, one line naming the extra."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # SQLAlchemy through MLflow


def test_a_missing_mlflow_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_folder: Any,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    make_folder(tmp_path / "out")
    monkeypatch.setitem(sys.modules, "mlflow", None)
    assert main(["experiment", "report", str(tmp_path / "out"), "--mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'greentrain[mlflow]'" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "report.md").exists()  # refused before any work


@pytest.mark.parametrize("scheme", ["bogus://", "file://"])
def test_an_unusable_tracking_uri_is_one_line(scheme: str, tmp_path: Path, make_folder: Any,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 24 (H4's adversarial set): mlflow's own exception for a bad scheme or a file store (mlflow 3
    refuses new ones) was a traceback."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = f"{scheme}{tmp_path}/mlruns"
    make_folder(tmp_path / "out")
    assert main(["experiment", "report", str(tmp_path / "out"), "--mlflow", uri]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tracking.mlflow" in err and uri in err


def test_one_run_per_variant_and_no_duplicates(tmp_path: Path, make_folder: Any, mlflow_store: Any,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from mlflow.tracking import MlflowClient

    from greentrain.experiment.tracking import tracking_uri

    out = tmp_path / "out"
    make_folder(out)  # base and fast are ok; later and stale are pending (never logged)
    mlflow_store(out / "mlflow.db")  # the schema MLflow would build at its first use (the store stays empty)
    for expected in ("2 run(s) logged, 0 already there", "0 run(s) logged, 2 already there"):
        assert main(["experiment", "report", str(out), "--mlflow"]) == 0
        assert expected in capsys.readouterr().err
    client = MlflowClient(tracking_uri=tracking_uri(out, True))  # the runs are in the folder's own store
    every = client.search_runs([client.get_experiment_by_name("hand").experiment_id])
    (parent,) = [r for r in every if "greentrain.parent" in r.data.tags]  # one per experiment, kept on rerun
    runs = [r for r in every if r is not parent]
    assert sorted(r.data.tags["greentrain.variant_id"] for r in runs) == ["base", "fast"]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in runs)
    assert parent.info.run_name == "hand" and parent.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"report.md", "results.csv"}
    base = next(r for r in runs if r.info.run_name == "base")
    assert base.data.metrics["energy_j"] == 3.6e3 and base.data.metrics["rouge1"] == 40.0
    assert base.data.tags["greentrain.config_hash"] == "h1" and base.info.status == "FINISHED"


@pytest.mark.slow
def test_child_runs_have_real_times_step_curves_and_env_settings(tmp_path: Path, make_folder: Any,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 mlflow_store: Any) -> None:
    """Issue 26 item 3: a variant's run spans its real start and end, carries the Trainer's step curves, and
    MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_NAME are honoured."""
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    import json

    from mlflow.tracking import MlflowClient

    from greentrain.experiment.results import read_result, write_result
    from greentrain.experiment.runner import variant_dir
    from greentrain.experiment.tracking import LOG_HISTORY, log_variants

    out = tmp_path / "out"
    make_folder(out)
    base = variant_dir(out, "base")
    write_result(base / "result.json", dataclasses.replace(read_result(base / "result.json"),
                                                           started_unix=1.7e9))
    (base / LOG_HISTORY).write_text(json.dumps([{"loss": 3.0 - s, "energy_kwh": 1e-5 * s, "step": s}
                                                for s in (2, 4, 6)]))
    uri = mlflow_store(tmp_path / "elsewhere.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team")
    monkeypatch.chdir(tmp_path)  # a user's own store keeps MLflow's default artifact root, ./mlruns of the cwd
    from greentrain.experiment.report import load_results

    _man, results = load_results(out)
    assert log_variants("hand", results, out, True) == (2, 0)
    assert not (out / "mlflow.db").exists()  # the environment's store, not the folder's
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("team").experiment_id])
    run = next(r for r in runs if r.info.run_name == "base")
    assert (run.info.start_time, run.info.end_time) == (1_700_000_000_000, 1_700_000_100_000)  # wall_s 100
    loss = client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in loss] == [(2, 1.0), (4, -1.0), (6, -3.0)]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"result.json", LOG_HISTORY}
