"""A planner that leaves room (issue 23 item 9): a default memory headroom, and near-ties to the model's own
error resolved towards the candidate with the most free memory."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.engine import (
    DEFAULT_MEMORY_HEADROOM,
    TIE_TOLERANCE,
    Constraints,
    best_strategy,
    search,
)
from greentrain.search.space import SearchSpace

SPACE = SearchSpace(max_micro_batch=4, interleave=False)


@pytest.fixture(scope="module")
def sc() -> Scenario:
    return scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                               "workload": {"global_batch_size": 64, "seq_len": 4096, "train_tokens": 1e9}})


def test_the_default_leaves_five_percent_of_memory_free(sc: Scenario) -> None:
    assert Constraints().memory_headroom == DEFAULT_MEMORY_HEADROOM == 0.05
    r = search([sc], space=SPACE, top_k=50)
    cap = sc.cluster.chip.memory_bytes
    assert all(c.memory_bytes <= 0.95 * cap for c in r.ranked)
    packed = search([sc], space=SPACE, top_k=50, constraints=Constraints(memory_headroom=0.0))
    assert packed.num_feasible >= r.num_feasible


def test_near_ties_go_to_the_candidate_with_the_most_free_memory(sc: Scenario) -> None:
    strict = search([sc], space=SPACE, top_k=200, constraints=Constraints(tie_tolerance=0.0))
    robust = search([sc], space=SPACE, top_k=200)
    best = strict.ranked[0].run_time_s
    ties = [c for c in strict.ranked if c.run_time_s <= best * (1 + TIE_TOLERANCE)]
    assert robust.ranked[0].run_time_s <= best * (1 + TIE_TOLERANCE)
    on_device = [c for c in ties if not c.strategy.offload_optimizer  # offloading is not the robust pick
                 and not c.strategy.offload_activations]
    assert len(on_device) >= 2 and len({c.memory_bytes for c in on_device}) >= 2  # a real choice
    assert robust.ranked[0].memory_bytes == min(c.memory_bytes for c in on_device)
    assert not robust.ranked[0].strategy.offload_optimizer and not robust.ranked[0].strategy.offload_activations
    # after the ties, the objective orders the rest as before
    rest = [c.run_time_s for c in robust.ranked[len(ties):]]
    assert rest == sorted(rest)
    assert best_strategy(sc, SPACE) == robust.ranked[0].strategy


def test_bad_tolerance_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"constraints.tie_tolerance.*must be in \[0, 1\)"):
        Constraints(tie_tolerance=1.5)


def test_plan_takes_a_headroom_flag(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from greentrain.cli.main import main

    base = ["plan", "--model", "llama3-8b", "--num-chips", "8", "--global-batch", "64", "--seq-len", "4096", "--json"]
    assert main([*base, "--memory-headroom", "0.5"]) == 0
    d = json.loads(capsys.readouterr().out)
    mem = d["memory_bytes_per_device"]
    assert mem["total"] <= 0.5 * mem["capacity"]
    assert main([*base, "--memory-headroom", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "--memory-headroom=1.5" in err and len(err.strip().splitlines()) == 1  # the flag typed


def test_among_near_ties_the_cleaner_region_ranks_first(sc: Scenario) -> None:
    """One strategy in two regions at the same cost: the lower-CO2e site first (the memory is the same)."""
    from greentrain.scenario import site_from_dict

    sites = [site_from_dict({"region": r}) for r in ("us-east-1", "eu-north-1")]
    r = search([sc], space=SPACE, top_k=20, objective="cost", sites=sites)
    first = r.ranked[0]
    same = [c for c in r.ranked if c.strategy == first.strategy]
    assert [c.region for c in same] == ["eu-north-1", "us-east-1"]
    assert same[0].cost_usd == pytest.approx(same[1].cost_usd) and same[0].memory_bytes == same[1].memory_bytes
    assert same[0].emissions_kg_co2e < same[1].emissions_kg_co2e
