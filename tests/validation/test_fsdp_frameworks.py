"""FSDP frameworks on A100 80GB through `greentrain validate`, each row with its own framework profile
(tests/data/calibration, copies of the shared reference files: llm-foundry's published throughput table, 61 runs,
and torchtitan's first A100 tables, 8 runs). Measured 2026-11-26 with the compute slowed beside the overlapped
FSDP collectives (docs/validation.md): llm-foundry mean |throughput error| 5.1 % (bias +0.2 %), no run that ran
refused; torchtitan 2.1 % (bias -0.8 %). The issue's goals are <= 10 % and no refusal; the tolerances below
(about 1.5 points above today) catch regressions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.calibrate.validate import Summary, validate
from greentrain.estimate.efficiency import framework_names

CALIBRATION = Path(__file__).parents[1] / "data" / "calibration"
pytestmark = pytest.mark.slow


def _summary(name: str) -> Summary:
    runs = read_runs(CALIBRATION / name, frameworks=framework_names())
    _, s = validate(runs)
    return s


def test_llmfoundry_a100() -> None:
    s = _summary("llmfoundry-a100-80gb.csv")
    assert s.num_scored == 61
    assert s.throughput_error_mean is not None and s.throughput_error_mean <= 0.065
    assert s.throughput_error_bias is not None and abs(s.throughput_error_bias) <= 0.03
    assert s.runs_refused == 0  # the fused cross-entropy keeps no fp32 logits: every run that ran fits


def test_torchtitan_a100() -> None:
    s = _summary("torchtitan-a100-2404.csv")
    assert s.num_scored == 8
    assert s.throughput_error_mean is not None and s.throughput_error_mean <= 0.035
    assert s.runs_refused == 0


def test_llmfoundry_a100_collective_heavy_rows() -> None:
    """The rows whose FSDP collectives are longest against their compute (13B at 2 x 2,048 tokens per micro-batch
    without checkpointing: all-gathers and reduce-scatter ~25 % of the compute; 70B on 32 GPUs at micro-batch 2:
    ~27 %) were predicted 13 % and 10 % too fast while the collectives were free once hidden; with the compute
    slowed beside them (estimate/step_terms.py overlap_cost_s) both are within 5 %."""
    runs = [r for r in read_runs(CALIBRATION / "llmfoundry-a100-80gb.csv", frameworks=framework_names())
            if r.run_id in ("llmf-a100-80gb-13b-s2048-n8-bf16", "llmf-a100-80gb-70b-s2048-n32-bf16")]
    preds, _ = validate(runs)
    assert len(preds) == 2
    for r, p in zip(runs, preds, strict=True):
        assert r.measured.tokens_per_s_per_chip and p.tokens_per_s_per_chip
        assert abs(p.tokens_per_s_per_chip / r.measured.tokens_per_s_per_chip - 1) <= 0.05, r.run_id
