"""An experiment process greentrain owns freezes its imports once before its first variant (worker.py
_freeze_imports: the Trainer's end-of-training gc.collect() then skips torch's and transformers' objects); a
caller's own process, running variants through the Python API, is left alone."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("torch")

from greentrain.experiment import ranks, worker


def test_a_process_greentrain_does_not_own_is_not_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranks, "PROCESS", {"owned": False, "frozen": False})
    before = gc.get_freeze_count()
    worker._freeze_imports()
    assert gc.get_freeze_count() == before and ranks.PROCESS == {"owned": False, "frozen": False}


def test_an_owned_process_freezes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranks, "PROCESS", {"owned": False, "frozen": False})
    ranks.own_process()
    kept = [object()]  # alive at the freeze: in the permanent generation from then on
    before = gc.get_freeze_count()
    worker._freeze_imports()
    assert ranks.PROCESS == {"owned": True, "frozen": True} and gc.get_freeze_count() >= before + len(kept)
    after = gc.get_freeze_count()
    worker._freeze_imports()  # the second variant: nothing more is frozen
    assert gc.get_freeze_count() == after
