"""Strategy search: the space is valid, the best is never beaten by a random sample, the Pareto front is not
dominated, an infeasible request names the smallest chip count that fits, bad input exits 2 with one line."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.run import estimate_run
from greentrain.estimate.vector import estimate_steps
from greentrain.parallel.strategy import check_divisibility
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.engine import pareto_mask, search
from greentrain.search.feasibility import fits, min_chips_to_fit
from greentrain.search.space import SearchSpace, strategies, table

SMALL = ["--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048",
         "--tokens", "1e9", "--max-micro-batch", "2", "--no-interleave"]
SPACE = SearchSpace(max_micro_batch=2, interleave=False)


@pytest.fixture(scope="module")
def sc() -> Scenario:
    return scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                               "workload": {"global_batch_size": 16, "seq_len": 2048, "train_tokens": 1e9},
                               "site": {"region": "us-east-1"}})


def test_space_is_valid_and_distinct(sc: Scenario) -> None:
    space = strategies(sc, SPACE)
    assert len(space) == len(set(space)) > 100
    for s in space:
        check_divisibility(s, sc.model, num_chips=8, global_batch_size=16, seq_len=2048)
    assert {s.tp for s in space} == {1, 2, 4, 8} and {s.zero for s in space} == {0, 1, 2, 3}
    assert {s.offload_optimizer for s in space} == {False, True}
    # with flash attention selective recomputation is the same strategy as none (nothing to drop)
    assert any(s.sp for s in space) and {s.recompute for s in space} == {"none", "full"}
    naive = strategies(sc, dataclasses.replace(SPACE, flash_attention=False))
    assert {s.recompute for s in naive} == {"none", "selective", "full"} and not any(s.flash_attention for s in naive)


@pytest.mark.parametrize("objective", ["time", "co2e"])
def test_best_never_worse_than_random_sample(sc: Scenario, objective: str) -> None:
    result = search([sc], objective=objective, top_k=3, space=SPACE)
    best = result.ranked[0]
    assert 0 < result.num_feasible <= result.num_candidates == len(strategies(sc, SPACE))
    keys = [(c.value(objective), c.run_time_s, c.memory_bytes) for c in result.ranked]
    assert keys == sorted(keys)
    rng = random.Random(5)
    checked = 0
    for s in rng.sample(strategies(sc, SPACE), 80):
        try:
            run = estimate_run(sc, s)
        except InfeasibleError:
            continue
        checked += 1
        value = {"time": run.run_time_s, "co2e": run.footprint.emissions_kg_co2e}[objective]
        assert best.value(objective) <= value * (1 + 1e-12)
    assert checked > 20


def test_pareto_front_not_dominated(sc: Scenario) -> None:
    result = search([sc], top_k=1, space=SearchSpace(max_micro_batch=1, interleave=False, offload=(False,)))
    assert result.pareto
    run = estimate_run(sc, result.ranked[0].strategy)
    for f in result.pareto:
        assert not (run.run_time_s < f.run_time_s and run.footprint.cost_usd < f.cost_usd
                    and run.footprint.emissions_kg_co2e < f.emissions_kg_co2e)


def test_pareto_mask_by_hand_and_brute_force() -> None:
    pts = np.array([[3, 5, 10], [3, 1, 20], [2, 5, 10], [1, 10, 10], [2, 5, 10]], dtype=float)
    assert pareto_mask(pts).tolist() == [False, True, True, True, False]  # [0] dominated by [2]; [4] repeats [2]
    rng = np.random.default_rng(3)
    pts = rng.integers(0, 6, size=(300, 3)).astype(float)
    mask = pareto_mask(pts)
    for i, p in enumerate(pts):
        dominated = np.any(np.all(pts <= p, axis=1) & np.any(pts < p, axis=1))
        assert mask[i] == (not dominated and not np.any(np.all(pts[:i] == p, axis=1)))


def test_infeasible_names_smallest_chip_count() -> None:
    big = scenario_from_dict({"model": "llama3-70b", "cluster": {"chip": "a100-80gb", "num_chips": 2},
                              "workload": {"global_batch_size": 8, "seq_len": 2048, "train_tokens": 1e9}})
    need = min_chips_to_fit(big)
    assert need is not None and fits(big, need)
    assert not any(fits(big, n) for n in (2, 4) if n < need)  # every smaller count the search tries fails
    with pytest.raises(InfeasibleError, match=f"smallest count that fits is {need}"):
        search([big], space=SearchSpace(max_micro_batch=1, interleave=False))
    shrunk = dataclasses.replace(big, cluster=dataclasses.replace(big.cluster, num_chips=need))
    assert search([shrunk], space=SearchSpace(max_micro_batch=1, interleave=False)).num_feasible > 0


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", *SMALL, "--json", "--top", "2", "--region", "us-west-2,eu-north-1"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["num_candidates"] >= d["num_feasible"] > 0 and d["search_time_s"] > 0
    assert len(d["ranked"]) == 2 and d["ranked"][0]["estimate"]["run_time_s"] == d["ranked"][0]["run_time_s"]
    assert {r["region"] for r in d["pareto"]} <= {"us-west-2", "eu-north-1"}


def test_cli_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", *SMALL, "--top", "2", "--pareto", "--objective", "cost"]) == 0
    out = capsys.readouterr().out
    assert "Top 2 strategies by cost" in out and "Pareto front" in out and "feasible" in out


@pytest.mark.parametrize("bad", [["--objective", "speed"], ["--top", "0"], ["--chip", "nope"],
                                 ["--region", "us-west-2,"], ["--max-tp", "0"], ["--region", "atlantis"],
                                 ["--model", "llama3-70b", "--num-chips", "2", "--chip", "a100-80gb"]])
def test_bad_input_exits_2_one_line(capsys: pytest.CaptureFixture[str], bad: list[str]) -> None:
    assert main(["search", *SMALL, *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_bad_space_and_objective(sc: Scenario) -> None:
    with pytest.raises(ConfigError, match=r"search\.zero"):
        SearchSpace(zero=(4,))
    with pytest.raises(ConfigError, match=r"search\.objective"):
        search([sc], objective="speed")


# Korthikanti et al. 2022 Table 3 (tp, pp, vpp, global batch, micro-batch) with SP + selective recomputation,
# as tests/validation/test_korthikanti2022.py uses them (Megatron 2022: naive attention).
KORTHIKANTI = {"megatron-22b": (8, 1, 1, 4, 4), "gpt3-175b": (8, 8, 3, 64, 1), "megatron-530b": (8, 35, 3, 280, 1),
               "megatron-1t": (8, 64, 1, 512, 1)}


@pytest.mark.parametrize("name", sorted(KORTHIKANTI))
def test_korthikanti_configurations_in_space_and_feasible(name: str) -> None:
    tp, pp, vpp, gbs, mb = KORTHIKANTI[name]
    sc = scenario_from_dict({"model": name, "cluster": {"chip": "a100-80gb", "num_chips": tp * pp},
                             "workload": {"global_batch_size": gbs, "seq_len": 2048, "num_steps": 1}})
    space = SearchSpace(max_micro_batch=mb, recompute=("selective",), offload=(False,), zero=(0,),
                        flash_attention=False)
    rows = table(sc, space)
    target = [i for i in range(len(rows)) if (lambda s: (s.tp, s.pp, s.vpp, s.dp, s.micro_batch_size, s.sp))(
        rows.row(i)) == (tp, pp, vpp, 1, mb, True)]
    assert len(target) == 1
    assert target[0] in estimate_steps(sc, rows).index  # feasible: divides and fits
    assert estimate_run(sc, rows.row(target[0])).step.memory.total_bytes <= sc.cluster.chip.memory_bytes
