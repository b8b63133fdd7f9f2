"""Terms of the step time written once over ``float | ndarray``: estimate/step.py calls them with one
strategy's numbers, estimate/vector.py with a column per strategy (the vectorised search). Each returns a
float for float inputs.

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

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from greentrain.estimate.comm import Collective, hierarchical_time, hierarchical_time_array
from greentrain.estimate.efficiency import Efficiency
from greentrain.hardware.cluster import Cluster

FloatArray = npt.NDArray[np.float64]
Num = TypeVar("Num", float, FloatArray)


def _scalar(*xs: Any) -> bool:
    return all(np.ndim(x) == 0 for x in xs)


def where(cond: Any, a: Any, b: Any) -> Any:
    """np.where, or a plain conditional when everything is a scalar (10x faster for one strategy)."""
    if _scalar(cond, a, b):
        return a if cond else b
    return np.where(cond, a, b)


def maximum(a: Any, b: Any) -> Any:
    return max(a, b) if _scalar(a, b) else np.maximum(a, b)


def collective_time_s(kind: Collective, group: Any, per_node: Any, payload: Any, cl: Cluster, eff: Efficiency) -> Any:
    """comm.hierarchical_time for one strategy, comm.hierarchical_time_array for columns (the same formula)."""
    if _scalar(group, per_node, payload):
        return hierarchical_time(kind, int(group), int(per_node), float(payload), cl.intra_node, cl.inter_node,
                                 eff.intra_node_link, eff.inter_node_link)
    return hierarchical_time_array(kind, group, per_node, payload, cl.intra_node, cl.inter_node,
                                   eff.intra_node_link, eff.inter_node_link)


def micro_batch_s(device_s: Num, layers: Num, eff: Efficiency) -> Num:
    """One micro-batch on a stage of ``layers`` transformer layers: max(device, host)."""
    out: Num = maximum(device_s, layers * eff.host_layer_s)
    return out


def grad_accum_s(params: Num, memory_bytes_per_s: float, eff: Efficiency) -> Num:
    """Accumulating one micro-batch's gradients of ``params`` parameters outside the GEMMs (memory bound)."""
    out: Num = params * eff.grad_accum_bytes_per_param / (memory_bytes_per_s * eff.memory * eff.kernel_efficiency)
    return out


def num_buckets(grad_bytes: Num, layers: Num, eff: Efficiency) -> Num:
    """Gradient buckets of one device: one per layer (FSDP), per dp_bucket_bytes (DDP, Megatron), or one."""
    if eff.dp_bucket_per_layer:
        out: Num = maximum(1.0, layers)
    elif eff.dp_bucket_bytes <= 0:
        out = grad_bytes * 0.0 + 1.0
    else:
        out = maximum(1.0, np.ceil(grad_bytes / eff.dp_bucket_bytes))
    return out


def dp_sync_s(*, zero: Num, dp_group: Num, dp_per_node: Num, grad_bytes: Num, weight_bytes: Num, layers: Num,
              backward_s: Num, micro_batch_s: Num, num_micro: Num, cl: Cluster, eff: Efficiency) -> Num:
    """Exposed data-parallel communication of a step (gradients of one device: ``grad_bytes``; its weights
    ``weight_bytes``; ``backward_s`` the last micro-batch's backward, the window overlap can use; ZeRO-3:
    ``micro_batch_s`` the compute each micro-batch's gathers hide behind)."""
    g, k = dp_group, dp_per_node
    nb = num_buckets(grad_bytes, layers, eff)
    sharded_grads = (zero >= 1) & (not eff.zero_all_reduce) if not _scalar(zero) else \
        (zero >= 1 and not eff.zero_all_reduce)
    red_one = where(sharded_grads, collective_time_s(Collective.REDUCE_SCATTER, g, k, grad_bytes / nb, cl, eff),
                    collective_time_s(Collective.ALL_REDUCE, g, k, grad_bytes / nb, cl, eff))
    red_total = nb * red_one
    # with overlap, bucket i is ready at i/n of the backward and one stream reduces the buckets in order
    exposed = maximum(red_one, red_total - backward_s * (nb - 1) / nb) if eff.dp_overlap else red_total
    gather = collective_time_s(Collective.ALL_GATHER, g, k, weight_bytes, cl, eff)
    # ZeRO-3: every micro-batch gathers the weights forward and backward and reduce-scatters gradients,
    # overlapped with that micro-batch's compute (Rajbhandari et al. 2020 §5.3, prefetching)
    rs_all = collective_time_s(Collective.REDUCE_SCATTER, g, k, grad_bytes, cl, eff)
    z3 = num_micro * maximum(0.0, 2 * gather + rs_all - micro_batch_s)
    out: Num = where(g <= 1, 0.0 * g, where(zero >= 3, z3, exposed + where(zero >= 1, gather, 0.0 * g)))
    return out
