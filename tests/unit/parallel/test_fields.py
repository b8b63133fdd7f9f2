"""Strategy's fields have one record each (parallel/fields.py) and the flag, CSV, table and key lists come
from them: a field on Strategy without a record, or a record without a field, fails here."""

from __future__ import annotations

import dataclasses

import numpy as np

from greentrain.calibrate.runs import STRATEGY
from greentrain.cli.scenario_args import STRATEGY_FLAGS
from greentrain.parallel.fields import FIELDS, LAYER_KEY_FIELDS, MeshAxis
from greentrain.parallel.strategy import Strategy
from greentrain.parallel.table import BOOL_FIELDS, INT_FIELDS, StrategyTable


def test_one_record_per_strategy_field() -> None:
    assert set(FIELDS) == {f.name for f in dataclasses.fields(Strategy)}
    assert all(f.help for f in FIELDS.values())


def test_the_lists_are_derived_from_the_records() -> None:
    assert set(STRATEGY) == {"dp", "tp", "pp", "vpp", "cp", "ep", "etp", "zero", "sp", "recompute",
                             "flash_attention", "offload_activations"}
    assert set(INT_FIELDS) | set(BOOL_FIELDS) == {f.name for f in dataclasses.fields(StrategyTable)} - {
        "flash_attention"}
    assert "micro_batch" in STRATEGY_FLAGS and "etp" in STRATEGY_FLAGS  # --etp since session 22
    assert set(LAYER_KEY_FIELDS) == {"tp", "cp", "ep", "etp", "micro_batch_size"}


def test_every_mesh_axis_is_a_strategy_degree() -> None:
    s = Strategy(dp=2, tp=4, pp=2, vpp=2, cp=2, ep=2, etp=1)
    assert {axis.value: getattr(s, axis.value) for axis in MeshAxis} == {
        "dp": 2, "tp": 4, "pp": 2, "vpp": 2, "cp": 2, "ep": 2, "etp": 1}
    assert MeshAxis.TP.field.layer_key and not MeshAxis.DP.field.layer_key


def test_table_has_the_derived_names_strategy_has() -> None:
    rows = [Strategy(dp=4, cp=2, tp=2), Strategy(dp=2, ep=2, etp=1, tp=2)]
    table = StrategyTable.from_strategies(rows)
    assert table.grad_group.tolist() == [s.grad_group for s in rows]
    assert np.array_equal(table.expert_tp, [s.expert_tp for s in rows])
