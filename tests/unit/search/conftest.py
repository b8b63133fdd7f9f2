"""Shared by the search tests: the scalar estimator (estimate_step) and the vectorised one (estimate_steps) give
the same figures and the same feasibility on chosen rows of a strategy table."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from greentrain.errors import InfeasibleError
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.step import estimate_step
from greentrain.estimate.vector import estimate_steps
from greentrain.parallel.strategy import Strategy
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import Scenario

# Both run the same composition (estimate/compose.py) over floats and columns: only rounding may differ.
RTOL = 1e-12
Agree = Callable[..., int]


def _runs(eff: Efficiency | None, s: Strategy) -> bool:
    """Whether the framework runs ``s`` (search/feasibility.framework_space keeps the search to such rows)."""
    return eff is None or (s.zero in eff.zero_stages and not eff.lacks(tp=s.tp, pp=s.pp, cp=s.cp, ep=s.ep)
                           and (eff.optimizer_offload or not s.offload_optimizer))


def _agree(sc: Scenario, rows: StrategyTable, rng: random.Random, samples: int, feasible_samples: int = 0,
           eff: Efficiency | None = None) -> int:
    """``samples`` random rows and ``feasible_samples`` of those the columns keep; returns how many fit."""
    est = estimate_steps(sc, rows, eff=eff)
    at = {int(i): j for j, i in enumerate(est.index)}
    picks = rng.sample(range(len(rows)), min(samples, len(rows)))
    # feasible rows the framework runs (the search keeps to its ZeRO stages, axes and offload before estimating)
    kept = [int(i) for i in est.index if _runs(eff, rows.row(int(i)))]
    picks += rng.sample(kept, min(feasible_samples, len(kept)))
    feasible = 0
    for i in picks:
        s = rows.row(i)
        if not _runs(eff, s):
            continue  # estimate_step refuses them; the search keeps to what the framework runs before estimating
        try:
            ref = estimate_step(sc, s, eff=eff)
        except InfeasibleError:
            assert i not in at, s.describe()
            continue
        assert i in at, s.describe()
        feasible += 1
        j = at[i]
        for got, want in ((est.step_time_s[j], ref.step_time_s), (est.memory_bytes[j], ref.memory.total_bytes),
                          (est.mfu[j], ref.mfu), (est.hfu[j], ref.hfu), (est.utilization[j], ref.utilization),
                          (est.bubble_time_s[j], ref.bubble_time_s), (est.dp_comm_time_s[j], ref.dp_comm_time_s),
                          (est.tokens_per_s[j], ref.tokens_per_s)):
            assert got == pytest.approx(want, rel=RTOL, abs=1e-15), s.describe()
    return feasible


@pytest.fixture(scope="session")
def scalar_equals_vector() -> Agree:
    """``scalar_equals_vector(sc, rows, rng, samples, feasible_samples=0, eff=None)``: checks the rows (see
    _agree) and returns how many of them fit."""
    return _agree
