"""One source of truth: the vectorised estimator (estimate/vector.py) and footprint_arrays equal the scalar
estimate_step / estimate_run on random strategies of several scenarios, feasibility included
(test_vector_agreement.py: every framework profile and more model kinds)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.run import estimate_run
from greentrain.estimate.step import estimate_step
from greentrain.estimate.vector import estimate_steps
from greentrain.footprint.model import footprint_arrays
from greentrain.footprint.prices import device_price_usd_per_s
from greentrain.parallel.strategy import Strategy
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import scenario_from_dict
from greentrain.search.space import SearchSpace, table

RTOL = 1e-12  # one formula over floats and columns (footprint/model.py, estimate/compose.py): rounding only


SCENARIOS: dict[str, dict[str, Any]] = {
    "gpt3-175b on 1024 a100": {"model": "gpt3-175b", "cluster": {"chip": "a100-80gb", "num_chips": 1024},
                               "workload": {"global_batch_size": 1536, "seq_len": 2048, "train_tokens": 300e9},
                               "site": {"region": "us-east-1"}},
    "mixtral (MoE, ep) on 64 h100": {"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": 64},
                                     "workload": {"global_batch_size": 256, "seq_len": 4096, "train_tokens": 1e11},
                                     "site": {"region": "eu-north-1"}},
    "t5 (encoder-decoder) on 16 a100, 4 per node": {
        "model": "t5-large", "cluster": {"chip": "a100-40gb", "num_chips": 16, "chips_per_node": 4},
        "workload": {"global_batch_size": 128, "seq_len": 512, "target_seq_len": 128, "train_tokens": 1e10,
                     "optimizer": "sgd"}},
    "llama3-8b fp32 on 8 rtx-4090": {"model": "llama3.2-1b", "cluster": {"chip": "rtx-4090", "num_chips": 8},
                                     "workload": {"global_batch_size": 32, "seq_len": 1024, "num_steps": 100,
                                                  "precision": "fp32"},
                                     "site": {"grid_g_co2e_per_kwh": 300, "electricity_usd_per_kwh": 0.2}},
    "llama3-8b lora on 16 h100": {"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                                  "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 100,
                                               "finetune": "lora", "lora_rank": 64, "lora_dtype": "fp32",
                                               "lora_targets": ["q", "k", "v", "o"]}},
    "t5 frozen encoder on 8 a100": {"model": "t5-large", "cluster": {"chip": "a100-80gb", "num_chips": 8},
                                    "workload": {"global_batch_size": 64, "seq_len": 512, "target_seq_len": 128,
                                                 "num_steps": 100, "finetune": "freeze", "freeze": ["encoder"]}},
}


@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_vectorised_equals_scalar_on_random_strategies(name: str, flash: bool,
                                                       scalar_equals_vector: Callable[..., int]) -> None:
    sc = scenario_from_dict(SCENARIOS[name])
    rows = table(sc, SearchSpace(flash_attention=flash))
    assert scalar_equals_vector(sc, rows, random.Random(hash(name) % 1000 + flash), 120) >= 10


def test_footprint_arrays_equal_estimate_run() -> None:
    sc = scenario_from_dict(SCENARIOS["mixtral (MoE, ep) on 64 h100"])
    rows = table(sc, SearchSpace(max_micro_batch=2))
    est = estimate_steps(sc, rows)
    pick = np.random.default_rng(0).choice(len(est.index), 25, replace=False)
    run_s = est.step_time_s[pick] * sc.workload.steps()
    quote = device_price_usd_per_s(sc.cluster.chip, sc.site)  # the region's instance price, as estimate_run
    assert quote is not None
    fp = footprint_arrays(num_chips=64, duration_s=run_s, utilization=est.utilization[pick], site=sc.site,
                          chip=sc.cluster.chip, price_usd_per_device_s=quote.usd_per_device_s)
    for k, j in enumerate(pick):
        ref = estimate_run(sc, rows.row(int(est.index[j]))).footprint
        for got, want in ((fp.energy_j[k], ref.energy_j), (fp.emissions_kg_co2e[k], ref.emissions_kg_co2e),
                          (fp.embodied_kg_co2e[k], ref.embodied_kg_co2e), (fp.cost_usd[k], ref.cost_usd),
                          (fp.device_hours[k], ref.device_hours)):
            assert got == pytest.approx(want, rel=RTOL)
        assert fp.cost_basis == ref.cost_basis


def test_capacity_and_interleave_rule() -> None:
    sc = scenario_from_dict(SCENARIOS["gpt3-175b on 1024 a100"])
    rows = table(sc, SearchSpace(max_micro_batch=1))
    full = estimate_steps(sc, rows)
    tight = estimate_steps(sc, rows, capacity_bytes=0.5 * sc.cluster.chip.memory_bytes)
    assert set(tight.index) < set(full.index) and np.all(tight.memory_bytes <= 0.5 * sc.cluster.chip.memory_bytes)
    unchecked = estimate_steps(sc, rows, check_fit=False)
    assert len(unchecked.index) > len(full.index)
    # interleaving needs micro-batches % pp == 0: dp=4 mb=16 gives 24 micro-batches, pp=32 does not divide it
    bad = Strategy(dp=4, tp=8, pp=32, vpp=3, sp=True, micro_batch_size=16)
    one = StrategyTable.from_strategies([bad])
    with pytest.raises(InfeasibleError, match="interleaved"):
        estimate_step(sc, bad, check_fit=False)
    assert len(estimate_steps(sc, one, check_fit=False).index) == 0


def test_table_round_trip_and_errors() -> None:
    strategies = [Strategy(dp=2, tp=4, pp=2, vpp=2, sp=True, zero=1, recompute="full", micro_batch_size=2),
                  Strategy(dp=16, offload_optimizer=True, zero=3)]
    t = StrategyTable.from_strategies(strategies)
    assert [t.row(i) for i in range(len(t))] == strategies
    assert t.take(np.array([1])).row(0) == strategies[1]
    with pytest.raises(ValueError, match="flash_attention"):
        StrategyTable.from_strategies([Strategy(), Strategy(flash_attention=False)])
    with pytest.raises(ValueError, match="the gpipe schedule is not part of the vectorised space"):
        StrategyTable.from_strategies([Strategy(pp=2, schedule="gpipe")])


def test_chip_without_tdp_is_one_line_error() -> None:
    import dataclasses

    sc = scenario_from_dict(SCENARIOS["llama3-8b fp32 on 8 rtx-4090"])
    chip = dataclasses.replace(sc.cluster.chip, tdp_w=0.0)
    with pytest.raises(ConfigError, match="tdp_w"):
        footprint_arrays(num_chips=8, duration_s=np.ones(2), utilization=np.ones(2), site=sc.site, chip=chip)


def test_search_prices_like_estimate_run_in_a_cloud_region() -> None:
    """The region's instance price (footprint/prices.py) is used by both paths, not the catalog price."""
    from greentrain.search.engine import search

    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "a100-40gb", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 2048, "train_tokens": 1e9},
                             "site": {"region": "us-central1"}})
    quote = device_price_usd_per_s(sc.cluster.chip, sc.site)
    assert quote is not None and quote.usd_per_device_s != sc.cluster.chip.price_usd_per_s
    best = search([sc], objective="cost", top_k=1, space=SearchSpace(max_micro_batch=2)).ranked[0]
    ref = estimate_run(sc, best.strategy).footprint
    assert best.cost_usd == pytest.approx(ref.cost_usd, rel=RTOL)
    assert best.cost_usd == pytest.approx(quote.usd_per_device_s * ref.device_hours * 3600, rel=RTOL)
