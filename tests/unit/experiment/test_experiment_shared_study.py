"""One Optuna study, several runners (issue 27 item 3): two runners on one SQLite study (``--storage``) tell
exactly N trials between them, each variant run once; a storage that cannot be opened is one line. The runners
run their trials inline (the study's bookkeeping is the runners', not the worker processes')."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main

pytest.importorskip("optuna", reason="the search extra (optuna) is not installed")

SPACE = {"train.learning_rate": {"low": 1.0e-3, "high": 1.0e-2, "log": True},
         "train.optim": ["adamw_torch", "adafactor"]}


def tiny(make: Any, path: Path, trials: int) -> Path:
    return make(path, model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                                                       "num_heads": 4}},
                data={"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24,
                      "max_target_tokens": 8},
                train={"max_steps": 4, "per_device_train_batch_size": 8, "learning_rate": 3.0e-3},
                search={"trials": trials, "space": SPACE, "sampler": "random"})


def test_an_unusable_storage_is_one_line(tmp_path: Path, make_experiment: Any,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    exp = tiny(make_experiment, tmp_path / "e.yaml", 2)
    assert main(["experiment", "run", str(exp), "--out", str(tmp_path / "o"), "--storage", "nosuchdb://x/y"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--storage='nosuchdb://x/y': cannot be opened as an Optuna storage" in err
    assert not (tmp_path / "o" / "variants").exists()
    # refused by the flag's check, before any worker; a storage given by the API is refused as it is opened
    import optuna

    from greentrain.errors import ConfigError
    from greentrain.experiment.pruning import open_storage

    with pytest.raises(ConfigError, match="cannot be opened as an Optuna storage: NoSuchModuleError") as e:
        open_storage(optuna, "nosuchdb://x/y")
    assert e.value.field == "storage"


@pytest.mark.slow
def test_two_runners_on_one_sqlite_study_tell_n_trials_without_overlap(tmp_path: Path, make_experiment: Any,
                                                                       wait_for: Any) -> None:
    """A runner process, joined once it trains by a second runner: this test's process (torch imported once)."""
    pytest.importorskip("transformers")
    import optuna

    from greentrain.experiment.search import RUNNER_ATTR, VARIANT_ATTR, _study, told
    from greentrain.experiment.spec import load_experiment

    exp = tiny(make_experiment, tmp_path / "e.yaml", 4)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    out = tmp_path / "out"
    args = ["experiment", "run", str(exp), "--out", str(out), "--no-plot", "--storage", url, "--isolation", "inline"]
    other = subprocess.Popen([sys.executable, "-m", "greentrain.cli.main", *args], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(out.glob("variants/*/train.jsonl")), 240, "the other runner to train")
        assert main(args) == 0
    finally:
        _, err = other.communicate(timeout=600)
    assert other.returncode == 0, err
    study = _study(optuna, out, load_experiment(exp), optuna.storages.RDBStorage(url))
    done = told(study)
    assert len(done) == 4 and len({t.number for t in done}) == 4
    assert all(t.user_attrs.get(RUNNER_ATTR) for t in done)
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING))
    variants = {t.user_attrs[VARIANT_ATTR] for t in done}
    results = sorted(p.parent.name for p in (out / "variants").glob("*/result.json"))
    assert results == sorted(variants) and "base" in variants
    assert not (out / "attempts.csv").exists()  # no variant ran twice (two trials on one variant share it)


@pytest.mark.parametrize(("url", "named"), [
    ("sqlite://", "in-memory"), ("sqlite:///:memory:", "in-memory"), ("journal:", "names no file"),
    ("journal:{d}/no/such/j.log", "not an existing folder"), ("sqlite:///{d}/no/x.db", "not an existing folder"),
    ("sqlite:///{d}", "is a folder"), ("s.db", "SQLAlchemy URL")])
def test_a_storage_is_checked_before_any_work(tmp_path: Path, url: str, named: str) -> None:
    """A missing journal folder was exit 1 (``No such file or directory``) after Optuna and torch had loaded; an
    in-memory SQLite study is seen by no worker."""
    from greentrain.errors import ConfigError
    from greentrain.experiment.pruning import check_storage

    with pytest.raises(ConfigError, match=named) as e:
        check_storage(url.replace("{d}", str(tmp_path)))
    assert e.value.field == "--storage"


def test_a_relative_storage_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker opens the same file, whatever its working directory."""
    from greentrain.experiment.search import _url

    monkeypatch.chdir(tmp_path)
    assert _url(tmp_path, "sqlite:///s.db") == f"sqlite:///{tmp_path / 's.db'}"
    assert _url(tmp_path, "journal:j.log") == f"journal:{tmp_path / 'j.log'}"
    assert _url(tmp_path, "postgresql://host/db") == "postgresql://host/db"
