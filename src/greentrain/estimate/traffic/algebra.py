"""Tensor-layout algebra: FLOP and network traffic of distributed tensor ops, summed over the cluster.

A re-implementation of the accounting rules of davidsj/ml_par_sim ``lib.py`` (seed 001; rules transcribed in
shared/reference/seed-systems.md §1.4). The seed kept every axis in a global set ``ParallelAxis.ALL``; here a
``Mesh`` object owns its axes and its meter, so several models can be built in one process.

Vocabulary:
- ``ParallelAxis``: a mesh axis with a degree. A *rotational* axis (pipeline) walks a virtual dim
  (layers) in stages: data crosses a stage boundary ``deg - 1`` times per ``virtual_size`` steps.
- ``DataDim``: a logical tensor dim, optionally laid out (sharded) over one axis. ``autoreduce`` dims are
  summed over by ``dot`` (the contracted dim of a matmul).
- ``Data``: a distributed tensor. Each mesh axis is used by one of its dims, *scattered* (the data is split
  over the axis with no logical dim) or *broadcast* (replicated).

Counts are elements, not bytes, and are totals over the whole cluster, per direction (fwd, bwd).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from greentrain.errors import ConfigError

METRICS = ("FLOP", "Tx", "Rx")
DIRECTIONS = ("fwd", "bwd")
_dim_ids = itertools.count()


class LayoutError(ValueError):
    """The algebra was used wrongly (a programming error in a model built on it, not a user input)."""


@dataclass(frozen=True, slots=True, eq=False)
class ParallelAxis:
    """One mesh axis. Identity is the object: two axes with one name are still two axes."""

    name: str
    deg: int
    rotational: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.deg, int) and self.deg >= 1):
            raise ConfigError(f"axis {self.name}", self.deg, "degree must be a positive integer")

    def __repr__(self) -> str:
        return f"{self.name}: {self.deg}"


@dataclass(frozen=True, slots=True, eq=False)
class DataDim:
    """A logical tensor dim of global ``size``, sharded over ``axis`` (None: local to every chip)."""

    name: str
    size: int
    axis: ParallelAxis | None = None
    virtual_size: int | None = None  # rotational axes only: the number of steps walked (layers)
    autoreduce: bool = False
    seq: int = field(default_factory=lambda: next(_dim_ids))  # creation order: a deterministic sort key

    def __post_init__(self) -> None:
        ax = self.axis
        if ax is None or not ax.rotational:
            if self.virtual_size is not None:
                raise LayoutError(f"dim {self.name}: virtual_size needs a rotational axis")
            if ax is not None and self.size % ax.deg != 0:
                raise ConfigError(f"dim {self.name}", self.size,
                                  f"must be divisible by the {ax.name} degree {ax.deg}")
            return
        if self.size != ax.deg:
            raise LayoutError(f"dim {self.name}: size {self.size} must equal the rotational degree {ax.deg}")
        if self.virtual_size is None or self.virtual_size % ax.deg != 0:
            raise ConfigError(f"dim {self.name}", self.virtual_size,
                              f"virtual size must be divisible by the {ax.name} degree {ax.deg}")

    @property
    def local_size(self) -> int:
        """Elements of this dim on one chip (a rotational dim holds one step at a time)."""
        if self.axis is None:
            return self.size
        return 1 if self.axis.rotational else self.size // self.axis.deg

    def __add__(self, other: DataDim) -> DataDim:
        """Concatenation along one axis (for example attention heads + FFN units, reduced together)."""
        if self.axis is not other.axis or (self.axis is not None and self.axis.rotational):
            raise LayoutError(f"cannot concatenate {self.name} and {other.name} (axes differ or rotate)")
        return DataDim(f"{self.name}+{other.name}", self.size + other.size, self.axis)

    def __repr__(self) -> str:
        virtual = f"/{self.virtual_size}" if self.virtual_size is not None else ""
        return f"{self.name}: {self.size}{virtual}"


def _prod_deg(axes: Iterable[ParallelAxis]) -> int:
    return math.prod(a.deg for a in axes)


def _prod_size(dims: Iterable[DataDim]) -> int:
    return math.prod(d.size for d in dims)


def _distinct_axes(dims: Iterable[DataDim]) -> frozenset[ParallelAxis]:
    axes = [d.axis for d in dims if d.axis is not None]
    if len(set(axes)) != len(axes):
        raise LayoutError(f"two dims laid out over one axis: {sorted(dims, key=lambda d: d.seq)}")
    return frozenset(axes)


class Meter:
    """Counts (metric, direction) -> elements; nested scopes multiply their counts into the parent on exit.

    Counts stay Python ints (exact) until a scope multiplies them by a float, as in the seed.
    """

    def __init__(self) -> None:
        self._stack: list[tuple[dict[tuple[str, str], float], float]] = [({}, 1)]

    def add(self, metric: str, direction: str, value: float) -> None:
        counts = self._stack[-1][0]
        counts[(metric, direction)] = counts.get((metric, direction), 0) + value

    @contextmanager
    def scope(self, multiplier: float) -> Iterator[None]:
        """Everything counted inside happens ``multiplier`` times (per layer, per token, per batch...)."""
        self._stack.append(({}, multiplier))
        try:
            yield
        finally:
            child, mult = self._stack.pop()
            parent = self._stack[-1][0]
            for key, value in child.items():
                parent[key] = parent.get(key, 0) + mult * value

    def get(self, metric: str, direction: str) -> float:
        return self._stack[-1][0].get((metric, direction), 0)


class Mesh:
    """The axes of one cluster layout and the meter its ops count into (the seed's global state, local)."""

    def __init__(self, axes: Sequence[ParallelAxis]) -> None:
        names = [a.name for a in axes]
        if len(set(names)) != len(names):
            raise LayoutError(f"duplicate axis names: {names}")
        self.axes: tuple[ParallelAxis, ...] = tuple(axes)
        self.axis_set = frozenset(axes)
        self.meter = Meter()

    @property
    def size(self) -> int:
        """Chips in the mesh: the product of all degrees."""
        return _prod_deg(self.axes)

    def data(self, *dims: DataDim, scatter: Iterable[ParallelAxis] = ()) -> Data:
        return Data(self, dims, scatter)

    def __repr__(self) -> str:
        return "{" + ", ".join(map(repr, self.axes)) + "}"


class Data:
    """A distributed tensor: dims (each sharded over at most one axis), scattered axes, broadcast axes."""

    __slots__ = ("bcast_axes", "dims", "mesh", "scatter_axes", "used_axes")

    def __init__(self, mesh: Mesh, dims: Iterable[DataDim], scatter: Iterable[ParallelAxis] = ()) -> None:
        dim_list = list(dims)
        if len(set(dim_list)) != len(dim_list):
            raise LayoutError(f"repeated dim in {dim_list}")
        scatter_list = list(scatter)
        if len(set(scatter_list)) != len(scatter_list):
            raise LayoutError(f"repeated scatter axis in {scatter_list}")
        self.mesh = mesh
        self.dims = frozenset(dim_list)
        self.used_axes = _distinct_axes(dim_list)
        self.scatter_axes = frozenset(scatter_list)
        self.bcast_axes = mesh.axis_set - (self.used_axes | self.scatter_axes)
        if not self.used_axes.isdisjoint(self.scatter_axes):
            raise LayoutError(f"an axis is both used and scattered in {self}")
        if not (self.used_axes | self.scatter_axes) <= mesh.axis_set:
            raise LayoutError(f"axes outside the mesh in {self._dims_repr()}")
        local = math.prod(d.local_size for d in dim_list)
        scatter_deg = _prod_deg(self.scatter_axes)
        if local % scatter_deg != 0:
            names = ", ".join(a.name for a in self._sorted_axes(self.scatter_axes))
            raise ConfigError(f"layout {self._dims_repr()}", local,
                              f"local elements must divide by the scatter degree {scatter_deg} ({names})")

    # ---- helpers -------------------------------------------------------------------------------------
    def _sorted_axes(self, axes: Iterable[ParallelAxis]) -> list[ParallelAxis]:
        order = {a: i for i, a in enumerate(self.mesh.axes)}
        return sorted(axes, key=order.__getitem__)

    def _dims_repr(self) -> str:
        return "(" + ", ".join(map(repr, sorted(self.dims, key=lambda d: d.seq))) + ")"

    def _count(self, metric: str, direction: str, value: float) -> None:
        self.mesh.meter.add(metric, direction, value)

    def __repr__(self) -> str:
        out = self._dims_repr()[:-1]
        if self.bcast_axes:
            out += "; bcast=" + ", ".join(map(repr, self._sorted_axes(self.bcast_axes)))
        if self.scatter_axes:
            out += "; scatt=" + ", ".join(map(repr, self._sorted_axes(self.scatter_axes)))
        return out + ")"

    def _require_unscattered(self, what: str) -> None:
        if self.scatter_axes:
            raise LayoutError(f"{what} of scattered data {self}: bcast it first")

    # ---- primitives ----------------------------------------------------------------------------------
    def __mul__(self, other: Data) -> Data:
        """Pointwise product, broadcasting each operand over the other's dims (seed-systems.md §1.4 "mul").

        Fwd: one multiply per element of the result, S = Π dim sizes × Π degrees of the axes no dim uses.
        Bwd: 2S per input (its gradient, and the reduction undoing the local broadcast), so 4S.
        """
        if other.mesh is not self.mesh:
            raise LayoutError("operands from different meshes")
        self._require_unscattered("mul")
        other._require_unscattered("mul")
        dims = self.dims | other.dims
        used = _distinct_axes(dims)
        size = _prod_size(dims) * _prod_deg(self.mesh.axis_set - used)
        self._count("FLOP", "fwd", size)
        self._count("FLOP", "bwd", 2 * size)  # gradient of self, and its reduction
        self._count("FLOP", "bwd", 2 * size)  # gradient of other, and its reduction
        return Data(self.mesh, dims)

    def reduce(self, dim: DataDim, transpose: tuple[DataDim, DataDim] | None = None) -> Data:
        """Sum over ``dim`` (seed-systems.md §1.4 "reduce"); the result is left scattered over the freed axes.

        I = Π other dim sizes × Π broadcast degrees, J = dim.size, K = degree of dim's axis (1 if local).
        Fwd: I·(J−1) additions, I·(K−1) elements sent and received (a reduce-scatter).
        Bwd (a broadcast of the gradient): I·[K>1] sent, I·(K−1) received, no FLOP.
        ``transpose=(from_dim, to_dim)``: from_dim is renamed to_dim and takes over dim's axis (the reduce
        scatters along it), with no extra traffic.
        """
        if dim not in self.dims:
            raise LayoutError(f"reduce over {dim!r}, not a dim of {self}")
        dims = self.dims - {dim}
        big_i = _prod_size(dims) * _prod_deg(self.bcast_axes)
        big_j = dim.size
        big_k = dim.axis.deg if dim.axis is not None else 1
        self._count("FLOP", "fwd", big_i * (big_j - 1))
        self._count("Tx", "fwd", big_i * (big_k - 1))
        self._count("Rx", "fwd", big_i * (big_k - 1))
        self._count("FLOP", "bwd", 0)
        self._count("Tx", "bwd", big_i * (big_k > 1))
        self._count("Rx", "bwd", big_i * (big_k - 1))
        if transpose is not None:
            from_dim, to_dim = transpose
            if from_dim not in dims or from_dim.size != to_dim.size or to_dim.axis is not dim.axis:
                raise LayoutError(f"bad transpose {from_dim!r} -> {to_dim!r} while reducing {dim!r}")
            dims = (dims - {from_dim}) | {to_dim}
        scatter = self.mesh.axis_set - (_distinct_axes(dims) | self.bcast_axes)
        return Data(self.mesh, dims, scatter)

    def bcast(self, rotate: Iterable[DataDim] = ()) -> Data:
        """Gather the scattered axes (seed-systems.md §1.4 "bcast"); ``rotate`` dims move between ranks.

        I = Π dim sizes, J = Π broadcast degrees, K = Π scattered degrees. β, the boundary frequency, is
        1 − Π stay: a rotational dim stays with 1 − (deg−1)/virtual_size (pipeline stage crossings), an
        axis dim with 1/deg (expert routing). Fwd: I·max([K>1], β) sent, I·J·(K+β−1) received.
        Bwd (a reduce of the gradient): I·J·(K+β−1) additions, sent and received.
        """
        stay = 1.0
        for dim in rotate:
            if dim not in self.dims:
                raise LayoutError(f"rotate over {dim!r}, not a dim of {self}")
            if dim.axis is None:
                continue
            if dim.axis.rotational:
                assert dim.virtual_size is not None
                stay *= 1 - (dim.axis.deg - 1) / dim.virtual_size
            else:
                stay *= 1 / dim.axis.deg
        beta = 1 - stay
        big_i = _prod_size(self.dims)
        big_j = _prod_deg(self.bcast_axes)
        big_k = _prod_deg(self.scatter_axes)
        self._count("FLOP", "fwd", 0)
        self._count("Tx", "fwd", big_i * max(big_k > 1, beta))
        self._count("Rx", "fwd", big_i * big_j * (big_k + beta - 1))
        for metric in METRICS:
            self._count(metric, "bwd", big_i * big_j * (big_k + beta - 1))
        return Data(self.mesh, self.dims)

    def allreduce(self, dim: DataDim, transpose: tuple[DataDim, DataDim] | None = None,
                  rotate: Iterable[DataDim] = ()) -> Data:
        """reduce, then bcast: every holder ends with the sum."""
        return self.reduce(dim, transpose).bcast(rotate=rotate)

    def dot(self, other: Data, transpose: tuple[DataDim, DataDim] | None = None) -> Data:
        """A matmul: ``self * other``, then allreduce over every shared autoreduce dim, local dims first.

        Within each group dims are taken in creation order (the seed iterated a set; its models never
        contract two dims of one group, so the order does not change their counts).
        """
        out = self * other
        shared = sorted((d for d in self.dims & other.dims if d.autoreduce), key=lambda d: d.seq)
        for dim in [d for d in shared if d.axis is None] + [d for d in shared if d.axis is not None]:
            out = out.allreduce(dim, transpose=transpose)
        return out

    def __matmul__(self, other: Data) -> Data:
        return self.dot(other)

    def scatter_transpose(self, from_dim: DataDim, to_dim: DataDim) -> Data:
        """Rename from_dim to the local dim to_dim; from_dim's axis becomes scattered. Free."""
        if from_dim not in self.dims or to_dim in self.dims or from_dim.size != to_dim.size:
            raise LayoutError(f"bad scatter_transpose {from_dim!r} -> {to_dim!r} of {self}")
        if to_dim.axis is not None:
            raise LayoutError(f"scatter_transpose target {to_dim!r} must be local")
        scatter = set(self.scatter_axes)
        if from_dim.axis is not None:
            scatter.add(from_dim.axis)
        return Data(self.mesh, (self.dims - {from_dim}) | {to_dim}, scatter)

    def cat(self, other: Data, cat_dims: tuple[DataDim, DataDim]) -> tuple[Data, DataDim]:
        """Concatenate along cat_dims[0] + cat_dims[1], the only dims in which the operands differ."""
        self._require_unscattered("cat")
        other._require_unscattered("cat")
        mine, theirs = cat_dims
        if self.dims - other.dims != {mine} or other.dims - self.dims != {theirs}:
            raise LayoutError(f"cat of {self} and {other} along {mine!r}+{theirs!r}")
        joined = mine + theirs
        return Data(self.mesh, (self.dims - {mine}) | {joined}), joined

    def reduce_with(self, other: Data, dims: tuple[DataDim, DataDim]) -> Data:
        """Sum self over dims[0] and other over dims[1] together (one concatenated reduce)."""
        catted, joined = self.cat(other, dims)
        return catted.reduce(joined)
