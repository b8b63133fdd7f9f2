"""Tensor sharding over a 2-D device mesh, in seed 003's terms (levendlee/ml-labs `parallelism/sharding.py`).

No torch here: specs are parsed and checked before any process starts.

A mesh of shape (x_size, y_size) numbers its devices row-major: rank = x * y_size + y (seed `mesh.py`).
A tensor dim is sharded into ``x_shards`` pieces along mesh x and ``y_shards`` along mesh y, written
``XxY`` (``1x4``: four shards along y). Seed `shard_tensor`: the device (x, y) holds piece
    shard_index = (x % x_shards) * y_shards + (y % y_shards)         of  x_shards * y_shards  pieces,
and seed `get_dim_sharding_group`: the devices exchanging the pieces of that dim are those with the same
    group_id = (x // x_shards, y // y_shards).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from greentrain.errors import ConfigError

_XY = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def _parse_xy(text: str, field: str) -> tuple[int, int]:
    match = _XY.match(text)
    if match is None:
        raise ConfigError(field, text, "must be written XxY with two positive integers, e.g. 1x4")
    x, y = int(match.group(1)), int(match.group(2))
    if x < 1 or y < 1:
        raise ConfigError(field, text, "shard counts must be >= 1")
    return x, y


@dataclass(frozen=True, slots=True, kw_only=True)
class Mesh2D:
    """A 2-D device mesh; device (x, y) is rank x * y_size + y."""

    x_size: int
    y_size: int

    def __post_init__(self) -> None:
        if self.x_size < 1 or self.y_size < 1:
            raise ConfigError("mesh", f"{self.x_size}x{self.y_size}", "both mesh sizes must be >= 1")

    @classmethod
    def parse(cls, text: str, field: str = "mesh") -> Mesh2D:
        x, y = _parse_xy(text, field)
        return cls(x_size=x, y_size=y)

    @property
    def num_devices(self) -> int:
        return self.x_size * self.y_size

    def coords(self, rank: int) -> tuple[int, int]:
        return divmod(rank, self.y_size)

    def rank(self, x: int, y: int) -> int:
        return x * self.y_size + y

    def __str__(self) -> str:
        return f"{self.x_size}x{self.y_size}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DimSharding:
    """Shards of one tensor dim along mesh x and mesh y (seed `DimSharding`)."""

    x_shards: int = 1
    y_shards: int = 1

    @classmethod
    def parse(cls, text: str, field: str) -> DimSharding:
        x, y = _parse_xy(text, field)
        return cls(x_shards=x, y_shards=y)

    @property
    def num_shards(self) -> int:
        return self.x_shards * self.y_shards

    @property
    def full(self) -> bool:
        return self.num_shards == 1

    def shard_index(self, mesh: Mesh2D, rank: int) -> int:
        x, y = mesh.coords(rank)
        return (x % self.x_shards) * self.y_shards + (y % self.y_shards)

    def group_id(self, mesh: Mesh2D, rank: int) -> tuple[int, int]:
        x, y = mesh.coords(rank)
        return (x // self.x_shards, y // self.y_shards)

    def group_ranks(self, mesh: Mesh2D, rank: int) -> tuple[int, ...]:
        """The ranks holding the different pieces of this dim with ``rank``, in shard-index order."""
        gid = self.group_id(mesh, rank)
        members = [r for r in range(mesh.num_devices) if self.group_id(mesh, r) == gid]
        return tuple(sorted(members, key=lambda r: self.shard_index(mesh, r)))

    def all_groups(self, mesh: Mesh2D) -> tuple[tuple[int, ...], ...]:
        """Every group of this dim's sharding, in a fixed order (each rank's group appears once)."""
        seen: dict[tuple[int, int], tuple[int, ...]] = {}
        for r in range(mesh.num_devices):
            seen.setdefault(self.group_id(mesh, r), self.group_ranks(mesh, r))
        return tuple(seen.values())

    def __str__(self) -> str:
        return f"{self.x_shards}x{self.y_shards}"


FULL = DimSharding()


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorSharding:
    """One DimSharding per tensor dim (seed `TensorSharding`)."""

    dims: tuple[DimSharding, ...]

    @classmethod
    def parse(cls, text: str, field: str) -> TensorSharding:
        parts = [p for p in text.split(",")]
        if not text.strip() or any(not p.strip() for p in parts):
            raise ConfigError(field, text, "must be comma-separated XxY per tensor dim, e.g. 1x1,1x4")
        return cls(dims=tuple(DimSharding.parse(p, field) for p in parts))

    @classmethod
    def of(cls, *dims: str) -> TensorSharding:
        return cls(dims=tuple(DimSharding.parse(d, "sharding") for d in dims))

    @property
    def full(self) -> bool:
        return all(d.full for d in self.dims)

    def check(self, mesh: Mesh2D, shape: tuple[int, ...], field: str) -> None:
        """Raise ConfigError unless the sharding fits ``mesh`` and divides ``shape``."""
        if len(self.dims) != len(shape):
            raise ConfigError(field, str(self), f"needs {len(shape)} dims for a tensor of shape {shape}")
        for i, (d, size) in enumerate(zip(self.dims, shape, strict=True)):
            if mesh.x_size % d.x_shards or mesh.y_size % d.y_shards:
                raise ConfigError(field, str(self), f"dim {i}: {d} does not divide the {mesh} mesh")
            if size % d.num_shards:
                raise ConfigError(field, str(self), f"dim {i} of size {size} is not divisible by {d.num_shards}")
        if sum(d.x_shards > 1 for d in self.dims) > 1 or sum(d.y_shards > 1 for d in self.dims) > 1:
            raise ConfigError(field, str(self), "each mesh axis may shard at most one dim of a tensor")

    def local_slices(self, mesh: Mesh2D, shape: tuple[int, ...], rank: int) -> tuple[slice, ...]:
        """The slice of the full tensor that ``rank`` holds (seed `shard_tensor`)."""
        out = []
        for d, size in zip(self.dims, shape, strict=True):
            step = size // d.num_shards
            i = d.shard_index(mesh, rank)
            out.append(slice(i * step, (i + 1) * step))
        return tuple(out)

    def local_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(size // d.num_shards for d, size in zip(self.dims, shape, strict=True))

    def __str__(self) -> str:
        return ",".join(str(d) for d in self.dims)
