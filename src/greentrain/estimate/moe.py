"""Mixture-of-experts layers as they run (data: estimate/moe.yaml's kernel counts; how each framework's dispatcher
runs, the ``moe_*`` knobs of its estimate/efficiency.yaml record).

- ``ep_pass_s``: the dispatch and combine all-to-alls of one pass of one MoE layer. Each rank dispatches the
  tokens it holds (its sequence-parallel shard, T / tp, when sequence parallelism splits them: Megatron Core
  MoE requires it with tp > 1), top_k copies of each (Lepikhin et al. 2020, GShard). Of the (g - 1) / g of its
  buffer that leaves the rank, the share for peers on its node goes over NVLink and the rest over the network,
  both at once (NCCL runs an all-to-all as one group of concurrent sends and receives, nccl-tests
  src/alltoall.cu), so the time is the slower of the two; each rank drives its own NIC share. The expert
  group's ranks lie ``etp`` apart (Megatron Core's expert mesh: etp innermost, then ep). With overlap (the
  framework's ``moe_overlap``) only the part above the layer's compute is exposed, and the compute beside the
  hidden part runs slower as beside a data-parallel collective (step_terms.overlap_cost_s: the dispatcher's
  kernels hold SMs). With node forwarding (the
  framework's ``moe_node_forwarding``: DeepEP's normal kernels, HybridEP) a token crosses the network once per
  remote node holding one of its experts and is forwarded over NVLink there (``forwarded_pass_bytes``).
- ``expert_kernels_s``: the host time of the MoE block's kernels once the dispatcher's host sync has drained the
  run-ahead (dropless routing only: experts padded to a capacity have splits the host knows, and no sync): one
  GEMM per local expert and linear where the grouped GEMM is a loop of GEMMs (Transformer Engine),
  one for all where it is a single kernel (torch._grouped_mm, torchtitan), fp8 quantize kernels, and
  the router/permute kernels; per pass (kernel counts in moe.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from greentrain.estimate.comm import Collective, collective_s
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.parallel_costs import ranks_per_node
from greentrain.estimate.step_terms import overlap_cost_s
from greentrain.hardware.cluster import Cluster
from greentrain.num import Num, maximum, minimum, where


@cache
def _data() -> dict[str, Any]:
    text = resources.files("greentrain.estimate").joinpath("moe.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeProfile:
    """How a framework runs MoE layers: its efficiency.yaml record's ``moe_*`` knobs, and moe.yaml's kernel counts
    and host time per kernel."""

    overlap: str = "none"  # none | compute
    dispatch_fp8: bool = False
    host_sync: bool = True
    node_forwarding: bool = False
    grouped_gemm: str = "per_expert"  # per_expert | one
    kernel_host_s: float = 0.0
    kernels_forward: tuple[float, float, float] = (2.0, 2.0, 10.0)  # per expert, fp8 per expert, fixed
    kernels_backward: tuple[float, float, float] = (4.0, 2.0, 10.0)


def moe_profile(eff: Efficiency) -> MoeProfile:
    """How the framework of ``eff`` runs MoE layers (its ``moe_*`` knobs, checked where its record is read)."""
    return _moe_profile(eff.moe_overlap, eff.moe_dispatch_fp8, eff.moe_host_sync, eff.moe_grouped_gemm,
                        eff.moe_node_forwarding)


@cache
def _moe_profile(overlap: str, dispatch_fp8: bool, host_sync: bool, grouped_gemm: str,
                 node_forwarding: bool) -> MoeProfile:
    d = _data()
    return MoeProfile(overlap=overlap, dispatch_fp8=dispatch_fp8, host_sync=host_sync, grouped_gemm=grouped_gemm,
                      node_forwarding=node_forwarding,
                      kernel_host_s=float(d["kernel_host_s"]),
                      kernels_forward=(float(d["kernels_per_expert_forward"]),
                                       float(d["fp8_kernels_per_expert_forward"]),
                                       float(d["fixed_kernels_per_pass"])),
                      kernels_backward=(float(d["kernels_per_expert_backward"]),
                                        float(d["fp8_kernels_per_expert_backward"]),
                                        float(d["fixed_kernels_per_pass"])))


def _any_above_one(x: Num) -> bool:
    return bool(np.any(np.asarray(x) > 1))


def _legs_s(g: Num, k: Num, intra_bytes: Num, inter_bytes: Num, cl: Cluster, eff: Efficiency) -> Num:
    """An exchange over a group of ``g`` ranks, ``k`` of them on each node: ``intra_bytes`` per rank over NVLink
    and ``inter_bytes`` over the network at once, the slower sets the time."""
    intra = where(k > 1, cl.intra_node.latency_s + intra_bytes / (cl.intra_node.bytes_per_s * eff.intra_node_link),
                  0.0 * g)
    inter = where(g > k, cl.inter_node.latency_s + inter_bytes / (cl.inter_node.bytes_per_s * eff.inter_node_link),
                  0.0 * g)
    return where(g > 1, maximum(intra, inter), 0.0 * g)


def all_to_all_s(group: Num, per_node: Num, buffer_bytes: Num, cl: Cluster, eff: Efficiency) -> Num:
    """One all-to-all of ``buffer_bytes`` per rank over ``group`` ranks, ``per_node`` of them on each node: the
    NVLink share and the network share of the buffer at once, the slower sets the time."""
    g = group
    k = minimum(per_node, g)
    return _legs_s(g, k, buffer_bytes * (k - 1) / g, buffer_bytes * (g - k) / g, cl, eff)


def forwarded_pass_bytes(group: Num, per_node: Num, token_bytes: Num, top_k: int) -> tuple[Num, Num]:
    """(NVLink, network) bytes per rank of one dispatch (or combine) that forwards through nodes, for
    ``token_bytes`` of tokens each routed to ``top_k`` experts spread evenly over ``group`` ranks, ``per_node`` of
    them on each of its n nodes. DeepEP's normal kernels (deepseek-ai/DeepEP README: "kernels optimized for
    asymmetric-domain bandwidth forwarding, such as forwarding data from NVLink domain to RDMA domain", after
    DeepSeek-V3 report §3.2.2) send a token over the network once to each remote node that holds one of its
    experts and fan it out over NVLink there; the combine sums a node's expert outputs before sending them back.
    With experts drawn evenly (balanced routing) a token reaches (n - 1) (1 - (1 - 1/n)^top_k) remote nodes where
    a plain all-to-all sends top_k (n - 1) / n copies (the same for top_k 1); DeepSeek-V3's node-limited routing
    (at most 4 nodes per token) would lower it further and is not modelled. NVLink carries the copies for peers
    on the rank's own node and fans out the copies arriving for the others: top_k ((k - 1) / g + (g - k) / g
    (k - 1) / k)."""
    g = group
    k = minimum(per_node, g)
    n = g / k
    remote_nodes = (n - 1) * (1.0 - (1.0 - 1.0 / n) ** top_k)
    intra = token_bytes * top_k * ((k - 1) / g + (g - k) / g * (k - 1) / k)
    return intra, token_bytes * remote_nodes


def ep_pass_s(*, tokens: Num, top_k: int, hidden: int, e: float, tp: Num, sp: Num, ep: Num, etp: Num,
              compute_s: Num, cl: Cluster, eff: Efficiency, profile: MoeProfile) -> Num:
    """Exposed dispatch + combine all-to-alls of one pass of one MoE layer (``tokens`` of the micro-batch on the
    rank's tensor-parallel group; ``compute_s`` that pass's compute, what overlap can hide behind)."""
    held = tokens / where(sp, tp, 1.0)
    combine = held * top_k * hidden * e
    dispatch = held * top_k * hidden * (1.0 + 1.0 / 128.0) if profile.dispatch_fp8 else combine
    per_node = ranks_per_node(etp, ep, cl.node_size)
    if profile.node_forwarding:  # once per remote node, fanned out over NVLink there
        k = minimum(per_node, ep)
        a2a = _legs_s(ep, k, *forwarded_pass_bytes(ep, per_node, dispatch / top_k, top_k), cl, eff) \
            + _legs_s(ep, k, *forwarded_pass_bytes(ep, per_node, combine / top_k, top_k), cl, eff)
    else:
        a2a = all_to_all_s(ep, per_node, dispatch, cl, eff) + all_to_all_s(ep, per_node, combine, cl, eff)
    if _any_above_one(etp):
        # experts split over etp ranks: the received tokens are all-gathered over the etp group before the
        # expert GEMMs and their outputs reduce-scattered after (Megatron Core MoEAlltoAllTokenDispatcher with
        # tensor-parallel experts: gather_from_sequence_parallel_region over the expert-tp group)
        gathered = combine * etp
        etp_node = ranks_per_node(1, etp, cl.node_size)
        a2a = a2a + collective_s(Collective.ALL_GATHER, etp, etp_node, gathered, cl, eff) \
            + collective_s(Collective.REDUCE_SCATTER, etp, etp_node, gathered, cl, eff)
    if profile.overlap == "compute":
        # hidden behind another micro-batch's compute, which runs slower beside it: the dispatcher's kernels hold SMs
        # as NCCL's do (DeepEP and HybridEP 16-32: moe_hybridep_num_sms), the cost the data-parallel overlap pays
        return maximum(0.0, a2a - compute_s) + overlap_cost_s(minimum(a2a, compute_s), eff)
    return a2a


def expert_kernels_s(*, local_experts: Num, fp8: bool, profile: MoeProfile) -> tuple[Num, Num]:
    """(forward, backward) host time the MoE block's kernels expose per micro-batch once the dispatcher's host
    sync has drained the run-ahead (0 without a host sync)."""
    if not profile.host_sync or profile.kernel_host_s <= 0:
        return 0.0, 0.0
    out = []
    issued = local_experts if profile.grouped_gemm == "per_expert" else 1.0  # one grouped kernel: as one expert
    for per_expert, per_expert_fp8, fixed in (profile.kernels_forward, profile.kernels_backward):
        kernels = issued * (per_expert + (per_expert_fp8 if fp8 else 0.0)) + fixed
        out.append(kernels * profile.kernel_host_s)
    return out[0], out[1]


def layer_costs(sc: Any, sh: Any, t: Any, tokens: Num, eff: Efficiency) -> tuple[Num, Any]:
    """(exposed all-to-alls of one pass, the layer's OpsTime with the expert kernels' exposed host time added)
    for one MoE layer of scenario ``sc`` under sharding ``sh`` (estimate/stage.py layer_group_costs)."""
    m, w = sc.model, sc.workload
    profile = moe_profile(eff)
    etp = np.where(sh.etp > 0, sh.etp, sh.tp) if isinstance(sh.etp, np.ndarray) else (sh.etp or sh.tp)
    ep_pass = ep_pass_s(tokens=tokens, top_k=m.top_k, hidden=m.hidden_size, e=w.activation_bytes, tp=sh.tp,
                        sp=sh.sp, ep=sh.ep, etp=etp, compute_s=t.forward_s, cl=sc.cluster, eff=eff,
                        profile=profile)
    # padded to a capacity (capacity_factor > 0) every split is known on the host: no sync (Megatron Core
    # MoEAlltoAllTokenDispatcher.preprocess returns before any cuda_sync_point under drop_and_pad)
    fwd, bwd = expert_kernels_s(local_experts=m.num_experts / sh.ep, fp8=w.precision.lower() == "fp8",
                                profile=profile) if not m.capacity_factor else (0.0, 0.0)
    has_backward = t.backward_s > 0
    return ep_pass, replace(t, forward_s=t.forward_s + fwd, backward_s=t.backward_s + bwd * has_backward)
