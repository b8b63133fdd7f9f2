"""MLflow (the ``mlflow`` extra): one run per finished variant in a SQLite store under the experiment folder,
none twice when ``report --mlflow`` runs again; without mlflow, one line naming the extra."""

from __future__ import annotations

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


def test_one_run_per_variant_and_no_duplicates(tmp_path: Path, make_folder: Any,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    from mlflow.tracking import MlflowClient

    from greentrain.experiment.tracking import tracking_uri

    out = tmp_path / "out"
    make_folder(out)  # base and fast are ok; later and stale are pending (never logged)
    for expected in ("2 run(s) logged, 0 already there", "0 run(s) logged, 2 already there"):
        assert main(["experiment", "report", str(out), "--mlflow"]) == 0
        assert expected in capsys.readouterr().err
    assert (out / "mlflow.db").is_file()
    client = MlflowClient(tracking_uri=tracking_uri(out, True))
    runs = client.search_runs([client.get_experiment_by_name("hand").experiment_id])
    assert sorted(r.data.tags["greentrain.variant_id"] for r in runs) == ["base", "fast"]
    base = next(r for r in runs if r.info.run_name == "base")
    assert base.data.metrics["energy_j"] == 3.6e3 and base.data.metrics["rouge1"] == 40.0
    assert base.data.tags["greentrain.config_hash"] == "h1" and base.info.status == "FINISHED"
