"""Layer placement on pipeline stages (estimate/pipeline.py): every layer placed, the cost-balanced split is the
best min-max split (brute force), uneven counts such as Llama 3 405B's 126 layers on 16 stages work."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.estimate.pipeline import placement


def _brute(layers: int, pp: int, e: float, h: float) -> float:
    """Smallest slowest-stage time over every split (first gets e, last gets h), pp <= 4."""
    best = np.inf
    for cut in itertools.product(range(layers + 1), repeat=pp - 1):
        counts = [*cut, layers - sum(cut)]
        if counts[-1] < 0:
            continue
        times = [c + (e if i == 0 else 0) + (h if i == pp - 1 else 0) for i, c in enumerate(counts)]
        best = min(best, max(times))
    return best


@settings(max_examples=80, deadline=None)
@given(layers=st.integers(2, 14), pp=st.integers(2, 4), e=st.floats(0, 3), h=st.floats(0, 6))
def test_cost_balance_is_the_best_split(layers: int, pp: int, e: float, h: float) -> None:
    if layers < pp:
        return
    pl = placement(layers, pp, 1, e, h, "cost")
    counts = [pl.first, *([pl.middle] * (pp - 2)), pl.last] if pp > 2 else [pl.first, pl.last]
    assert pl.first + pl.last + (pp - 2) * pl.middle >= layers - 1e-9
    times = [pl.first + e, *([pl.middle] * (pp - 2)), pl.last + h] if pp > 2 else [pl.first + e, pl.last + h]
    assert max(times) == pytest.approx(_brute(layers, pp, e, h), abs=1e-6)  # float ties at 1e-9
    assert all(c >= 0 for c in counts)


def test_even_placement_of_an_uneven_count() -> None:
    pl = placement(126, 16, 1, 0.1, 1.0, "even")
    assert pl.middle == 8 and pl.first == 7 and pl.last == 7  # ceil(126/16) on the middle stages
    assert pl.slowest_layers == 8


def test_even_divisible_matches_the_old_model() -> None:
    """Layers that divide: every stage L/pp, and the heavier end sets the pace."""
    pl = placement(32, 4, 1, 0.2, 2.0, "even")
    assert (pl.first, pl.middle, pl.last, pl.slowest, pl.slowest_layers) == (8, 8, 8, 2, 8)


def test_heavy_head_gets_fewer_layers() -> None:
    """A head as heavy as 4 layers (a 131k vocabulary on a 1B model): the last stage holds fewer layers."""
    pl = placement(16, 4, 1, 0.0, 4.0, "cost")
    assert pl.last < pl.first
    assert pl.last + 4.0 <= 6.0 and pl.first <= 6


def test_columns_equal_scalars() -> None:
    L, pp, vpp = np.array([16.0, 126, 28, 28]), np.array([4.0, 16, 1, 7]), np.array([1.0, 1, 1, 1])
    e, h = np.array([0.1, 0.2, 0.0, 0.3]), np.array([4.0, 1.5, 0.0, 2.2])
    cols = placement(L, pp, vpp, e, h, "cost")
    for i in range(4):
        one = placement(float(L[i]), float(pp[i]), float(vpp[i]), float(e[i]), float(h[i]), "cost")
        assert (one.first, one.middle, one.last, one.slowest_layers) == (
            cols.first[i], cols.middle[i], cols.last[i], cols.slowest_layers[i])


def test_a_pinned_layout_is_what_is_estimated() -> None:
    """Llama 3 405B's published layout (Dubey et al. 2024 §3.3.2: fewer layers on the first and last stage):
    126 layers as 7 + 14 x 8 + 7 on 16 stages; the pace is set by an 8-layer stage or an end."""
    import yaml

    from greentrain.errors import ConfigError, InfeasibleError
    from greentrain.estimate.step import estimate_step
    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict, strategy_from_dict

    layout = (7, *([8] * 14), 7)
    s = Strategy(dp=8, tp=8, pp=16, zero=1, micro_batch_size=1, recompute="full", stage_layers=layout)
    assert strategy_from_dict(yaml.safe_load(yaml.safe_dump(s.to_dict()))) == s
    sc = scenario_from_dict({"model": "llama3-405b", "cluster": {"chip": "h100-sxm", "num_chips": 1024},
                             "workload": {"global_batch_size": 128, "seq_len": 8192, "num_steps": 1}})
    pinned = estimate_step(sc, s, check_fit=False)
    even = estimate_step(sc, Strategy(dp=8, tp=8, pp=16, zero=1, micro_batch_size=1, recompute="full"),
                         check_fit=False)
    assert pinned.step_time_s <= even.step_time_s * 1.0001  # the published layout is never slower here
    with pytest.raises(ConfigError, match="each of the pp = 16 stages"):
        Strategy(pp=16, stage_layers=(7, 8))
    with pytest.raises(InfeasibleError, match="sum to 128"):
        estimate_step(sc, Strategy(dp=8, tp=8, pp=16, stage_layers=(8,) * 16), check_fit=False)


def test_interleaved_uneven_chunks_llama3_405b() -> None:
    """Llama 3 405B's 126 layers on pp 16 with the interleaved schedule (Dubey et al. 2024 §3.3.2; Megatron
    Core's account_for_embedding/loss_in_pipeline_split): 7 layers on the first and last stage, 8 on the
    others, cut into vpp chunks; more chunks shrink the bubble, the search enumerates vpp 1, 2, 4, 8."""
    from greentrain.errors import ConfigError, InfeasibleError
    from greentrain.estimate.step import estimate_step
    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict
    from greentrain.search.space import SearchSpace, strategies

    pl = placement(126, 16, 4, 0.1, 1.0, "even")
    assert (pl.first, pl.middle, pl.last) == (7, 8, 7)
    sc = scenario_from_dict({"model": "llama3-405b", "cluster": {"chip": "h100-sxm", "num_chips": 8192},
                             "workload": {"global_batch_size": 2048, "seq_len": 8192, "num_steps": 1}})
    est = {v: estimate_step(sc, Strategy(dp=64, tp=8, pp=16, vpp=v, sp=True, zero=1, micro_batch_size=1,
                                         recompute="full"), check_fit=False) for v in (1, 2, 4, 8)}
    bubble = [est[v].bubble_time_s for v in (1, 2, 4, 8)]
    assert bubble == sorted(bubble, reverse=True) and bubble[-1] < bubble[0] / 4
    vpps = {s.vpp for s in strategies(sc, SearchSpace(tp=8, pp=16, cp=1, sp=True))}
    assert vpps == {1, 2, 4, 8}
    with pytest.raises(InfeasibleError, match="every model chunk needs a layer"):
        estimate_step(sc, Strategy(dp=64, tp=8, pp=16, vpp=16, micro_batch_size=1), check_fit=False)
    with pytest.raises(ConfigError, match="each of its vpp = 4 model chunks"):
        Strategy(pp=4, vpp=4, stage_layers=(3, 3, 4, 3))
    # a pinned layout with interleaving: 126 = 7 + 14 x 8 + 7 cut into 2 chunks per stage
    pinned = Strategy(dp=64, tp=8, pp=16, vpp=2, sp=True, zero=1, micro_batch_size=1, recompute="full",
                      stage_layers=(7, *([8] * 14), 7))
    assert estimate_step(sc, pinned, check_fit=False).step_time_s == pytest.approx(est[2].step_time_s, rel=1e-6)


@settings(max_examples=200, deadline=None)
@given(layers=st.integers(2, 130), pp=st.integers(2, 40), vpp=st.sampled_from([1, 2, 4]))
def test_even_placement_is_as_even_as_the_count_allows(layers: int, pp: int, vpp: int) -> None:
    """The even split: every layer placed, the largest stage ceil(L / pp), the ends never above the middle."""
    if layers < pp:
        return
    pl = placement(float(layers), float(pp), float(vpp), 0.0, 0.0, "even")
    base, r = divmod(layers, pp)
    if pp == 2:
        assert (pl.first, pl.last) == (layers - base, base)
        return
    assert max(pl.first, pl.middle, pl.last) == -(-layers // pp)
    assert pl.last == base and pl.first <= pl.middle
    # the middle stages hold base or base + 1: r - (first's extra) of them the extra one
    extra_first = int(pl.first - base)
    assert 0 <= r - extra_first <= pp - 2
    assert pl.first + pl.last + (pp - 2) * base + (r - extra_first) == layers
