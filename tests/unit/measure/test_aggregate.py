"""measure.distributed.aggregate: how rank 0 folds the per-rank measurements (the 2-rank gloo run is in
tests/distributed/test_track_distributed.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from greentrain.errors import ConfigError
from greentrain.measure.distributed import aggregate
from greentrain.measure.summary import Measurement, ModuleStats, summarize


def _rank(step_time_s: float, flop: float, energy_j: float, mod_s: float) -> Measurement:
    base = summarize([{"type": "start", "world_size": 2, "meters": []}, {"type": "end", "t_s": 1.0}])
    mod = ModuleStats(name="blocks.0", calls=4, forward_s=mod_s, backward_s=2 * mod_s, forward_flop=flop / 3,
                      backward_flop=2 * flop / 3, memory_bytes=1e6 * mod_s, energy_j=energy_j / 2)
    return replace(base, num_steps=4, step_time_s=step_time_s, tokens=64.0, tokens_per_s=64.0 / step_time_s,
                   flop=4 * flop, flop_per_step=flop, it_energy_j=energy_j, energy_j=energy_j, cpu_energy_j=energy_j,
                   memory_bytes=2e6 * mod_s, modules=(mod,))


def test_sums_maxes_and_keeps_each_rank() -> None:
    ranks = [_rank(0.10, 3e6, 5.0, 0.01), _rank(0.12, 3e6, 7.0, 0.02)]
    m = aggregate(ranks)
    assert m.world_size == 2
    assert m.flop == 24e6 and m.flop_per_step == 6e6
    assert m.it_energy_j == 12.0 and m.cpu_energy_j == 12.0
    assert m.step_time_s == 0.12 and m.memory_bytes == 4e4  # the slowest rank, the largest device
    assert m.tokens == 128.0
    assert [(r.rank, r.step_time_s, r.it_energy_j) for r in m.ranks] == [(0, 0.10, 5.0), (1, 0.12, 7.0)]
    (mod,) = m.modules
    assert mod.forward_flop == 2e6 and mod.energy_j == 6.0 and mod.forward_s == 0.02
    assert m.to_json()["ranks"][1]["flop"] == 12e6


def test_model_parallel_ranks_share_their_tokens() -> None:
    m = aggregate([_rank(0.1, 1.0, 1.0, 0.01)] * 4, model_parallel_size=2)  # dp=2 x tp=2
    assert m.tokens == 128.0 and m.tokens_per_s == pytest.approx(2 * 640.0)
    with pytest.raises(ConfigError, match="model_parallel_size"):
        aggregate([_rank(0.1, 1.0, 1.0, 0.01)] * 4, model_parallel_size=3)
