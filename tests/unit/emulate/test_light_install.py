"""Issue 16 item 12: without torch (the light install), `emulate` is one line naming the extra, exit 2."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from greentrain.cli.main import main


def test_emulate_without_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "torch" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert main(["emulate", "matmul", "--mesh", "1x2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'greentrain[torch]'" in err
