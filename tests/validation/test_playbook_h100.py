"""HF Ultra-Scale Playbook benchmark sweep (nanotron, 2025): 1,632 runs of 1B and 3B llama models on 1 to 64
nodes of 8 H100 (tests/data/calibration, a copy of shared/reference/calibration/playbook-h100-1b-3b.csv and
its two model configs). The cluster's network is AWS EFA (efa-400): the playbook ran on Hugging Face's cluster
of p5 instances (docs/validation.md says why).

These pin what greentrain reaches today through `greentrain validate` with the nanotron profile, measured
2026-11-25 (docs/validation.md): MFU error 2.61 points (bias +1.5; 2.613 and +1.5 since the loss's time follows its
kernel, 2026-11-26), rank correlation median 0.86, best pick
within 10 % of the measured best in 79 % of groups, ran/crashed 90.7 % right, peak memory median error 9.2 %
(the allocator's peak). Of the issue's goals (3 points, 0.85, 80 %, 95 %, 10 %) the MFU error, the rank correlation
and the memory are met; the tolerances below catch regressions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.calibrate.validate import Summary, validate
from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload

CSV = Path(__file__).parents[1] / "data" / "calibration" / "playbook-h100-1b-3b.csv"


@pytest.fixture(scope="module")
def summary() -> Summary:
    runs = read_runs(CSV, inter_node_link="efa-400")
    _, s = validate(runs, framework="nanotron")
    return s


def test_all_rows_predicted() -> None:
    """Every row read and predicted (timed in BENCHMARKS.md, not here)."""
    runs = read_runs(CSV)
    _, s = validate(runs)
    assert s.num_runs == 1632 and s.num_ran == 1117
    assert s.num_predicted == 1538  # the rest do not divide (heads or vocabulary by tp, batch by dp x mb)


def test_mfu_error(summary: Summary) -> None:
    assert summary.mfu_error_mean is not None and summary.mfu_error_mean <= 0.028  # 16.4 before issue 13 (goal 3)


def test_ranking_and_best_pick(summary: Summary) -> None:
    assert summary.rank_correlation_median is not None and summary.rank_correlation_median >= 0.85  # was 0.59 (goal)
    assert summary.best_pick_good is not None and summary.best_pick_good >= 0.78


def test_ran_or_crashed_and_memory(summary: Summary) -> None:
    assert summary.ran_crashed_accuracy is not None and summary.ran_crashed_accuracy >= 0.90  # was 0.855
    assert summary.peak_memory_error_median is not None and summary.peak_memory_error_median <= 0.10  # was 0.21 (goal)


def test_llama3_405b_plans_as_published() -> None:
    """Dubey et al. 2024 (The Llama 3 Herd of Models) §3.3.2 and Table 4: 126 layers on pp 16 with tp 8, and
    cp 16 at 131,072 tokens in the long-context stage (16,384 GPUs: dp 8). With full recomputation: without it
    greentrain predicts 80.2 GiB per device, just over the 80 GiB."""
    sc = Scenario(model=load_model("llama3-405b"), cluster=build_cluster(get_chip("h100-sxm"), 16384),
                  workload=Workload(global_batch_size=128, seq_len=131072, num_steps=1), site=Site())
    est = estimate_step(sc, Strategy(dp=8, tp=8, pp=16, cp=16, sp=True, zero=1, micro_batch_size=1,
                                        recompute="full"))
    assert est.memory.total_bytes < sc.cluster.chip.memory_bytes
    assert 0.2 < est.mfu < 0.6
