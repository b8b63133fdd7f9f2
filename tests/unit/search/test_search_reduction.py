"""engine.search ranks only the rows each block can contribute (engine.reduce_block): checked against ranking
every feasible row at once, for every objective, with chip types whose costs do not compare, several regions and
near-ties (the planner's tie tolerance)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.estimate.efficiency import Profile
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.scenario import Scenario, build_cluster, scenario_from_dict, site_from_dict
from greentrain.search.engine import Constraints, SearchResult, _evaluate, answer, chip_counts, search
from greentrain.search.feasibility import with_chips
from greentrain.search.space import SearchSpace

SPACE = SearchSpace(max_micro_batch=4)


def _every_row(scenarios: list[Scenario], objective: str, top_k: int, cons: Constraints,
               sites: list[Site]) -> SearchResult:
    """engine.answer over every feasible row of every block (none reduced)."""
    units = [with_chips(sc, n) for sc in scenarios for n in chip_counts(sc, cons.max_chips)]
    evaluated = [_evaluate(u, SPACE, sites, cons, Profile()) for u in units]
    blocks = [b for _, bs in evaluated for b in bs]
    points = [np.stack([b.values["run_time_s"], b.values["cost_usd"], b.values["emissions_kg_co2e"]], axis=1)
              for b in blocks]
    return answer(scenarios, units, blocks, points, feasible=sum(len(b.rows) for b in blocks),
                  total=sum(n for n, _ in evaluated), objective=objective, top_k=top_k, space=SPACE, cons=cons,
                  profile=Profile(), t0=0.0)


@pytest.mark.parametrize(("objective", "top_k", "tolerance"), [("time", 1, 0.03), ("cost", 7, 0.03),
                                                                ("co2e", 3, 0.0), ("energy", 5, 0.1)])
def test_the_reduced_ranking_is_the_ranking_of_every_row(objective: str, top_k: int, tolerance: float) -> None:
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 32, "seq_len": 2048, "train_tokens": 1e9},
                             "site": {"region": "us-east-1"}})
    scenarios = [sc, dataclasses.replace(sc, cluster=build_cluster(get_chip("rtx-4090"), 16, None))]
    cons = Constraints(max_chips=16, tie_tolerance=tolerance)
    sites = [site_from_dict({"region": r}) for r in ("us-east-1", "eu-north-1")]
    every = _every_row(scenarios, objective, top_k, cons, sites)
    got = search(scenarios, objective=objective, top_k=top_k, space=SPACE, sites=sites, constraints=cons)
    assert got.ranked == every.ranked and got.pareto == every.pareto and np.array_equal(got.points, every.points)
    assert (got.num_candidates, got.num_feasible, got.notes) == (every.num_candidates, every.num_feasible, every.notes)
    assert len(got.ranked) == top_k and got.num_feasible == len(got.points) > 100
