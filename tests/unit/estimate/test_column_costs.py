"""stage.layer_group_costs / sum_layer_totals / end_parts over a Sharding of columns (what estimate/vector.py
evaluates, one call per micro-batch size) equal the same functions called once per strategy with scalars: the
same formulas, so the same numbers."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from greentrain.estimate.compute import Sharding
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.stage import end_parts, layer_group_costs, sum_layer_totals
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import RECOMPUTE
from greentrain.scenario import scenario_from_dict

RTOL = 1e-12

MODELS = {
    "gpt3-175b": {"workload": {"global_batch_size": 64, "seq_len": 2048, "num_steps": 1}},
    "mixtral-8x7b": {"workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}},  # MoE: ep, etp
    "gemma3-27b": {"workload": {"global_batch_size": 64, "seq_len": 8192, "num_steps": 1}},  # sliding window
    "jamba-1.5-large": {"workload": {"global_batch_size": 64, "seq_len": 8192, "num_steps": 1}},  # Mamba + MoE
    "deepseek-v3": {"workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}},  # MLA, MTP
    "t5-large": {"workload": {"global_batch_size": 64, "seq_len": 512, "target_seq_len": 128, "num_steps": 1,
                              "finetune": "freeze", "freeze": ["encoder"]}},  # encoder-decoder, frozen layers
}


def _keys(moe: bool) -> list[tuple[int, int, int, int, bool]]:
    """(tp, cp, ep, etp, sp) with sp only where tp > 1, as StrategyTable.sequence_parallel gives it."""
    eps, etps = ((1, 2, 8), (0, 1, 2)) if moe else ((1,), (0,))
    return [(tp, cp, ep, etp, sp) for tp, cp, ep, etp, sp in itertools.product((1, 2, 8), (1, 2, 4, 8), eps, etps,
                                                                               (False, True)) if tp > 1 or not sp]


def _flat(x: Any) -> list[Any]:
    """The numbers of a result, in field order."""
    if isinstance(x, tuple):
        return [v for item in x for v in _flat(item)]
    if hasattr(x, "__dataclass_fields__"):
        return [v for f in x.__dataclass_fields__ for v in _flat(getattr(x, f))]
    return [x] if isinstance(x, (int, float, np.ndarray)) and not isinstance(x, bool) else []


@pytest.mark.parametrize("flash", [True, False])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_columns_equal_one_strategy_at_a_time(name: str, flash: bool) -> None:
    sc = scenario_from_dict({"model": name, "cluster": {"chip": "h100-sxm", "num_chips": 64}, **MODELS[name]})
    w, eff = sc.workload, efficiency_for("h100-sxm", "fsdp2")  # eager norms too
    keys = _keys(sc.model.is_moe)
    cols = [np.array([k[i] for k in keys]) for i in range(5)]
    sh = Sharding(tp=cols[0], cp=cols[1], ep=cols[2], etp=cols[3], sp=cols[4])
    ops = model_ops(sc.model, 2, w.seq_len, w.activation_bytes, w.target_seq_len, flash, w.finetune)
    groups = layer_group_costs(sc, sh, ops, eff, flash)
    many = [sum_layer_totals(groups, recompute=r, flash=flash, tp=sh.tp, sp=sh.sp) for r in RECOMPUTE]
    many_ends = end_parts(sc, sh, ops, eff)
    for j, (tp, cp, ep, etp, sp) in enumerate(keys):
        one = Sharding(tp=tp, cp=cp, ep=ep, etp=etp, sp=sp)
        g1 = layer_group_costs(sc, one, ops, eff, flash)
        want = [sum_layer_totals(g1, recompute=r, flash=flash, tp=tp, sp=sp) for r in RECOMPUTE]
        for got_x, want_x in ((many, want), (many_ends, end_parts(sc, one, ops, eff))):
            for got, ref in zip(_flat(got_x), _flat(want_x), strict=True):
                value = np.broadcast_to(got, (len(keys),))[j]
                assert value == pytest.approx(ref, rel=RTOL, abs=1e-300), (name, keys[j])
