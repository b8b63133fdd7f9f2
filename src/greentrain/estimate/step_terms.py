"""Terms of the step time written once over ``float | ndarray``: estimate/compose.py composes the step from
them, with one strategy's numbers (estimate_step) or a column per strategy (the vectorised search). Each
returns a float for float inputs.

- micro_batch_s: a micro-batch takes max(device time, host time): eager frameworks issue every layer's
  kernels from Python; the host runs ahead while the device is busier, and the device waits when it is not
  (fixed per-layer host time, efficiency.host_layer_s).
- dp_sync_s: the data-parallel gradient reduction as frameworks run it: gradients in buckets
  (efficiency.dp_bucket_bytes, or one per layer), each bucket reduced when the backward has produced it and
  overlapped only with the backward still to come (efficiency.dp_overlap; PyTorch DDP, Li et al. 2020
  VLDB §3.2.3; Megatron Core overlap_grad_reduce), so the last bucket is always exposed; without overlap the
  whole reduction follows the backward. ZeRO-1/2 reduce-scatter the gradients and all-gather the updated
  weights after the optimizer step (exposed; Rajbhandari et al. 2020 §5); frameworks that all-reduce
  gradients under ZeRO-1 (nanotron) pay both.
"""

from __future__ import annotations

from greentrain.estimate.comm import Collective, collective_s
from greentrain.estimate.efficiency import Efficiency
from greentrain.hardware.cluster import Cluster
from greentrain.num import Num, ceil, maximum, minimum, select, where


def micro_batch_s(device_s: Num, layers: Num, eff: Efficiency, *, tp: Num, pp: Num, cl: Cluster) -> Num:
    """One micro-batch on a stage of ``layers`` transformer layers: max(device, host). A pipeline that spans
    nodes (pp_spans_nodes) adds host_layer_s_per_tp_pp_nodes per tensor-parallel rank to each layer's host
    time (measured on nanotron: docs/validation.md)."""
    host: Num = eff.host_layer_s
    if eff.host_layer_s_per_tp_pp_nodes:
        host = host + where(pp_spans_nodes(pp, cl), tp * eff.host_layer_s_per_tp_pp_nodes, 0.0 * tp)
    out: Num = maximum(device_s, layers * host)
    return out


def grad_accum_s(params: Num, memory_bytes_per_s: float, eff: Efficiency) -> Num:
    """Accumulating one micro-batch's gradients of ``params`` parameters outside the GEMMs (memory bound)."""
    out: Num = params * eff.grad_accum_bytes_per_param / (memory_bytes_per_s * eff.memory * eff.kernel_efficiency)
    return out


def bucket_bytes(grad_bytes: Num, params: Num, dp: Num, layers: Num, eff: Efficiency) -> Num:
    """The size of one gradient bucket of a device's ``grad_bytes`` (its ``params`` parameters' gradients, ``dp``
    the data-parallel degree): a layer's gradients (FSDP, dp_bucket_per_layer); max(dp_bucket_params,
    dp_bucket_params_per_rank x dp) parameters' (Megatron Core's DDP: bucket_size = max(40000000, 1000000 x
    dp_group.size()) parameters, "to ensure that chunks used in NCCL ring-reduce implementations are large
    enough to remain bandwidth-bound rather than latency-bound", NVIDIA/Megatron-LM @d98e8a6
    megatron/core/distributed/distributed_data_parallel.py; dp_group without context parallelism);
    dp_bucket_bytes (PyTorch DDP's bucket_cap_mb, DeepSpeed's reduce_bucket_size); or 0: all at once."""
    if eff.dp_bucket_per_layer:
        return grad_bytes / maximum(1.0, layers)
    if eff.dp_bucket_params > 0:
        per_param = grad_bytes / maximum(params, 1.0)
        return maximum(eff.dp_bucket_params, eff.dp_bucket_params_per_rank * dp) * per_param
    return grad_bytes * 0.0 + eff.dp_bucket_bytes


def num_buckets(grad_bytes: Num, params: Num, dp: Num, layers: Num, eff: Efficiency) -> Num:
    """Gradient buckets of one device (bucket_bytes gives their size; one when it is 0)."""
    if eff.dp_bucket_per_layer:
        return maximum(1.0, layers + 0.0 * grad_bytes)
    size = bucket_bytes(grad_bytes, params, dp, layers, eff)
    out: Num = where(size > 0, maximum(1.0, ceil(grad_bytes / maximum(size, 1e-30))), 1.0 + 0.0 * size)
    return out


def dp_sync_s(*, zero: Num, dp_group: Num, dp_per_node: Num, grad_bytes: Num, weight_bytes: Num, layers: Num,
              backward_s: Num, micro_batch_s: Num, num_micro: Num, cl: Cluster, eff: Efficiency,
              params: Num, dp: Num, updated_weight_bytes: Num | None = None) -> Num:
    """Exposed data-parallel communication of a step (gradients of one device: ``grad_bytes``; its weights
    ``weight_bytes``, of which ZeRO-1/2 gather back the ``updated_weight_bytes`` the optimizer changed (default:
    all; fine-tuning: the trainable ones); ``backward_s`` the last micro-batch's backward, the window overlap
    can use; ZeRO-3: ``micro_batch_s`` the compute each micro-batch's gathers hide behind; ``params`` and ``dp``
    size the buckets, bucket_bytes). With dp_gather_overlap (Megatron Core overlap_param_gather: each bucket's
    all-gather issued by a forward pre-hook and the next one prefetched, distributed_data_parallel.py) the
    ZeRO-1/2 weight gather hides behind the forward of the first micro-batch (``micro_batch_s`` -
    ``backward_s``) as the gradients' reduction hides behind the last one's backward."""
    g, k = dp_group, dp_per_node
    gathered: list[Num] = []

    def gather() -> Num:  # the weights' all-gather, computed once
        if not gathered:
            gathered.append(collective_s(Collective.ALL_GATHER, g, k, weight_bytes, cl, eff))
        return gathered[0]

    def gather_updated() -> Num:
        if updated_weight_bytes is None:
            return gather()
        return collective_s(Collective.ALL_GATHER, g, k, updated_weight_bytes, cl, eff)

    def zero3() -> Num:
        # every micro-batch gathers the weights forward and backward and reduce-scatters gradients,
        # overlapped with that micro-batch's compute (Rajbhandari et al. 2020 §5.3, prefetching); the compute
        # that runs beside them is slowed (overlap_cost_s)
        comm = 2 * gather() + collective_s(Collective.REDUCE_SCATTER, g, k, grad_bytes, cl, eff)
        return num_micro * (maximum(0.0, comm - micro_batch_s) + overlap_cost_s(minimum(comm, micro_batch_s), eff))

    def buckets() -> Num:
        nb = num_buckets(grad_bytes, params, dp, layers, eff)
        red_one = select((zero >= 1) & (not eff.zero_all_reduce),
                         lambda: collective_s(Collective.REDUCE_SCATTER, g, k, grad_bytes / nb, cl, eff),
                         lambda: collective_s(Collective.ALL_REDUCE, g, k, grad_bytes / nb, cl, eff))
        red_total = nb * red_one
        # with overlap, bucket i is ready at i/n of the backward and one stream reduces the buckets in order
        exposed = _bucketed_exposed_s(red_total, nb, backward_s, eff) if eff.dp_overlap else red_total
        if eff.dp_gather_overlap:  # the next step's forward gathers bucket by bucket (first micro-batch's)
            return exposed + select(zero >= 1, lambda: _bucketed_exposed_s(gather_updated(), nb,
                                                                           micro_batch_s - backward_s, eff),
                                    lambda: 0.0 * g)
        return exposed + select(zero >= 1, gather_updated, lambda: 0.0 * g)

    out: Num = select(g <= 1, lambda: 0.0 * g, lambda: select(zero >= 3, zero3, buckets))
    return out


def _bucketed_exposed_s(total_s: Num, nb: Num, window_s: Num, eff: Efficiency) -> Num:
    """``total_s`` of ``nb`` equal bucket collectives issued one after another as a compute of ``window_s``
    produces (or consumes) the buckets: bucket i is ready at i / nb of the window and one stream runs them in
    order, so the last (first) is always exposed, and the compute beside the rest is slowed (overlap_cost_s)."""
    exposed = maximum(total_s / nb, total_s - window_s * (nb - 1) / nb)
    out: Num = exposed + overlap_cost_s(total_s - exposed, eff)
    return out


def overlap_cost_s(overlapped_s: Num, eff: Efficiency) -> Num:
    """What ``overlapped_s`` of collectives running beside the compute add to the step: the compute kernels that
    share the device with them take (1 + x) times as long (x: the chip's overlap_slowdown; NCCL's kernels hold SMs
    and move 2-3x their bus bandwidth through HBM), so of the time the collective runs, x / (1 + x) of it is lost
    to the compute."""
    x = eff.overlap_slowdown
    out: Num = overlapped_s * (x / (1.0 + x))
    return out


def optimizer_s(*, params: Num, zero: Num, shard: Num, offload: Num, wb: float, gb: float, ob: float,
                cl: Cluster, eff: Efficiency) -> Num:
    """The optimizer step of one device's ``params``: memory bound on the device, or the host link and CPU Adam
    when offloaded (ZeRO-Offload, Ren et al. 2021: gradients down and weights up over the host link, CPU Adam
    over the node's share)."""
    local = params / where(zero >= 1, shard, 1.0)
    host = cl.host_link or cl.intra_node
    offloaded = local * (gb + wb) / (host.bytes_per_s * eff.host_link) \
        + local * cl.node_size / eff.cpu_adam_params_per_s_per_node
    # Megatron-LM's step, memory bound (one pass each): zero the gradient buffer (write g), gradient norm
    # (read g), clipping (read + write g), Adam (read g, states; write states) and the 16-bit weight copy
    # (read the fp32 master, write w).
    per_param = gb + gb + 2 * gb + (gb + 2 * ob) + (min(ob, 4.0) + wb)
    out: Num = where(offload, offloaded, local * per_param / (cl.chip.memory_bytes_per_s * eff.memory))
    return out


def pp_crosses_nodes(inner: Num, cl: Cluster) -> Num:
    """Pipeline stages sit on different nodes when the ranks of one stage (tp*cp*dp, laid out innermost) fill
    a node: then every boundary crosses, and a send's cost is the network's (pp_send_s; pp_spans_nodes asks
    whether any boundary does)."""
    return (inner >= cl.node_size) & (cl.num_nodes > 1)


def pp_spans_nodes(pp: Num, cl: Cluster) -> Num:
    """Some adjacent pipeline stages sit on different nodes: a pipeline on a cluster of several nodes (the
    stages are the outermost mesh axis, so a pipeline inside one node needs the whole job there). Unlike
    pp_crosses_nodes (every stage boundary crosses, what a send costs), one crossing boundary is enough: the
    host floor it sets (micro_batch_s) paces every stage of the schedule."""
    return (pp > 1) & (cl.num_nodes > 1)


def pp_send_s(*, pp: Num, tp: Num, inner: Num, payload_bytes: Num, cl: Cluster, eff: Efficiency) -> Num:
    """One activation (or gradient) send between adjacent stages, ``payload_bytes`` split over tp (Narayanan
    et al. 2021 §4.1, scatter/gather); across nodes when the ranks ``inner`` of a stage fill a node."""
    crosses = pp_crosses_nodes(inner, cl)
    lat = where(crosses, cl.inter_node.latency_s, cl.intra_node.latency_s)
    bw = where(crosses, cl.inter_node.bytes_per_s * eff.inter_node_link,
               cl.intra_node.bytes_per_s * eff.intra_node_link)
    out: Num = where(pp == 1, 0.0 * payload_bytes, lat + payload_bytes / tp / bw)
    return out
