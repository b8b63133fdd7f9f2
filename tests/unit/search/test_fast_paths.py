"""The search's fast paths give what their plain forms give (#23: speed without a changed figure): the strategy
table gathered from each mesh's choice grid equals every mesh's grid concatenated in order; the dense codes of
a column equal np.unique's inverse; the lazily gathered split equals num.take of the whole record."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.vector import _dense_codes, _groups, _per_key, _split
from greentrain.num import take
from greentrain.parallel.strategy import RECOMPUTE
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.space import LIGHTEST, SearchSpace, activation_offloads, divisors, meshes, table


def _sc(model: str, chips: int, batch: int) -> Scenario:
    return scenario_from_dict({"model": model, "cluster": {"chip": "h100-sxm", "num_chips": chips},
                               "workload": {"global_batch_size": batch, "seq_len": 2048, "num_steps": 1}})


def _plain_table(sc: Scenario, space: SearchSpace) -> dict[str, list[int]]:
    """Every mesh times its (micro-batch, ZeRO, recompute, offload, activation offload) grid, meshes in order,
    row by row; activations offloaded on one-stage meshes without recomputation only."""
    cols: dict[str, list[int]] = {f: [] for f in ("dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero",
                                                  "recompute", "micro_batch_size", "offload_optimizer",
                                                  "offload_activations")}
    acts = activation_offloads(space, sc.model.total_layers)
    for m in meshes(sc, space):
        mbs = [b for b in divisors(sc.workload.global_batch_size // m.dp)
               if (not space.max_micro_batch or b <= space.max_micro_batch)
               and (not space.micro_batch or b == space.micro_batch)]
        zeros = space.zero if m.dp * m.cp > 1 else (min(space.zero),)
        recs = [RECOMPUTE.index(r) for r in space.recompute
                if not (space.flash_attention and r == "selective" and len(space.recompute) > 1)]
        for mb in mbs:
            for z in zeros:
                for r in recs:
                    for off, act in itertools.product(space.offload, acts if m.pp == 1 else (0,)):
                        if act and RECOMPUTE[r] != "none":
                            continue
                        for f in ("dp", "tp", "pp", "vpp", "cp", "ep", "etp", "sp"):
                            cols[f].append(getattr(m, f))
                        cols["zero"].append(z)
                        cols["recompute"].append(r)
                        cols["micro_batch_size"].append(mb)
                        cols["offload_optimizer"].append(off)
                        cols["offload_activations"].append(act)
    return cols


@pytest.mark.parametrize(("model", "chips", "batch", "space"), [
    ("llama3-8b", 32, 64, SearchSpace(flash_attention=False, max_micro_batch=4)),
    ("qwen3-30b-a3b", 16, 32, SearchSpace(max_micro_batch=2)),  # MoE: ep and etp layouts
    ("llama3.2-1b", 8, 16, LIGHTEST),
    ("llama3.2-1b", 8, 16, SearchSpace(micro_batch=2, zero=(1, 3))),
])
def test_the_gathered_table_is_every_mesh_grid_in_order(model: str, chips: int, batch: int,
                                                        space: SearchSpace) -> None:
    sc = _sc(model, chips, batch)
    t, want = table(sc, space), _plain_table(sc, space)
    assert len(t) == len(want["dp"]) > 0
    for f, values in want.items():
        assert getattr(t, f).tolist() == [int(v) for v in values], f


def test_dense_codes_are_the_ranks_of_the_distinct_values() -> None:
    rng = np.random.default_rng(0)
    for a in (rng.integers(0, 50, 1000), rng.integers(0, 3_000_000, 5000), np.array([7, 7, 7]),
              rng.integers(-5, 5, 100), np.zeros(0, dtype=np.int64), np.array([1 << 40, 3, 1 << 40])):
        codes, n = _dense_codes(a.astype(np.int64))
        values, inverse = np.unique(a, return_inverse=True)
        assert n == len(values) and codes.tolist() == inverse.reshape(-1).tolist()


def test_the_lazy_split_reads_as_the_whole_record_taken() -> None:
    sc = _sc("qwen3-30b-a3b", 16, 32)
    t, eff = table(sc, SearchSpace(max_micro_batch=2)), efficiency_for("h100-sxm")
    split = _split(sc, t, _per_key(sc, t, eff), eff)
    rows = np.arange(0, len(t), 7)
    lazy, whole = split.at(rows), take(split.one, split.row[rows])
    for f in dataclasses.fields(whole):
        got, want = getattr(lazy, f.name), getattr(whole, f.name)
        pairs = zip(got, want, strict=True) if isinstance(want, tuple) else [(got, want)]
        for g, w in pairs:
            assert np.array_equal(g, w), f.name
    first, inverse = _groups([split.row[rows]])
    assert np.array_equal(split.row[rows][first][inverse], split.row[rows])
