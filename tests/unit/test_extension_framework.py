"""Issue 25 item 5: a new training framework is one entry under ``frameworks:`` in estimate/efficiency.yaml for
plan, search and the catalog (docs/extending.md; ``offload`` keeps its own FrameworkProfile, a known debt).

A fake framework, "toytorch", is added as one entry (the file's data, replaced for one test); nothing else is
edited. A copy of ddp's entry must give ddp's figures to the last digit, and the same entry with half the kernel
efficiency a slower step; the catalog lists it and an unknown name is still refused in one line.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.estimate import efficiency

PLAN = ["plan", "--model", "llama3.2-1b", "--chip", "a100-80gb", "--num-chips", "8", "--json"]


def _clear_caches() -> None:
    efficiency.framework_names.cache_clear()
    efficiency.efficiency_for.cache_clear()


@pytest.fixture
def toytorch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    data: dict[str, Any] = copy.deepcopy(efficiency._data())
    data["frameworks"]["toytorch"] = {**data["frameworks"]["ddp"], "source": "a test's copy of ddp"}
    data["frameworks"]["toytorch-slow"] = {**data["frameworks"]["toytorch"], "kernel_efficiency": 0.5 * float(
        data["frameworks"]["ddp"].get("kernel_efficiency", data["frameworks"]["default"]["kernel_efficiency"]))}
    monkeypatch.setattr(efficiency, "_data", lambda: data)
    _clear_caches()
    yield
    monkeypatch.undo()
    _clear_caches()  # nothing cached from the fake entry outlives the test


def _plan(framework: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*PLAN, "--framework", framework]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_plan_uses_the_new_framework_entry(toytorch: None, capsys: pytest.CaptureFixture[str]) -> None:
    ddp, toy, slow = _plan("ddp", capsys), _plan("toytorch", capsys), _plan("toytorch-slow", capsys)
    for key in ("step_time_s", "memory_bytes_per_device", "flop_per_step", "mfu"):
        assert toy[key] == ddp[key], key
    assert slow["step_time_s"] > 1.2 * toy["step_time_s"] and slow["flop_per_step"] == toy["flop_per_step"]


def test_search_and_catalog_see_the_new_framework(toytorch: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "frameworks", "--json"]) == 0
    listed = {f["name"]: f for f in json.loads(capsys.readouterr().out)}
    assert listed["toytorch"]["source"] == "a test's copy of ddp"
    best = {}
    for fw in ("ddp", "toytorch"):
        assert main(["search", "--model", "llama3.2-1b", "--chip", "a100-80gb", "--num-chips", "8",
                     "--framework", fw, "--top", "1", "--json"]) == 0
        best[fw] = json.loads(capsys.readouterr().out)["ranked"][0]
    assert best["toytorch"]["step_time_s"] == best["ddp"]["step_time_s"]
    assert best["toytorch"]["strategy"] == best["ddp"]["strategy"]


def test_an_unknown_framework_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--framework", "toytorch"]) == 2
    assert "framework='toytorch': is not a known framework" in capsys.readouterr().err
