"""The recorder: every collective and every local matmul of one rank goes through it and is counted.

``collectives="native"`` calls torch.distributed's own collectives (gloo/NCCL pick the algorithm);
``collectives="ring"`` runs them as explicit rings of send/recv (Patarasuk & Yuan 2009; Thakur et al. 2005,
Table 1) and counts the bytes each rank really sends, so that estimate.comm's ring prediction can be checked
against a count. ``enabled=False`` issues the same torch.distributed calls with no timing and no records:
the baseline of the recorder's overhead (benchmarks/bench_emulate.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist

from greentrain.emulate.results import CollectiveRecord, Statistics
from greentrain.estimate.comm import Collective, ring_bytes_per_rank

CollectiveImpl = Literal["native", "ring"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """A collective group: global ranks in shard-index (= ascending rank) order and this rank's position."""

    ranks: tuple[int, ...]
    index: int
    pg: Any  # torch ProcessGroup, or None for a group of one

    @property
    def size(self) -> int:
        return len(self.ranks)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Recorder:
    """Counts one rank's work in seed 003's terms (greentrain.emulate.results)."""

    def __init__(self, *, device: torch.device, enabled: bool = True, collectives: CollectiveImpl = "native"):
        self.device = device
        self.enabled = enabled
        self.impl = collectives
        self.flops = 0
        self.h2d_messages = 0
        self.h2d_bytes = 0
        self.records: list[CollectiveRecord] = []
        self._pending: list[Any] = []

    # -- host to device and compute ---------------------------------------------------------------------
    def give(self, t: torch.Tensor) -> torch.Tensor:
        """A shard the host hands this device: one h2d message of its bytes."""
        if self.enabled:
            self.h2d_messages += 1
            self.h2d_bytes += _nbytes(t)
        return t.to(self.device)

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a (..., k) @ b (k, n), counted as 2·m·k·n FLOPs with m = the product of a's leading dims."""
        if self.enabled:
            k, n = b.shape
            self.flops += 2 * (a.numel() // k) * k * n
        if a.device.type == "meta":  # counting mode (emulate/counting.py): the shape without the meta kernel
            return torch.empty((*a.shape[:-1], b.shape[1]), dtype=a.dtype, device=a.device)
        return a @ b

    # -- collectives ------------------------------------------------------------------------------------
    def all_gather(self, t: torch.Tensor, group: Group) -> list[torch.Tensor]:
        """Every member's ``t``, in group order."""
        if group.size == 1:
            return [t]
        t = t.contiguous()
        start = self._start()
        wire = 0
        if self.enabled and self.impl == "ring":
            parts, wire = self._ring_all_gather(t, group)
        else:
            parts = [torch.empty_like(t) for _ in group.ranks]
            dist.all_gather(parts, t, group=group.pg)
        self._record(Collective.ALL_GATHER, group, _nbytes(t), group.size * _nbytes(t), group.size * _nbytes(t),
                     _nbytes(t), wire, start)
        return parts

    def all_reduce(self, t: torch.Tensor, group: Group) -> torch.Tensor:
        """The sum of every member's ``t``."""
        if group.size == 1:
            return t
        t = t.contiguous()
        start = self._start()
        wire = 0
        if self.enabled and self.impl == "ring":
            out, wire = self._ring_all_reduce(t, group)
        else:
            out = t.clone()
            dist.all_reduce(out, group=group.pg)
        self._record(Collective.ALL_REDUCE, group, _nbytes(t), _nbytes(t), _nbytes(t), _nbytes(t), wire, start)
        return out

    def reduce_scatter(self, t: torch.Tensor, group: Group, dim: int) -> torch.Tensor:
        """Piece ``group.index`` (along ``dim``) of the sum of every member's ``t``."""
        if group.size == 1:
            return t
        chunks = [c.contiguous() for c in t.chunk(group.size, dim)]
        start = self._start()
        wire = 0
        if self.enabled and self.impl == "ring":
            out, wire = self._ring_reduce_scatter(chunks, group)
        else:
            out = torch.empty_like(chunks[0])
            dist.reduce_scatter(out, chunks, group=group.pg)
        size = _nbytes(t)
        self._record(Collective.REDUCE_SCATTER, group, size, size // group.size, size, size // group.size, wire,
                     start)
        return out

    def isend(self, t: torch.Tensor, dst: int) -> None:
        """Point-to-point send; completed by ``flush`` (never blocks, so 1F1B cannot deadlock)."""
        t = t.contiguous()
        start = self._start()
        self._pending.append((dist.isend(t, dst), t))
        if self.enabled:
            n = _nbytes(t)
            self.records.append(CollectiveRecord(op=Collective.SEND_RECV.value, group_size=2, in_bytes=n,
                                                 out_bytes=0, payload_bytes=n, d2d_messages=0, d2d_bytes=0,
                                                 ring_bytes=ring_bytes_per_rank(Collective.SEND_RECV, 2, n),
                                                 wire_bytes=n, time_s=time.perf_counter() - start))

    def recv(self, shape: tuple[int, ...], src: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        out = torch.empty(shape, dtype=dtype, device=self.device)
        start = self._start()
        dist.recv(out, src)
        if self.enabled:
            n = _nbytes(out)
            self.records.append(CollectiveRecord(op=Collective.SEND_RECV.value, group_size=2, in_bytes=0,
                                                 out_bytes=n, payload_bytes=n, d2d_messages=1, d2d_bytes=n,
                                                 ring_bytes=0.0, wire_bytes=0, time_s=time.perf_counter() - start))
        return out

    def flush(self) -> None:
        for work, _ in self._pending:
            work.wait()
        self._pending.clear()

    # -- results ----------------------------------------------------------------------------------------
    def statistics(self) -> Statistics:
        return Statistics(flops=self.flops, h2d_messages=self.h2d_messages, h2d_bytes=self.h2d_bytes,
                          d2d_messages=sum(r.d2d_messages for r in self.records),
                          d2d_bytes=sum(r.d2d_bytes for r in self.records),
                          ring_bytes=sum(r.ring_bytes for r in self.records),
                          wire_bytes=sum(r.wire_bytes for r in self.records))

    def comm_time_s(self) -> float:
        return sum(r.time_s for r in self.records)

    # -- internals --------------------------------------------------------------------------------------
    def _start(self) -> float:
        if not self.enabled:
            return 0.0
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _record(self, kind: Collective, group: Group, in_bytes: int, out_bytes: int, payload: int,
                message_bytes: int, wire: int, start: float) -> None:
        """Seed 003's naive exchange: each member receives one message of ``message_bytes`` from every peer."""
        if not self.enabled:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        g = group.size
        self.records.append(CollectiveRecord(
            op=kind.value, group_size=g, in_bytes=in_bytes, out_bytes=out_bytes, payload_bytes=payload,
            d2d_messages=g - 1, d2d_bytes=(g - 1) * message_bytes,
            ring_bytes=ring_bytes_per_rank(kind, g, payload), wire_bytes=wire,
            time_s=time.perf_counter() - start))

    @staticmethod
    def _exchange(send: torch.Tensor, recv: torch.Tensor, group: Group) -> int:
        """Send to the right neighbour while receiving from the left one; returns the bytes sent."""
        g, i = group.size, group.index
        ops = [dist.P2POp(dist.isend, send, group.ranks[(i + 1) % g]),
               dist.P2POp(dist.irecv, recv, group.ranks[(i - 1) % g])]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return _nbytes(send)

    def _ring_all_gather(self, t: torch.Tensor, group: Group) -> tuple[list[torch.Tensor], int]:
        # step s: pass on the piece received at step s-1 (own piece at s=0); g-1 steps of one piece each
        g, i = group.size, group.index
        parts: list[torch.Tensor] = [t] * g
        wire = 0
        for s in range(g - 1):
            buf = torch.empty_like(t)
            wire += self._exchange(parts[(i - s) % g], buf, group)
            parts[(i - s - 1) % g] = buf
        return parts, wire

    def _ring_reduce_scatter(self, chunks: list[torch.Tensor], group: Group) -> tuple[torch.Tensor, int]:
        # step s: send partial sum of piece i-s-1, add the received partial sum of piece i-s-2; after g-1
        # steps piece i holds all g contributions
        g, i = group.size, group.index
        acc = [c.clone() for c in chunks]
        wire = 0
        for s in range(g - 1):
            buf = torch.empty_like(acc[0])
            wire += self._exchange(acc[(i - s - 1) % g], buf, group)
            acc[(i - s - 2) % g] += buf
        return acc[i], wire

    def _ring_all_reduce(self, t: torch.Tensor, group: Group) -> tuple[torch.Tensor, int]:
        # ring all-reduce = reduce-scatter then all-gather of 1/g of the flattened buffer
        g = group.size
        flat = t.reshape(-1)
        pad = (-flat.numel()) % g
        if pad:
            flat = torch.cat([flat, flat.new_zeros(pad)])
        mine, wire_rs = self._ring_reduce_scatter(list(flat.chunk(g)), group)
        parts, wire_ag = self._ring_all_gather(mine, group)
        return torch.cat(parts)[: t.numel()].reshape(t.shape), wire_rs + wire_ag
