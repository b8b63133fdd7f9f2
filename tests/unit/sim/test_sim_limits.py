"""Inputs that would make the step simulation run without end get a one-line error instead."""

from __future__ import annotations

import pytest

from greentrain.cli.main import main


def test_tiny_buckets_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "step", "--pp", "4", "--tp", "8", "--dp", "2", "--bucket-mb", "0.0001"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--bucket-mb=0.0001" in err and "at most 10,000" in err
