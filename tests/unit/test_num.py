"""greentrain/num.py: one formula over a float or a column. Floats stay Python floats (an estimate makes hundreds
of these calls; a numpy scalar would cost a microsecond each), columns give columns, and take() gathers a record
of columns the way the vectorised estimator does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from greentrain import num


def test_floats_stay_python_floats() -> None:
    for got in (num.where(True, 1.0, 2.0), num.maximum(1.0, 2.0), num.minimum(1.0, 2.0), num.ceil(1.5),
                num.floor(1.5), num.log2(8.0), num.select(False, lambda: 1.0, lambda: 2.0)):
        assert type(got) is float
    assert (num.ceil(1.5), num.floor(1.5), num.log2(8.0)) == (2.0, 1.0, 3.0)


def test_columns_give_columns_and_agree_with_floats() -> None:
    a, b = np.array([1.0, 5.0, 3.0]), np.array([4.0, 2.0, 3.0])
    cond = a > b
    for f in (lambda x, y, c: num.where(c, x, y), lambda x, y, c: num.maximum(x, y),
              lambda x, y, c: num.minimum(x, y), lambda x, y, c: num.select(c, lambda: x * 2, lambda: y - 1)):
        col = f(a, b, cond)
        assert isinstance(col, np.ndarray)
        assert col.tolist() == [f(float(x), float(y), bool(c)) for x, y, c in zip(a, b, cond, strict=True)]
    assert num.is_column(1.0, a) and not num.is_column(1.0, 2)
    assert num.all_true(a > 0) and not num.all_true(a > 2) and num.all_true(True)


def test_select_evaluates_only_the_branch_a_float_takes() -> None:
    def boom() -> Any:
        raise AssertionError("the branch not taken ran")
    assert num.select(True, lambda: 1.0, boom) == 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    x: Any
    parts: tuple[Any, Any]


def test_take_gathers_every_column_and_tuple() -> None:
    r = _Record(x=np.array([10.0, 20.0, 30.0]), parts=(np.array([1, 2, 3]), np.array([[4], [5], [6]])))
    got = num.take(r, np.array([2, 0, 2]))
    assert isinstance(got, _Record)
    assert got.x.tolist() == [30.0, 10.0, 30.0]
    assert got.parts[0].tolist() == [3, 1, 3] and got.parts[1].tolist() == [[6], [4], [6]]
    grid = num.take(r, np.array([[1], [0]]))  # a column index gives a column (the estimator's grid)
    assert grid.x.shape == (2, 1) and grid.x[:, 0].tolist() == [20.0, 10.0]
