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
channels spread the bytes over the node's NICs as the two-level split does; of its g - 1 steps the nodes - 1
whose hop crosses nodes pay the network's latency and the others the NVLink hop or the network's per-step
overhead (Link.ring_step_overhead_s), the longer (NCCL src/graph/tuning.cc: the split since 2.7.3, the floor
since 2.18.1). The all-reduce keeps its two-level form with NCCL's tree latency across nodes when shorter: the
per-step overhead is the all-gather's and reduce-scatter's only (NCCL's tree has no such floor).

Every function is written once over ``Num`` (greentrain/num.py): a float for one strategy (estimate_step), a
column per strategy for the vectorised search (estimate/vector.py); group sizes may be ints or floats.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from greentrain.hardware.chip import Link
from greentrain.num import Num, ceil, log2, maximum, minimum, select, where

if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Efficiency
    from greentrain.hardware.cluster import Cluster


class Collective(str, Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    SEND_RECV = "send_recv"


_RING_FACTOR = {
    Collective.ALL_REDUCE: 2.0,
    Collective.ALL_GATHER: 1.0,
    Collective.REDUCE_SCATTER: 1.0,
    Collective.ALL_TO_ALL: 1.0,
}


def _ring(kind: Collective, g: Num, payload_bytes: Num) -> tuple[Num, Num]:
    """(latency steps, bytes one rank sends) of a ring over ``g`` > 1 ranks."""
    if kind is Collective.SEND_RECV:
        return 1, payload_bytes
    if kind is Collective.BROADCAST:
        return g - 1, payload_bytes
    steps = 2 * (g - 1) if kind is Collective.ALL_REDUCE else g - 1
    return steps, _RING_FACTOR[kind] * (g - 1) / g * payload_bytes


def ring_bytes_per_rank(kind: Collective, group_size: Num, payload_bytes: Num) -> Num:
    """Bytes one rank sends in a ring (or pairwise) implementation of ``kind`` over ``group_size`` ranks."""
    return where(group_size <= 1, 0.0 * payload_bytes, _ring(kind, group_size, payload_bytes)[1])


def ring_steps(kind: Collective, group_size: Num) -> Num:
    """Latency steps of the ring: 2 (g - 1) for an all-reduce, one for a send, g - 1 for the others."""
    return where(group_size <= 1, 0 * group_size, _ring(kind, group_size, 0.0)[0])


def ring_time_s(kind: Collective, group_size: Num, payload_bytes: Num, link: Link, efficiency: float = 1.0) -> Num:
    """Alpha-beta time of one ring collective over ``link`` (per chip, per direction bandwidth): steps x
    latency + bytes sent / bandwidth; nothing for a group of one or an empty payload."""
    g, b = group_size, payload_bytes
    steps, sent = _ring(kind, g, b)
    t = steps * link.latency_s + sent / (link.bytes_per_s * efficiency)
    return where((g <= 1) | (b <= 0), 0.0 * t, t)


def tree_latency_s(nodes: Num, inter: Link) -> Num:
    """Latency of the across-node part of an all-reduce on NCCL's double binary tree: up and down log2(N)
    network hops (NCCL src/graph/tuning.cc: tree all-reduce latency 2 x log2(nodes) x the network hop, against
    2 (nodes - 1) hops for the ring; NCCL picks the faster, so latency grows with log2 of the node count)."""
    return 2.0 * log2(maximum(nodes, 1.0)) * inter.latency_s


def hierarchical_time(kind: Collective, group_size: Num, ranks_per_node: Num, payload_bytes: Num,
                      intra: Link, inter: Link, intra_efficiency: float = 1.0,
                      inter_efficiency: float = 1.0) -> Num:
    """A collective over ``group_size`` ranks laid out ``ranks_per_node`` to a node.

    Inside one node it is a plain ring over the intra-node link. Across nodes: the intra-node phase on
    ``payload`` and the inter-node phase on ``payload / ranks_per_node`` (each chip drives its own NIC share).
    """
    g, b = group_size, payload_bytes
    k = maximum(1, minimum(ranks_per_node, g))

    def inside() -> Num:
        return ring_time_s(kind, g, b, intra, intra_efficiency)

    def across() -> Num:
        nodes = ceil(g / k)
        if kind is Collective.ALL_REDUCE:
            inner = 2 * ring_time_s(Collective.REDUCE_SCATTER, k, b, intra, intra_efficiency)
            outer = ring_time_s(Collective.ALL_REDUCE, nodes, b / k, inter, inter_efficiency)
            ring_lat = 2 * (nodes - 1) * inter.latency_s
            return inner + outer - ring_lat + minimum(ring_lat, tree_latency_s(nodes, inter))
        if kind in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
            inner = ring_time_s(kind, k, b / nodes, intra, intra_efficiency)
            outer = ring_time_s(kind, nodes, b / k, inter, inter_efficiency)
            # one ring of g - 1 steps: the nodes - 1 whose hop crosses nodes pay the network's latency, the others
            # the NVLink hop or the network's per-step overhead, the longer (NCCL's ring latency, NVIDIA/nccl
            # src/graph/tuning.cc: (nsteps - nInterSteps) x intraLat + nInterSteps x interLat since 2.7.3, intraLat
            # floored at the network overhead since 2.18.1); it replaces the two-level split's (k - 1) + (nodes - 1)
            two_level_lat = (k - 1) * intra.latency_s + (nodes - 1) * inter.latency_s
            step = maximum(intra.latency_s, inter.ring_step_overhead_s)
            return inner + outer - two_level_lat + (g - nodes) * step + (nodes - 1) * inter.latency_s
        # all-to-all and point-to-point across nodes are bound by the inter-node link
        return ring_time_s(kind, g, b, inter, inter_efficiency)

    t = select(g <= k, inside, across)
    return where((g <= 1) | (b <= 0), 0.0 * t, t)


def collective_s(kind: Collective, group: Num, per_node: Num, payload_bytes: Num, cl: Cluster,
                 eff: Efficiency) -> Num:
    """hierarchical_time on the cluster's links at the framework's link efficiencies (one strategy's floats, or
    a column per strategy)."""
    return hierarchical_time(kind, group, per_node, payload_bytes, cl.intra_node, cl.inter_node,
                             eff.intra_node_link, eff.inter_node_link)
