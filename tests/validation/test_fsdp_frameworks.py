"""FSDP frameworks on A100 80GB through `greentrain validate`, each row with its own framework profile
(shared/reference/calibration: llm-foundry's published throughput table, 61 runs, and torchtitan's first A100
tables, 8 runs). Measured 2026-11-25 with the per-kernel fixed costs (docs/validation.md): llm-foundry mean
|throughput error| 5.6 % (bias -0.4 %), no run that ran refused; torchtitan 3.1 % (bias +0.1 %). The issue's goals
are <= 10 % and no refusal; the tolerances below (about 1.5 points above today) catch regressions. The files live
outside the repository: the tests skip without them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.calibrate.validate import Summary, validate
from greentrain.estimate.efficiency import framework_names

SHARED = Path(__file__).parents[2].parent / "shared" / "reference" / "calibration"
pytestmark = pytest.mark.slow


def _summary(name: str) -> Summary:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"{path} not present (shared reference data)")
    runs = read_runs(path, frameworks=framework_names())
    _, s = validate(runs)
    return s


def test_llmfoundry_a100() -> None:
    s = _summary("llmfoundry-a100-80gb.csv")
    assert s.num_scored == 61
    assert s.throughput_error_mean is not None and s.throughput_error_mean <= 0.07
    assert s.throughput_error_bias is not None and abs(s.throughput_error_bias) <= 0.03
    assert s.runs_refused == 0  # the fused cross-entropy keeps no fp32 logits: every run that ran fits


def test_torchtitan_a100() -> None:
    s = _summary("torchtitan-a100-2404.csv")
    assert s.num_scored == 8
    assert s.throughput_error_mean is not None and s.throughput_error_mean <= 0.045
    assert s.runs_refused == 0
