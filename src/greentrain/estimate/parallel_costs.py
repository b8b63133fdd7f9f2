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

import numpy as np

from greentrain.estimate.comm import Collective, collective_s
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.step_terms import pp_crosses_nodes
from greentrain.hardware.cluster import Cluster
from greentrain.num import Num, maximum, minimum
from greentrain.parallel.strategy import Strategy


@dataclass(frozen=True, slots=True, kw_only=True)
class AxisLinks:
    """Ranks of one axis's group that share a node, for each axis."""

    tp: int
    cp: int
    dp: int  # of the gradient group (dp x cp, Megatron Core's dp_cp group): its cp ranks share nodes with it
    ep: int
    pp_crosses_nodes: bool


def ranks_per_node(inner: Num, degree: Num, node: int) -> Num:
    """Ranks of an axis's group of ``degree`` that share a node, ``inner`` ranks of the axes inside it apart
    (one when a stride of ``inner`` ranks already spans the node)."""
    return maximum(1, minimum(degree, node // inner))


def axis_layout(s: Strategy, cluster: Cluster) -> AxisLinks:
    node = cluster.node_size
    return AxisLinks(tp=ranks_per_node(1, s.tp, node), cp=ranks_per_node(s.tp, s.cp, node),
                     dp=ranks_per_node(s.tp, s.grad_group, node), ep=ranks_per_node(s.tp, s.ep, node),
                     pp_crosses_nodes=bool(pp_crosses_nodes(s.stage_ranks, cluster)))


def tp_layer_s(tp: Num, sp: Num, cluster: Cluster, eff: Efficiency, payload_bytes: Num, per_node: Num,
               collectives_per_pass: int) -> Num:
    """TP communication of one layer, forward or backward (one pass); ``sp``: sequence parallelism in effect.
    Over columns, a group of one costs nothing (comm.hierarchical_time)."""
    if isinstance(sp, np.ndarray):
        return np.where(sp, tp_layer_s(tp, True, cluster, eff, payload_bytes, per_node, collectives_per_pass),
                        tp_layer_s(tp, False, cluster, eff, payload_bytes, per_node, collectives_per_pass))
    if not isinstance(tp, np.ndarray) and tp == 1:
        return 0.0
    if sp:
        one = (collective_s(Collective.REDUCE_SCATTER, tp, per_node, payload_bytes, cluster, eff)
               + collective_s(Collective.ALL_GATHER, tp, per_node, payload_bytes, cluster, eff))
    else:
        one = collective_s(Collective.ALL_REDUCE, tp, per_node, payload_bytes, cluster, eff)
    return collectives_per_pass * one
