"""An experiment process greentrain owns (`experiment run`, a Ray worker) freezes its imports once before its
first variant (worker.py _freeze_imports: the Trainer's end-of-training gc.collect() then skips torch's and
transformers' objects); a caller's own process, running variants through the Python API, is left alone."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("torch")

from greentrain.experiment import ranks, worker


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The gc calls _freeze_imports makes, recorded instead of made (a test must not freeze pytest's process)."""
    made: list[str] = []
    monkeypatch.setattr(ranks, "PROCESS", {"owned": False, "frozen": False})
    monkeypatch.setattr(gc, "collect", lambda *a: made.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: made.append("freeze"))
    return made


def test_a_process_greentrain_does_not_own_is_not_frozen(calls: list[str]) -> None:
    worker._freeze_imports()
    assert calls == [] and ranks.PROCESS == {"owned": False, "frozen": False}


def test_an_owned_process_collects_then_freezes_once(calls: list[str]) -> None:
    ranks.own_process()
    worker._freeze_imports()
    worker._freeze_imports()  # the second variant: nothing more
    assert calls == ["collect", "freeze"] and ranks.PROCESS == {"owned": True, "frozen": True}


def test_the_ray_task_owns_its_worker_and_the_api_does_not(calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray worker runs greentrain's tasks one after another; variant_task (the Slurm array's job, and the Python
    API's path through submitit's debug cluster, which runs in the caller's process) does not claim the process."""
    from greentrain.experiment import cluster

    seen: list[bool] = []
    monkeypatch.setattr(cluster, "variant_task", lambda *a, **k: seen.append(ranks.PROCESS["owned"]))
    monkeypatch.setattr(cluster, "ray_task_env", lambda: ())
    cluster.ray_variant_task("out", None, "v", "inline", 0)  # type: ignore[arg-type]
    assert seen == [True]
