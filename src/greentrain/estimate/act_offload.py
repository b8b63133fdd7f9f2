"""Activation offloading: the tensors the first N layers save for their backward wait in host memory.

How it runs (Transformer Engine's ``get_cpu_offload_context``, which Megatron Core's ``cpu_offloading`` /
``cpu_offloading_num_layers`` and NeMo's recipes use; NVIDIA/TransformerEngine
docs/features/other_optimizations/cpu_offloading/cpu_offloading.rst @d0067d0, "Default Offloading Scheduling"):

- the first ``num_layers`` layers are offloaded; a tensor's copy to the host starts as soon as it is saved;
- at most ``model_layers - num_layers`` sets of activations are on the device at any time (compute and reload
  stall to keep that limit), so the device holds the activations of the other layers only;
- a reload must be complete when the layer's backward needs it; ``num_layers <= model_layers - 1``;
- Megatron Core refuses it with pipeline parallelism and with recomputation (transformer_config.py); greentrain
  refuses pp > 1 (Strategy) and lets recomputation stand (torchtune checkpoints and offloads together).

The copies run on their own stream over the chip's host link (catalog ``host_link``: PCIe, or NVLink-C2C on
Grace superchips) at its pinned-copy rate (efficiency ``host_link``), each direction at once. Forward: the N
offloaded layers' copies, N x ``copy_s``, overlap the forward of all L layers; what they take beyond it is
exposed. Backward: the layers come back last to first, the k-th reload (layer N - k + 1) due when the backward
reaches it, after L - N + k - 1 layers' backward; the reload stream falls behind by at most N x ``copy_s`` -
(L - 1) x the backward of a layer. HBM traffic the copies take from the kernels beside them is not counted
(compute-bound GEMMs barely notice, the TE page says). Host memory: Cluster.host_memory_limit_bytes, where known.
"""

from __future__ import annotations

from greentrain.estimate.efficiency import Efficiency
from greentrain.hardware.cluster import Cluster
from greentrain.num import Num, maximum, where


def exposed_offload_s(*, offloaded: Num, layers: int, layer_bytes: Num, layer_fwd_s: Num, layer_bwd_s: Num,
                      cl: Cluster, eff: Efficiency) -> tuple[Num, Num]:
    """(forward, backward) time one micro-batch waits for the copies of ``offloaded`` of ``layers`` layers, each
    saving ``layer_bytes``, over the host link at the chip's pinned-copy rate (efficiency host_link; the
    intra-node link where the catalog names none); floats or columns (the search: one per strategy), 0 where
    nothing is offloaded."""
    host = cl.host_link or cl.intra_node
    copy_s = host.latency_s + layer_bytes / (host.bytes_per_s * eff.host_link)
    fwd = maximum(0.0, offloaded * copy_s - layers * layer_fwd_s)
    bwd = maximum(0.0, offloaded * copy_s - (layers - 1) * layer_bwd_s)
    return where(offloaded > 0, fwd, 0.0), where(offloaded > 0, bwd, 0.0)
