"""The Tracker on torch.compile'd models: its FLOP counter (a TorchDispatchMode) active in a compiled module's
first call makes dynamo run that module eagerly for good, which on an H200 took a compiled Llama 3.2 1B step
from 0.276 s back to the eager 0.321 s (BENCHMARKS.md, 2026-11-26). A compiled model keeps running its compiled
code under the hooks, and the measurement says why it has no FLOPs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from greentrain.measure.hooks import COMPILED_NOTE, ModuleHooks, select_modules  # noqa: E402
from greentrain.measure.tracker import Tracker  # noqa: E402


def _counting_backend() -> tuple[Any, dict[str, int]]:
    """A torch.compile backend that runs the captured graph as is and counts its runs."""
    runs = {"n": 0}

    def backend(gm: Any, example_inputs: Any) -> Any:
        def run(*args: Any) -> Any:
            runs["n"] += 1
            return gm(*args)
        return run

    return backend, runs


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))


def test_a_compiled_model_keeps_its_compiled_code_under_the_tracker(tmp_path: Path) -> None:
    backend, runs = _counting_backend()
    model = torch.compile(_mlp(), backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16)
    with Tracker(model, out_dir=tmp_path, print_summary=False, meters=False) as t:
        for _ in range(4):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            t.step()
    assert runs["n"] == 4  # every step ran the compiled graph (under a FLOP counter it would stay at 0)
    m = t.measurement
    assert m is not None and m.num_steps == 4 and m.flop == 0
    assert COMPILED_NOTE in m.notes


def test_nothing_inside_a_compiled_module_is_hooked() -> None:
    backend, _ = _counting_backend()
    outer = nn.Sequential(nn.Linear(16, 16), torch.compile(_mlp(), backend=backend), nn.Linear(16, 16))
    names = [n for n, _ in select_modules(outer, None)]
    assert names == ["0", "1", "2"]  # the compiled block's wrapper, not its Linear layers
    in_place = _mlp()
    in_place[2].compile(backend=backend)
    assert [n for n, _ in select_modules(in_place, None)] == ["0", "1"]
    hooks = ModuleHooks(outer, depth=None)
    assert hooks.compiled and not hooks.count_flops and hooks.flop_note == COMPILED_NOTE
    hooks.remove()
    plain = ModuleHooks(_mlp(), depth=None)
    assert not plain.compiled and plain.count_flops and plain.flop_note == ""
    plain.remove()
