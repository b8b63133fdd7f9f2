"""The device mesh of one rank: a torch DeviceMesh with dims ("x", "y") and the collective group of any
DimSharding (seed `get_dim_sharding_group`: the devices with the same (x // x_shards, y // y_shards)).

A row or a column of the mesh is a DeviceMesh dim group; the whole mesh is the world; any other block
(a sharding that uses only part of an axis, e.g. ``1x2`` on a 4-wide axis) gets its own ``new_group``,
created by every rank in the same order as torch.distributed requires.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

if TYPE_CHECKING:  # torch.distributed.tensor costs about 1 s to import (sympy): only where it is used
    from torch.distributed.tensor import Replicate, Shard

from greentrain.emulate.recorder import Group
from greentrain.emulate.sharding import DimSharding, Mesh2D, TensorSharding


class MeshContext:
    """One rank's view of a Mesh2D: its coordinates, DeviceMesh, groups and device."""

    def __init__(self, mesh: Mesh2D, device: torch.device) -> None:
        if dist.get_world_size() < mesh.num_devices:
            raise RuntimeError(f"mesh {mesh} needs {mesh.num_devices} ranks, the world has {dist.get_world_size()}")
        self.mesh = mesh
        self.device = device
        self.rank = dist.get_rank()
        self.device_mesh: DeviceMesh = init_device_mesh(
            device.type, (mesh.x_size, mesh.y_size), mesh_dim_names=("x", "y"))
        self._groups: dict[tuple[int, int], Group] = {}

    def group(self, ds: DimSharding) -> Group:
        """The group exchanging the pieces of a dim sharded as ``ds``."""
        key = (ds.x_shards, ds.y_shards)
        if key not in self._groups:
            self._groups[key] = self._make_group(ds)
        return self._groups[key]

    def _make_group(self, ds: DimSharding) -> Group:
        ranks = ds.group_ranks(self.mesh, self.rank)
        assert list(ranks) == sorted(ranks), "shard-index order must be rank order"
        index = ranks.index(self.rank)
        m = self.mesh
        pg: Any = None
        if len(ranks) == 1:
            pg = None
        elif ds.x_shards == m.x_size and ds.y_shards == m.y_size and dist.get_world_size() == m.num_devices:
            pg = dist.group.WORLD
        elif ds.x_shards == 1 and ds.y_shards == m.y_size:
            pg = self.device_mesh.get_group("y")
        elif ds.x_shards == m.x_size and ds.y_shards == 1:
            pg = self.device_mesh.get_group("x")
        else:
            for members in ds.all_groups(m):  # every rank creates every group, in the same order
                created = dist.new_group(list(members))
                if self.rank in members:
                    pg = created
        return Group(ranks=ranks, index=index, pg=pg)

    @property
    def world(self) -> Group:
        return self.group(DimSharding(x_shards=self.mesh.x_size, y_shards=self.mesh.y_size))


def placements(ts: TensorSharding, mesh: Mesh2D) -> tuple[Shard | Replicate, Shard | Replicate] | None:
    """The DTensor placements on the ("x", "y") mesh equal to ``ts``, or None when the seed's sharding uses
    only part of a mesh axis (a block of a 4-wide axis has no DTensor placement)."""
    from torch.distributed.tensor import Replicate, Shard

    out: list[Shard | Replicate] = []
    for axis_size, shards in ((mesh.x_size, [d.x_shards for d in ts.dims]),
                              (mesh.y_size, [d.y_shards for d in ts.dims])):
        sharded = [i for i, s in enumerate(shards) if s > 1]
        if not sharded:
            out.append(Replicate())
        elif len(sharded) == 1 and shards[sharded[0]] == axis_size:
            out.append(Shard(sharded[0]))
        else:
            return None
    return out[0], out[1]
