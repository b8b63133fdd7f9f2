"""Pipeline schedules as records (parallel/schedules.py): their event orders, rules and registry."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.errors import ConfigError
from greentrain.parallel.schedules import (
    GPIPE,
    INTERLEAVED,
    ONE_F_ONE_B,
    PIPELINE_SCHEDULES,
    build_order,
    by_schedule,
    check_schedule,
    implied_schedule,
    register,
    schedule_code,
)
from greentrain.parallel.strategy import Strategy
from greentrain.parallel.table import StrategyTable


@pytest.mark.parametrize(("name", "pp", "vpp", "m"), [("gpipe", 4, 1, 6), ("1f1b", 4, 1, 6), ("1f1b", 4, 1, 2),
                                                       ("interleaved", 4, 2, 8), ("interleaved", 2, 3, 4)])
def test_every_device_runs_each_op_once(name: str, pp: int, vpp: int, m: int) -> None:
    for ops in build_order(name, pp, vpp, m):
        assert sorted(ops) == sorted((bwd, i, c) for bwd in (False, True) for i in range(m) for c in range(vpp))


def test_1f1b_warm_up_is_pp_minus_stage_minus_one() -> None:
    order = build_order("1f1b", 4, 1, 8)
    assert [next(i for i, op in enumerate(ops) if op[0]) for ops in order] == [4, 3, 2, 1]


@pytest.mark.parametrize(("args", "message"), [
    (("interleaved", 4, 2, 6), "multiple of pp=4"), (("interleaved", 4, 1, 8), "needs vpp > 1"),
    (("1f1b", 4, 2, 8), "conflicts with vpp=2"), (("zb-v", 4, 1, 8), "schedule='zb-v': must be one of")])
def test_the_event_order_checks_the_schedule_s_rules(args: tuple[str, int, int, int], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_order(*args)


def test_the_micro_batch_rule_is_the_record_s_for_one_strategy_and_for_a_table() -> None:
    assert INTERLEAVED.micro_batch_multiple_of_pp and not ONE_F_ONE_B.micro_batch_multiple_of_pp
    table = StrategyTable.from_strategies([Strategy(pp=4), Strategy(pp=4, vpp=2), Strategy(pp=2, vpp=3)])
    fits = by_schedule(table.schedule_code, "micro_batches_fit", np.array([6, 6, 6]), table.pp)
    assert list(fits) == [True, False, True]


def test_a_table_row_runs_the_schedule_its_vpp_implies() -> None:
    strategies = [Strategy(pp=2), Strategy(pp=2, vpp=2), Strategy(pp=1)]
    table = StrategyTable.from_strategies(strategies)
    assert list(table.schedule_code) == [s.schedule_code for s in strategies]
    assert [implied_schedule(v) for v in (1, 2, 3)] == [ONE_F_ONE_B, INTERLEAVED, INTERLEAVED]
    assert schedule_code("gpipe") == list(PIPELINE_SCHEDULES).index("gpipe")


def test_derived_names_agree_between_a_strategy_and_its_table_row() -> None:
    strategies = [Strategy(dp=2, tp=4, pp=2, cp=2, sp=True), Strategy(dp=4, tp=2, ep=2, etp=1),
                  Strategy(dp=8, tp=1, sp=True)]
    table = StrategyTable.from_strategies(strategies)
    for name in ("num_chips", "stage_ranks", "expert_tp", "grad_group", "sequence_parallel", "schedule_code"):
        assert list(getattr(table, name)) == [getattr(s, name) for s in strategies], name


def test_the_registry_refuses_a_second_name_and_a_second_searched_schedule_per_chunk_rule() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(GPIPE)
    with pytest.raises(ValueError, match="same chunk rule"):
        register(dataclasses.replace(ONE_F_ONE_B, name="another-1f1b"))
    assert "another-1f1b" not in PIPELINE_SCHEDULES


def test_an_unknown_schedule_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"strategy.schedule='dualpipe': must be one of 1f1b, interleaved, gpipe"):
        check_schedule("dualpipe", 1, "strategy.schedule", "strategy.vpp")
