"""What an emulation returns: statistics in seed 003's terms, per rank and summed (no torch).

Seed 003 (`cluster.py`, `ChannelStatistics`, `DeviceStatistics`; seed-systems.md §3.1, §3.8) counts
    flops          2·m·k·n of every local matmul
    h2d_messages   packets the host sends a device (here: one per input shard a rank is given)
    h2d_bytes      bytes of those shards
    d2d_messages   point-to-point messages a device receives; its collectives are naive all-to-all exchanges,
                   so a collective over a group of g costs every member g-1 messages (g·(g-1) per group)
    d2d_bytes      bytes of those messages
greentrain adds ``ring_bytes``: the bytes a rank sends when the same collective runs as a ring
(greentrain.estimate.comm.ring_bytes_per_rank), and ``wire_bytes``: the bytes a rank really sent when the
collectives were executed as explicit rings of send/recv (``collectives="ring"``), plus every
point-to-point send (pipeline stages); native collectives add nothing to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRecord:
    """One collective (or point-to-point transfer) as one rank saw it."""

    op: str  # greentrain.estimate.comm.Collective value
    group_size: int
    in_bytes: int  # this rank's input buffer
    out_bytes: int  # this rank's output buffer
    payload_bytes: int  # estimate.comm's convention: the full (unsharded) tensor
    d2d_messages: int  # received by this rank under the seed's naive exchange
    d2d_bytes: int
    ring_bytes: float  # sent by this rank under a ring algorithm (estimate.comm)
    wire_bytes: int  # sent by this rank, counted, when run as an explicit ring (else 0)
    time_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Statistics:
    flops: int = 0
    h2d_messages: int = 0
    h2d_bytes: int = 0
    d2d_messages: int = 0
    d2d_bytes: int = 0
    ring_bytes: float = 0.0
    wire_bytes: int = 0

    def __add__(self, other: Statistics) -> Statistics:
        """Field-wise sum (seed `Statistics.__add__`)."""
        return Statistics(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass(frozen=True, slots=True, kw_only=True)
class RankResult:
    rank: int
    stats: Statistics
    collectives: tuple[CollectiveRecord, ...]
    comm_time_s: float  # wall time inside collectives
    time_s: float  # wall time of the op on this rank (inputs already placed, checks excluded)
    max_abs_error: float  # max |out - ref| against the single-process float32 reference
    max_rel_error: float  # max over checked tensors of max |out - ref| / max |ref|


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulationResult:
    label: str
    policy: str
    backend: str
    world_size: int
    ranks: tuple[RankResult, ...]
    tolerance: float

    @property
    def total(self) -> Statistics:
        out = Statistics()
        for r in self.ranks:
            out = out + r.stats
        return out

    @property
    def time_s(self) -> float:
        """The slowest rank's time (all ranks start together after a barrier)."""
        return max(r.time_s for r in self.ranks)

    @property
    def comm_time_s(self) -> float:
        return max(r.comm_time_s for r in self.ranks)

    @property
    def max_abs_error(self) -> float:
        return max(r.max_abs_error for r in self.ranks)

    @property
    def max_rel_error(self) -> float:
        """max |out - ref| / max |ref| of the worst tensor (output or gradient) on any rank."""
        return max(r.max_rel_error for r in self.ranks)

    @property
    def ok(self) -> bool:
        return self.max_rel_error <= self.tolerance

    @property
    def num_collectives(self) -> int:
        return sum(len(r.collectives) for r in self.ranks)

    def to_json(self, *, per_rank: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.label, "policy": self.policy, "backend": self.backend,
                               "world_size": self.world_size}
        out.update(asdict(self.total))
        out.update({"max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
                    "tolerance_rel": self.tolerance, "ok": self.ok, "time_s": self.time_s,
                    "comm_time_s": self.comm_time_s, "num_collectives": self.num_collectives})
        if per_rank:
            out["per_rank"] = [{"rank": r.rank, **asdict(r.stats), "time_s": r.time_s,
                                "comm_time_s": r.comm_time_s, "max_abs_error": r.max_abs_error,
                                "max_rel_error": r.max_rel_error}
                               for r in self.ranks]
        return out
