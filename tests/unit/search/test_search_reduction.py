"""engine.search ranks only the rows each block can contribute (engine.reduce_block): checked against ranking
every feasible row at once, for every objective, with chip types whose costs do not compare, several regions and
near-ties (the planner's tie tolerance)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.estimate.efficiency import Profile
from greentrain.hardware.catalog import get_chip
from greentrain.scenario import Scenario, build_cluster, scenario_from_dict, site_from_dict
from greentrain.search.engine import (
    _COLUMNS,
    OBJECTIVE_COLUMNS,
    Constraints,
    _candidate,
    _cost_bases,
    _evaluate,
    _tie_keys,
    chip_counts,
    first_in_order,
    pareto_mask,
    search,
)
from greentrain.search.feasibility import with_chips
from greentrain.search.space import SearchSpace

SPACE = SearchSpace(max_micro_batch=4)


def _every_row(scenarios: list[Scenario], objective: str, top_k: int, cons: Constraints, sites: list) -> tuple:
    """The ranking and the front over every feasible row of every block (no reduction)."""
    blocks = [b for sc in scenarios for n in chip_counts(sc, cons.max_chips)
              for b in _evaluate(with_chips(sc, n), SPACE, sites, cons, Profile())[1]]
    cols = {k: np.concatenate([b.values[k] for b in blocks]) for k in _COLUMNS}
    owner = np.concatenate([np.full(len(b.rows), i) for i, b in enumerate(blocks)])
    local = np.concatenate([np.arange(len(b.rows)) for b in blocks])
    value = cols[OBJECTIVE_COLUMNS[objective]]
    comparable, _ = _cost_bases(blocks, owner, objective)
    candidates = np.flatnonzero(comparable) if objective == "cost" else np.arange(len(value))
    best = first_in_order(candidates, _tie_keys(cols, value, candidates, cons.tie_tolerance), top_k)
    points = np.stack([cols["run_time_s"], cols["cost_usd"], cols["emissions_kg_co2e"]], axis=1)
    rows = np.flatnonzero(comparable)
    front = rows[pareto_mask(points[rows], cols["memory_bytes"][rows])]
    front = front[np.argsort(points[front, 0], kind="stable")]
    return (tuple(_candidate(blocks[owner[i]], local[i]) for i in best),
            tuple(_candidate(blocks[owner[i]], local[i]) for i in front), points)


@pytest.mark.parametrize(("objective", "top_k", "tolerance"), [("time", 1, 0.03), ("cost", 7, 0.03),
                                                                ("co2e", 3, 0.0), ("energy", 5, 0.1)])
def test_the_reduced_ranking_is_the_ranking_of_every_row(objective: str, top_k: int, tolerance: float) -> None:
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 32, "seq_len": 2048, "train_tokens": 1e9},
                             "site": {"region": "us-east-1"}})
    scenarios = [sc, dataclasses.replace(sc, cluster=build_cluster(get_chip("rtx-4090"), 16, None))]
    cons = Constraints(max_chips=16, tie_tolerance=tolerance)
    sites = [site_from_dict({"region": r}) for r in ("us-east-1", "eu-north-1")]
    ranked, pareto, points = _every_row(scenarios, objective, top_k, cons, sites)
    got = search(scenarios, objective=objective, top_k=top_k, space=SPACE, sites=sites, constraints=cons)
    assert got.ranked == ranked and got.pareto == pareto and np.array_equal(got.points, points)
    assert len(got.ranked) == top_k and got.num_feasible == len(points) > 100
