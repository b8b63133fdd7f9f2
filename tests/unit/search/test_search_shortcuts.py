"""The search's shortcuts give what the plain algorithms give: first_in_order sorts only the rows that can be
among the first k (a full np.lexsort is the reference); pareto_mask drops rows strictly dominated by the best
row of a column before sorting (the reference keeps them); ties and tiebreaks included."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from greentrain.search.engine import first_in_order, pareto_mask


def _pareto_reference(points: npt.NDArray[np.float64], tiebreak: npt.NDArray[np.float64] | None) -> list[bool]:
    front = np.zeros(len(points), dtype=bool)
    keys = list(points.T[::-1])
    idx = np.lexsort(keys if tiebreak is None else [tiebreak, *keys])
    while idx.size:
        i, idx = idx[0], idx[1:]
        front[i] = True
        idx = idx[~np.all(points[i] <= points[idx], axis=1)]
    return front.tolist()


@pytest.mark.parametrize("seed", range(8))
def test_pareto_mask_equals_the_unfiltered_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    pts = rng.integers(0, 5 + seed, size=(n, 3)).astype(float)  # many ties
    if seed % 2:
        pts[:, 1] = pts[:, 0] * 2 + rng.integers(0, 2, n)  # correlated columns, as time and cost are
    tiebreak = rng.integers(0, 3, n).astype(float)
    for tb in (None, tiebreak):
        assert pareto_mask(pts, tb).tolist() == _pareto_reference(pts, tb)
    assert pareto_mask(np.zeros((0, 3))).tolist() == []


@pytest.mark.parametrize("seed", range(8))
def test_first_in_order_equals_a_full_lexsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    keys = [rng.integers(0, 4, n).astype(float) for _ in range(3)]
    if seed == 3:
        keys[2][rng.integers(0, n, n // 3)] = np.nan
    rows = np.flatnonzero(rng.random(n) < 0.7) if seed % 2 else np.arange(n)
    for k in (1, 3, 10, n + 5):
        order = np.lexsort(keys)
        want = order[np.isin(order, rows)][:k]
        assert first_in_order(rows, keys, k).tolist() == want.tolist()


@pytest.mark.parametrize("distinct", [1, 3, 100_000])
def test_groups_are_the_distinct_rows(distinct: int) -> None:
    """estimate/vector.py groups rows by dense codes (no sort; four columns of 100,000 values overflow a plain
    mixed-radix code and are renumbered): the groups are np.unique's, in its order."""
    from greentrain.estimate.vector import _groups

    rng = np.random.default_rng(distinct)
    cols = [rng.integers(0, distinct, 100_000) for _ in range(4)]
    cols[1] = cols[1] * 2 + 5  # sparse values
    first, inverse = _groups(cols)
    _, want = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
    assert inverse.tolist() == want.reshape(-1).tolist()
    for c in cols:
        assert (c[first][inverse] == c).all()
