"""Communication of one training step, per parallel axis, costed with estimate/comm.py.

Rank layout (innermost first): tp, cp, dp, pp (Megatron-LM's default order, torchtitan's ParallelDims):
an axis whose group, times the degrees inside it, fits in a node runs on the intra-node link.

Volumes (per device, per micro-batch unless said otherwise), e = activation bytes, T = local tokens:
- TP (Shoeybi et al. 2019 §3; Korthikanti et al. 2022 §4.2.2): forward one all-reduce of T*h*e after the
  attention block and one after the MLP (reduce-scatter + all-gather of the same total with sequence
  parallelism), backward the same; a parallel attention+MLP block needs one; full recomputation repeats
  the forward ones. Not overlapped (Megatron-LM 2022).
- CP (ring attention, Liu et al. 2023): cp-1 passes of the local K and V per layer forward, twice that
  backward (K, V and their gradients), overlapped with the attention core; only the excess is exposed.
- EP (GShard, Lepikhin et al. 2020): per MoE layer an all-to-all dispatch and combine of T*top_k*h*e
  forward, the same backward.
- PP (Narayanan et al. 2021 §4.1, scatter/gather optimisation): one send of T*h*e/tp per stage boundary per
  micro-batch and virtual stage, forward and backward.
- DP and PP sends: estimate/step_terms.py (dp_sync_s: the framework's buckets and overlap; pp_send_s).
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.estimate.comm import Collective, hierarchical_time
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.step_terms import pp_crosses_nodes
from greentrain.hardware.cluster import Cluster
from greentrain.parallel.strategy import Strategy


@dataclass(frozen=True, slots=True, kw_only=True)
class AxisLinks:
    """Ranks of one axis's group that share a node, for each axis."""

    tp: int
    cp: int
    dp: int
    ep: int
    pp_crosses_nodes: bool


def axis_layout(s: Strategy, cluster: Cluster) -> AxisLinks:
    node = cluster.node_size

    def per_node(inner: int, degree: int) -> int:
        return max(1, min(degree, node // inner)) if inner <= node else 1

    return AxisLinks(tp=per_node(1, s.tp), cp=per_node(s.tp, s.cp), dp=per_node(s.tp * s.cp, s.dp),
                     ep=per_node(s.tp, s.ep), pp_crosses_nodes=bool(pp_crosses_nodes(s.tp * s.cp * s.dp, cluster)))


def collective_s(kind: Collective, group: int, per_node: int, payload_bytes: float, cluster: Cluster,
                 eff: Efficiency) -> float:
    return hierarchical_time(kind, group, per_node, payload_bytes, cluster.intra_node, cluster.inter_node,
                             eff.intra_node_link, eff.inter_node_link)


def tp_layer_s(s: Strategy, cluster: Cluster, eff: Efficiency, payload_bytes: float, per_node: int,
               collectives_per_pass: int) -> float:
    """TP communication of one layer, forward or backward (one pass)."""
    if s.tp == 1:
        return 0.0
    if s.sequence_parallel:
        one = (collective_s(Collective.REDUCE_SCATTER, s.tp, per_node, payload_bytes, cluster, eff)
               + collective_s(Collective.ALL_GATHER, s.tp, per_node, payload_bytes, cluster, eff))
    else:
        one = collective_s(Collective.ALL_REDUCE, s.tp, per_node, payload_bytes, cluster, eff)
    return collectives_per_pass * one
