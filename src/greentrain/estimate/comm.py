"""Collectives costed by their algorithm: bytes each rank sends, and time with latency and bandwidth terms.

Payload convention: ``payload_bytes`` is the size of the full (unsharded) tensor: the all-reduce buffer,
the all-gather output, the reduce-scatter input, the all-to-all buffer of one rank.

Ring algorithms (Patarasuk & Yuan 2009; Thakur, Rabenseifner & Gropp 2005, Table 1; NCCL's "bus bandwidth"
convention, nccl-tests PERFORMANCE.md): with g ranks, every rank sends
    all-reduce      2 (g-1)/g x B      (reduce-scatter then all-gather)
    all-gather        (g-1)/g x B
    reduce-scatter    (g-1)/g x B
    all-to-all        (g-1)/g x B      (pairwise exchange)
    broadcast/p2p             B
and the time is  steps x latency + bytes_sent / bandwidth  (alpha-beta model, Hockney 1994), with
2(g-1) steps for a ring all-reduce and g-1 for the others. A tree all-reduce (NCCL double binary tree,
Sanders et al. 2009) sends 2 x B per rank in 2 log2(g) latency steps.
Hierarchical (two-level) all-reduce over n nodes of k chips: reduce-scatter inside the node, all-reduce of
B/k across nodes, all-gather inside the node (Goyal et al. 2017 / NCCL collnet-style decomposition).
All-gather and reduce-scatter across nodes are one ring over every rank in NCCL (no two-level variant): its
channels spread the bytes over the node's NICs as the two-level split does, but each of the g - 1 steps waits
for its slowest edge, a network hop (NCCL src/graph/tuning.cc: a ring's latency is nsteps x the network's
hwLat once it spans nodes), so the latency is (g - 1) network hops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt

from greentrain.hardware.chip import Link

FloatArray = npt.NDArray[np.float64]


class Collective(str, Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    SEND_RECV = "send_recv"


class Algorithm(str, Enum):
    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"


_RING_FACTOR = {
    Collective.ALL_REDUCE: 2.0,
    Collective.ALL_GATHER: 1.0,
    Collective.REDUCE_SCATTER: 1.0,
    Collective.ALL_TO_ALL: 1.0,
}


def ring_bytes_per_rank(kind: Collective, group_size: int, payload_bytes: float) -> float:
    """Bytes one rank sends in a ring (or pairwise) implementation of ``kind`` over ``group_size`` ranks."""
    g = group_size
    if g <= 1:
        return 0.0
    if kind in (Collective.BROADCAST, Collective.SEND_RECV):
        return payload_bytes
    return _RING_FACTOR[kind] * (g - 1) / g * payload_bytes


def ring_steps(kind: Collective, group_size: int) -> int:
    g = group_size
    if g <= 1:
        return 0
    if kind is Collective.ALL_REDUCE:
        return 2 * (g - 1)
    if kind is Collective.SEND_RECV:
        return 1
    return g - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CommCost:
    kind: Collective
    group_size: int
    payload_bytes: float
    bytes_sent_per_rank: float
    time_s: float


def collective_time(kind: Collective, group_size: int, payload_bytes: float, link: Link,
                    algorithm: Algorithm = Algorithm.RING, efficiency: float = 1.0) -> CommCost:
    """Alpha-beta time of one collective over ``link`` (per chip, per direction bandwidth)."""
    g = group_size
    if g <= 1 or payload_bytes <= 0:
        return CommCost(kind=kind, group_size=g, payload_bytes=payload_bytes, bytes_sent_per_rank=0.0, time_s=0.0)
    bw = link.bytes_per_s * efficiency
    if algorithm is Algorithm.TREE and kind is Collective.ALL_REDUCE:
        sent = 2.0 * payload_bytes * (g - 1) / g
        steps = 2 * math.ceil(math.log2(g))
    else:
        sent = ring_bytes_per_rank(kind, g, payload_bytes)
        steps = ring_steps(kind, g)
    return CommCost(kind=kind, group_size=g, payload_bytes=payload_bytes, bytes_sent_per_rank=sent,
                    time_s=steps * link.latency_s + sent / bw)


def tree_latency_s(nodes: float, inter: Link) -> float:
    """Latency of the across-node part of an all-reduce on NCCL's double binary tree: up and down log2(N)
    network hops (NCCL src/graph/tuning.cc: tree all-reduce latency 2 x log2(nodes) x the network hop, against
    2 (nodes - 1) hops for the ring; NCCL picks the faster, so latency grows with log2 of the node count)."""
    return 2.0 * math.log2(max(nodes, 1.0)) * inter.latency_s


def hierarchical_time(kind: Collective, group_size: int, ranks_per_node: int, payload_bytes: float,
                      intra: Link, inter: Link, intra_efficiency: float = 1.0,
                      inter_efficiency: float = 1.0) -> float:
    """A collective over ``group_size`` ranks laid out ``ranks_per_node`` to a node.

    Inside one node it is a plain ring over the intra-node link. Across nodes: the intra-node phase on
    ``payload`` and the inter-node phase on ``payload / ranks_per_node`` (each chip drives its own NIC share).
    """
    g, k = group_size, max(1, min(ranks_per_node, group_size))
    if g <= 1 or payload_bytes <= 0:
        return 0.0
    if g <= k:
        return collective_time(kind, g, payload_bytes, intra, efficiency=intra_efficiency).time_s
    nodes = math.ceil(g / k)
    if kind is Collective.ALL_REDUCE:
        inner = 2 * collective_time(Collective.REDUCE_SCATTER, k, payload_bytes, intra,
                                    efficiency=intra_efficiency).time_s
        outer = collective_time(Collective.ALL_REDUCE, nodes, payload_bytes / k, inter,
                                efficiency=inter_efficiency).time_s
        ring_lat = 2 * (nodes - 1) * inter.latency_s
        return inner + outer - ring_lat + min(ring_lat, tree_latency_s(nodes, inter))
    if kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        inner = collective_time(kind, k, payload_bytes / nodes, intra, efficiency=intra_efficiency).time_s
        outer = collective_time(kind, nodes, payload_bytes / k, inter, efficiency=inter_efficiency).time_s
        two_level_lat = (k - 1) * intra.latency_s + (nodes - 1) * inter.latency_s
        return inner + outer - two_level_lat + (g - 1) * inter.latency_s  # one ring: g - 1 network steps
    # all-to-all and point-to-point across nodes are bound by the inter-node link
    return collective_time(kind, g, payload_bytes, inter, efficiency=inter_efficiency).time_s


# ---- the same formulas over numpy arrays (the vectorised search, estimate/vector.py) ----
# Mirrors collective_time (ring algorithm) and hierarchical_time above, term for term; tests/unit/search
# checks the vectorised estimator against the scalar one on random strategies.

def _ring_time_array(kind: Collective, g: FloatArray, payload: FloatArray, link: Link,
                     efficiency: float) -> FloatArray:
    if kind is Collective.ALL_REDUCE:
        factor, steps = 2.0, 2.0 * (g - 1)
    elif kind is Collective.SEND_RECV:
        factor, steps = 1.0, np.ones_like(g)
    elif kind is Collective.BROADCAST:
        raise ValueError("broadcast has no vectorised form")
    else:
        factor, steps = 1.0, g - 1
    sent = payload if kind is Collective.SEND_RECV else factor * (g - 1) / g * payload
    t = steps * link.latency_s + sent / (link.bytes_per_s * efficiency)
    return np.where((g <= 1) | (payload <= 0), 0.0, t)


def hierarchical_time_array(kind: Collective, group_size: FloatArray, ranks_per_node: FloatArray,
                            payload_bytes: FloatArray, intra: Link, inter: Link, intra_efficiency: float = 1.0,
                            inter_efficiency: float = 1.0) -> FloatArray:
    """hierarchical_time over arrays of group sizes, ranks per node and payloads (ring algorithm)."""
    g = np.asarray(group_size, dtype=np.float64)
    k = np.maximum(1.0, np.minimum(ranks_per_node, g))
    b = np.broadcast_to(np.asarray(payload_bytes, dtype=np.float64), g.shape)
    nodes = np.ceil(g / k)
    inside = _ring_time_array(kind, g, b, intra, intra_efficiency)
    if kind is Collective.ALL_REDUCE:
        ring_lat = 2 * (nodes - 1) * inter.latency_s
        tree_lat = 2.0 * np.log2(np.maximum(nodes, 1.0)) * inter.latency_s  # tree_latency_s
        across = (2 * _ring_time_array(Collective.REDUCE_SCATTER, k, b, intra, intra_efficiency)
                  + _ring_time_array(Collective.ALL_REDUCE, nodes, b / k, inter, inter_efficiency)
                  - np.where(nodes > 1, ring_lat - np.minimum(ring_lat, tree_lat), 0.0))
    elif kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        two_level_lat = np.where(k > 1, (k - 1) * intra.latency_s, 0.0) + np.where(nodes > 1, (nodes - 1)
                                                                                    * inter.latency_s, 0.0)
        across = (_ring_time_array(kind, k, b / nodes, intra, intra_efficiency)
                  + _ring_time_array(kind, nodes, b / k, inter, inter_efficiency)
                  - two_level_lat + (g - 1) * inter.latency_s)  # one ring: g - 1 network steps
    else:
        across = _ring_time_array(kind, g, b, inter, inter_efficiency)
    t = np.where(g <= k, inside, across)
    return np.where((g <= 1) | (b <= 0), 0.0, t)
