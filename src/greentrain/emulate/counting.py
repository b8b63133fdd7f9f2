"""Counting mode: every rank of a mesh run one after the other in this process on PyTorch's fake process
group, with meta tensors: no data, no arithmetic, no other process; every collective, send and matmul
still passes through the recorder, which counts bytes and FLOPs from the shapes, as on real ranks.

The fake backend (torch.testing._internal.distributed.fake_pg: ``init_process_group("fake", store=
FakeStore())``) completes every collective at once; it is PyTorch's own tool for tracing programs of
thousands of ranks in one process. Each rank gets its own world (rank r of N) and only the groups it
belongs to (the fake store needs no rendezvous), so a rank costs two process-group creations and its
program's calls: 1,024 ranks in seconds (docs/emulate.md). tests/distributed checks that the counts equal
those of real gloo ranks, rank by rank, where both run (16 ranks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from greentrain.emulate import mesh3d
from greentrain.emulate.cases import MAX_COUNTED_RANKS, REL_TOLERANCE, MeshStepCase
from greentrain.emulate.recorder import Recorder
from greentrain.emulate.results import EmulationResult, RankResult

__all__ = ["MAX_COUNTED_RANKS", "count"]


def _fake_world(rank: int, world: int) -> None:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)


def _new_group(ranks: tuple[int, ...]) -> Any:
    return dist.new_group(list(ranks))


def count_rank(case: MeshStepCase, rank: int) -> RankResult:
    """One rank of ``case`` on a fake world of case.world_size ranks: its statistics and collectives."""
    _fake_world(rank, case.world_size)
    try:
        rec = Recorder(device=torch.device("meta"))
        mesh3d.run(case, rank, rec, _new_group, check=False)
    finally:
        dist.destroy_process_group()
    return RankResult(rank=rank, stats=rec.statistics(), collectives=tuple(rec.records), comm_time_s=0.0,
                      time_s=0.0, max_abs_error=0.0, max_rel_error=0.0)


def count(case: MeshStepCase, progress: Callable[[int, int], None] | None = None) -> EmulationResult:
    """Every rank of ``case`` counted in this process (``progress(done, total)`` after each rank). Refuses
    to run inside an initialised torch.distributed world (it would replace it)."""
    if dist.is_initialized():
        raise RuntimeError("counting mode needs this process outside torch.distributed (it creates fake worlds)")
    ranks = []
    for r in range(case.world_size):
        ranks.append(count_rank(case, r))
        if progress is not None:
            progress(r + 1, case.world_size)
    return EmulationResult(label=case.label, policy=case.policy, backend="fake (counted)",
                           world_size=case.world_size, ranks=tuple(ranks), tolerance=REL_TOLERANCE)
