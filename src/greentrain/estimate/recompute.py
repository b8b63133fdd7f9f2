"""Recomputation modes: what `recompute: selective` saves, by framework (efficiency.yaml ``selective_recompute``).

A strategy's ``recompute`` is none, selective or full (parallel/strategy.py); what *selective* means differs:
- ``attention``: Megatron-LM's selective recomputation (Korthikanti et al. 2022 §5): the attention core (scores,
  softmax, dropout, attention over values) is recomputed, everything else saved; with a flash kernel nothing
  is left to recompute (the kernel already recomputes its scores);
- ``op``: torchtitan's op-level selective activation checkpointing (model/ops.py op_sac): every other matmul
  and every element-wise op recomputed, the attention kernel's output and the other matmuls' outputs saved;
- ``layer-N``: torchtitan's layer-level mode (``selective_ac_option`` an integer N): every N-th block is fully
  checkpointed, the others keep everything (pytorch/torchtitan @157a12c5 parallelize_llama.py
  ``checkpoint_wrapper``: ``if not ac_freq or ptd_checkpoint_wrapper._count % ac_freq == 0``).
Time, FLOPs and memory of each follow from the op list (compute.OpsTime, memory.layer_activation_bytes).
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError

SELECTIVE_MODES = ("attention", "op", "layer-N")  # layer-N: N a whole number >= 1 (layer-1 is full)


def layer_every(mode: str) -> int:
    """N of a ``layer-N`` mode (0 for the other modes)."""
    return int(mode[6:]) if mode.startswith("layer-") else 0


def in_layer_comm_passes(recompute: str, mode: str) -> float:
    """Passes of a layer's in-layer (TP, EP) communication per micro-batch, for a layer with a backward: the
    forward, the backward, and the forward again where recomputation repeats it (full: every layer;
    selective layer-N: one layer in N; the other selective modes recompute inside the layer, no collective).
    The forward's share is one pass in these (sim/cluster.py splits a micro-batch's communication so)."""
    every = layer_every(mode) if recompute == "selective" else 0
    return 3 if recompute == "full" else 2 + (1 / every if every else 0)


def check_selective_mode(mode: str) -> str:
    """``mode`` if it is a selective-recomputation mode, else a ConfigError naming the known ones."""
    if mode in ("attention", "op"):
        return mode
    if mode.startswith("layer-") and mode[6:].isdigit() and 1 <= int(mode[6:]) <= 1000:
        return mode
    raise ConfigError("selective_recompute", mode,
                      "is not a recomputation mode: attention (Megatron), op (torchtitan op-SAC) or layer-N "
                      "(torchtitan: every N-th block fully checkpointed, N >= 1)")


def _recomputed(recompute: str, mode: str, *, layer: Any, op_sac: Any, core: Any) -> Any:
    """What the backward repeats of a layer's forward ``layer`` (time or FLOPs): all of it (full), the op-SAC
    part ``op_sac``, 1/N of the layers (layer-N), or Megatron's attention core ``core`` (selective)."""
    if recompute == "full":
        return layer
    if recompute != "selective":
        return 0.0
    if mode == "op":
        return op_sac
    n = layer_every(mode)
    if n:
        return layer / n
    return core


def recomputed_s(recompute: str, mode: str, *, forward_s: Any, attention_core_s: Any, op_sac_s: Any,
                 flash: bool) -> Any:
    """Forward time a layer runs again in its backward under ``recompute`` and, for selective, ``mode`` (a fused
    attention kernel recomputes its core anyway: nothing more)."""
    return _recomputed(recompute, mode, layer=forward_s, op_sac=op_sac_s, core=0.0 if flash else attention_core_s)


def recomputed_flop(recompute: str, mode: str, *, layer_fwd: float, core_fwd: float, op_sac_fwd: float,
                    flash: bool) -> float:
    """Extra hardware FLOPs per sequence (compose.step_flops): a full layer forward, the op-SAC share, 1/N of the
    layers, or Megatron's attention core counted forward and backward (Korthikanti et al. §6)."""
    flop: float = _recomputed(recompute, mode, layer=layer_fwd, op_sac=op_sac_fwd,
                              core=0.0 if flash else 3.0 * core_fwd)
    return flop
