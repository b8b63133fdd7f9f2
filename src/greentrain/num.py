"""Numbers that are a float for one strategy or run, or a column of floats (ndarray) for many at once.

A formula written once over ``Num`` serves both: estimate_step and footprint() call it with floats,
the vectorised search (estimate/vector.py, footprint_arrays) with columns. The helpers below use Python's
operations on floats (a numpy call on a float costs ~1 us, and one estimate makes hundreds) and numpy's as
soon as one argument is a column. A root leaf module, so that every floor (footprint/, estimate/) can use it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float64]
# A float (or int, or bool), or a column of them. Typed Any: the arithmetic of a formula is the same for both,
# and which one a call gets is decided by its caller (one strategy, or a table of them).
Num: TypeAlias = Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_ARRAY = np.ndarray
R = TypeVar("R", bound="DataclassInstance")


def is_column(*xs: Any) -> bool:
    """Whether any argument is a column (an ndarray)."""
    return any(isinstance(x, _ARRAY) for x in xs)


def where(cond: Num, a: Num, b: Num) -> Num:
    """np.where when the condition is a column; a scalar condition picks ``a`` or ``b`` whole (no copy)."""
    if isinstance(cond, _ARRAY):
        return np.where(cond, a, b)
    return a if cond else b


def select(cond: Num, if_true: Callable[[], Num], if_false: Callable[[], Num]) -> Num:
    """where(cond, if_true(), if_false()), evaluating only the branch a scalar condition takes."""
    if isinstance(cond, _ARRAY):
        return np.where(cond, if_true(), if_false())
    return if_true() if cond else if_false()


def maximum(a: Num, b: Num) -> Num:
    if isinstance(a, _ARRAY) or isinstance(b, _ARRAY):
        return np.maximum(a, b)
    return a if a >= b else b


def minimum(a: Num, b: Num) -> Num:
    if isinstance(a, _ARRAY) or isinstance(b, _ARRAY):
        return np.minimum(a, b)
    return a if a <= b else b


def floor(x: Num) -> Num:
    return np.floor(x) if isinstance(x, _ARRAY) else float(math.floor(x))


def ceil(x: Num) -> Num:
    return np.ceil(x) if isinstance(x, _ARRAY) else float(math.ceil(x))


def log2(x: Num) -> Num:
    return np.log2(x) if isinstance(x, _ARRAY) else math.log2(x)


def take(record: R, index: Any) -> R:
    """A dataclass of columns at the rows ``index`` (a tuple of columns element by element): the vectorised
    estimator evaluates a record once per group of strategies and gathers it to every row."""
    def at(x: Any) -> Any:
        return tuple(at(v) for v in x) if isinstance(x, tuple) else x[index]
    return type(record)(**{f.name: at(getattr(record, f.name)) for f in dataclasses.fields(record)})


def all_true(cond: Num) -> bool:
    """Whether a condition holds for the float, or for every row of the column (input checks)."""
    return bool(np.all(cond)) if isinstance(cond, _ARRAY) else bool(cond)
