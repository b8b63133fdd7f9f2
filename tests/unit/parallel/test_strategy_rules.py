"""Strategy owns its rules: the schedule/vpp rule holds from Python as from YAML and the command line."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.parallel.strategy import Strategy


def test_interleaved_without_model_chunks_is_refused_from_python() -> None:
    with pytest.raises(ConfigError, match=r"strategy.schedule='interleaved': needs strategy.vpp > 1"):
        Strategy(pp=2, vpp=1, schedule="interleaved")


def test_vpp_with_another_schedule_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"conflicts with strategy\.vpp=2"):
        Strategy(pp=2, vpp=2, schedule="1f1b")


def test_the_schedule_follows_vpp_when_not_given() -> None:
    assert Strategy(pp=2, vpp=2).schedule == "interleaved"
    assert Strategy(pp=2).schedule == "1f1b"
