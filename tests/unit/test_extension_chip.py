"""Issue 25 item 5: a new chip is one entry in hardware/catalog/chips.yaml, plus an optional entry of its kernels'
efficiency in estimate/efficiency.yaml (docs/extending.md).

A fake chip, "toy-a100", is a copy of the A100 80GB under another name (the catalog's data replaced for one
test); nothing else is edited. With its catalog entry alone, plan and the catalog use it, at the default kernel
efficiency; with a copy of the A100's efficiency entry too, its figures are the A100's to the last digit.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.estimate import efficiency
from greentrain.hardware import catalog

PLAN = ["plan", "--model", "llama3.2-1b", "--num-chips", "8", "--tokens", "1e9", "--json"]


def _clear_caches() -> None:
    for fn in (catalog.chips, catalog._aliases, efficiency.efficiency_for):
        fn.cache_clear()


def _with_toy_chip(monkeypatch: pytest.MonkeyPatch, *, efficiency_entry: bool) -> None:
    real: Callable[[str], dict[str, Any]] = catalog._catalog_file

    def catalog_file(name: str) -> dict[str, Any]:
        data = copy.deepcopy(real(name))
        if name == "chips.yaml":
            data["toy-a100"] = {**data["a100-80gb"], "aliases": [], "sources": ["a test's copy of a100-80gb"]}
        return data

    monkeypatch.setattr(catalog, "_catalog_file", catalog_file)
    if efficiency_entry:
        eff = copy.deepcopy(efficiency._data())
        eff["chips"]["toy-a100"] = eff["chips"]["a100-80gb"]
        monkeypatch.setattr(efficiency, "_data", lambda: eff)
    _clear_caches()


@pytest.fixture
def clean_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield
    monkeypatch.undo()  # the real data back, then nothing cached from the fake chip outlives the test
    _clear_caches()


def _plan(chip: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*PLAN, "--chip", chip]) == 0
    return dict(json.loads(capsys.readouterr().out))


KEYS = ("step_time_s", "memory_bytes_per_device", "flop_per_step", "mfu", "run_time_s")


def test_one_catalog_entry_is_a_chip(monkeypatch: pytest.MonkeyPatch, clean_caches: None,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    _with_toy_chip(monkeypatch, efficiency_entry=False)
    a100, toy = _plan("a100-80gb", capsys), _plan("toy-a100", capsys)
    assert toy["chip"] == "toy-a100" and toy["flop_per_step"] == a100["flop_per_step"]
    assert a100["efficiency"]["chip_has_data"] and not toy["efficiency"]["chip_has_data"]  # chips.default's
    assert main(["catalog", "chips", "--json"]) == 0
    listed = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert listed["toy-a100"]["memory_bytes"] == listed["a100-80gb"]["memory_bytes"]


def test_with_its_efficiency_entry_it_is_the_chip_it_copies(monkeypatch: pytest.MonkeyPatch, clean_caches: None,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _with_toy_chip(monkeypatch, efficiency_entry=True)
    a100, toy = _plan("a100-80gb", capsys), _plan("toy-a100", capsys)
    for key in KEYS:
        assert toy[key] == a100[key], key
    assert toy["strategy"] == a100["strategy"]


def test_an_unknown_chip_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--chip", "toy-a100"]) == 2
    assert "chip='toy-a100': unknown chip" in capsys.readouterr().err
