"""`greentrain compare` warns when the plan and the measurement cannot be the same job."""

from __future__ import annotations

from greentrain.report.compare import mismatch_warnings


def test_same_job_no_warning() -> None:
    pred = {"flop_per_step": 2.0e12, "tokens_per_step": 4096}
    meas = {"flop_per_step": 1.9e12, "tokens": 4096 * 10, "num_steps": 10}
    assert mismatch_warnings(pred, meas) == []


def test_different_jobs_are_named() -> None:
    pred = {"flop_per_step": 2.0e17, "tokens_per_step": 4_194_304}
    meas = {"flop_per_step": 7.7e7, "tokens": 320, "num_steps": 10}
    warnings = mismatch_warnings(pred, meas)
    assert len(warnings) == 2
    assert warnings[0].startswith("flop_per_step: predicted 2e+17, measured 7.7e+07")
    assert "tokens per step" in warnings[1] and "different jobs" in warnings[1]


def test_missing_figures_are_not_a_mismatch() -> None:
    assert mismatch_warnings({"step_time_s": 1.0}, {"step_time_s": 1.0, "num_steps": 0, "tokens": 0}) == []
