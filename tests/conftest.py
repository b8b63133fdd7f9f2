"""Fixtures every test area shares: waiting for another process to get somewhere, and an MLflow SQLite store that
is ready at once (MLflow builds a new store by running its ~50 schema migrations, 2-15 s on a loaded disk; the
store is built once per test session and copied)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

WaitFor = Callable[[Callable[[], bool], float, str], None]
POLL_S = 0.05  # a condition on another process's files: re-read this often


def _wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(POLL_S)


@pytest.fixture(scope="session")
def wait_for() -> WaitFor:
    """``wait_for(cond, timeout_s, what)``: returns once ``cond()`` holds (checked every 50 ms); fails the test
    naming ``what`` after ``timeout_s`` (a generous bound for a hang, not a time the test expects)."""
    return _wait_for


@pytest.fixture(scope="session")
def _mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    import logging

    from mlflow.tracking import MlflowClient

    for name in ("mlflow", "alembic"):  # "Creating initial MLflow database tables..."
        logging.getLogger(name).setLevel(logging.WARNING)
    folder = tmp_path_factory.mktemp("mlflow-template")
    path = folder / "mlflow.db"
    cwd = os.getcwd()
    os.chdir(folder)  # the Default experiment's artifact root is ./mlruns of the cwd at creation
    try:
        MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()  # creates and migrates the store
    finally:
        os.chdir(cwd)
    return path


@pytest.fixture
def mlflow_store(_mlflow_template: Path) -> Callable[[Path], str]:
    """``mlflow_store(path)``: an empty MLflow SQLite store at ``path`` with its schema in place (what MLflow
    itself would create there); returns its tracking URI."""

    def make(path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_mlflow_template, path)
        return f"sqlite:///{path}"

    return make
