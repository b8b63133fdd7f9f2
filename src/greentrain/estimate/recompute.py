"""Recomputation modes: what `recompute: selective` saves, by framework (efficiency.yaml ``selective_recompute``).

A strategy's ``recompute`` is none, selective or full (parallel/strategy.py); what *selective* means differs:
- ``attention``: Megatron-LM's selective recomputation (Korthikanti et al. 2022 §5): the attention core (scores,
  softmax, dropout, attention over values) is recomputed, everything else saved; with a flash kernel nothing
  is left to recompute (the kernel already recomputes its scores);
- ``op``: torchtitan's op-level selective activation checkpointing (model/ops.py op_sac): every other matmul
  and every element-wise op recomputed, the attention kernel's output and the other matmuls' outputs saved;
- ``layer-N``: torchtitan's layer-level mode (``selective_ac_option`` an integer N): every N-th block is fully
  checkpointed, the others keep everything (pytorch/torchtitan @157a12c5 parallelize_llama.py
  ``checkpoint_wrapper``: ``if not ac_freq or ptd_checkpoint_wrapper._count % ac_freq == 0``);
- Megatron Core's ``recompute_modules``, joined by ``+`` (``layernorm+moe_act``; NVIDIA/Megatron-LM @d98e8a6
  transformer_config.py, default ``core_attn``): ``core_attn`` the attention core, whose Transformer Engine
  fused kernel runs its forward again (attention.py ``_checkpointed_attention_forward``); ``layernorm`` the
  norms Megatron runs as modules of their own (before a MoE block, before MLA; a dense layer's norms are fused
  into Transformer Engine's LayerNormLinear and not recomputed); ``mlp`` a dense MLP with its fused norm;
  ``moe`` the MoE block, its all-to-alls included; ``moe_act`` the routed experts' activation;
  ``shared_experts``; ``mla_up_proj`` MLA's up-projections and rotary embedding. ``layernorm``, ``moe_act``
  and ``mla_up_proj`` free their outputs after use and recompute them before the backward needs them
  (CheckpointWithoutOutput), the others keep only their input.
Time, FLOPs and memory of each follow from the op list (compute.OpsTime, memory.layer_activation_bytes).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from greentrain.errors import ConfigError

SELECTIVE_MODES = ("attention", "op", "layer-N", "MODULE+MODULE...")  # layer-N: N >= 1 (layer-1 is full)
MEGATRON_MODULES = ("core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts", "mla_up_proj")
_BIT = {m: 1 << i for i, m in enumerate(MEGATRON_MODULES)}


@cache
def modules_mask(mode: str) -> int:
    """The Megatron Core modules a ``+``-joined mode recomputes, as a bit mask (0 for the other modes)."""
    if mode in ("attention", "op") or mode.startswith("layer-"):
        return 0
    return sum(_BIT[m] for m in set(mode.split("+")))


def op_module_masks(ops: Any) -> tuple[int, ...]:
    """For each op of one layer (model/ops.py names), the Megatron Core modules whose recomputation repeats it."""
    names = [op.name for op in ops]
    moe = any(n.endswith(".router") for n in names)
    mla = any(n.endswith(".kv_down") for n in names)
    out = []
    for op, n in zip(ops, names, strict=True):
        leaf = n.split(".lora_", 1)[0].rsplit(".", 1)[-1]  # a LoRA adapter's op: its base op's (model/finetune.py)
        mask = _BIT["core_attn"] if op.attention_core else 0
        if ".experts." in n or n.endswith(".router"):
            mask |= _BIT["moe"] | (_BIT["moe_act"] if leaf.startswith(("act", "clamp")) else 0)
        elif ".shared." in n:
            mask |= _BIT["moe"] | _BIT["shared_experts"]
        elif n.startswith("mlp.") or ".mlp." in n:
            if leaf == "norm":
                mask |= _BIT["layernorm"] if moe else _BIT["mlp"]
            elif leaf in ("up", "act", "act_dropout", "down"):
                mask |= _BIT["mlp"]
        elif mla and leaf == "norm":
            mask |= _BIT["layernorm"]
        elif mla and leaf in ("q_up", "kv_up", "rope"):
            mask |= _BIT["mla_up_proj"]
        out.append(mask)
    return tuple(out)


def layer_every(mode: str) -> int:
    """N of a ``layer-N`` mode (0 for the other modes)."""
    return int(mode[6:]) if mode.startswith("layer-") else 0


def in_layer_comm_passes(recompute: str, mode: str, *, expert: bool = False) -> float:
    """Passes of a layer's in-layer (TP; ``expert``: EP) communication per micro-batch, for a layer with a
    backward: the forward, the backward, and the forward again where recomputation repeats it (full: every
    layer; selective layer-N: one layer in N; Megatron's ``moe`` module: the MoE block's all-to-alls, ``mlp``:
    the dense MLP's half of the layer's tensor-parallel collectives; the other selective modes recompute inside
    a block, no collective). The forward's share is one pass in these (sim/cluster.py splits a micro-batch's
    communication so)."""
    if recompute == "full":
        return 3
    if recompute != "selective":
        return 2
    every, mask = layer_every(mode), modules_mask(mode)
    if every:
        return 2 + 1 / every
    if expert:
        return 3 if mask & _BIT["moe"] else 2
    return 2.5 if mask & _BIT["mlp"] else 2


def is_selective_mode(mode: Any) -> bool:
    """True for a selective-recomputation mode, else check_selective_mode's error (an efficiency.yaml rule)."""
    return bool(check_selective_mode(mode))


def check_selective_mode(mode: str) -> str:
    """``mode`` if it is a selective-recomputation mode, else a ConfigError naming the known ones."""
    if mode in ("attention", "op"):
        return mode
    if mode.startswith("layer-") and mode[6:].isdigit() and 1 <= int(mode[6:]) <= 1000:
        return mode
    parts = mode.split("+")
    if mode and all(p in MEGATRON_MODULES for p in parts) and len(set(parts)) == len(parts):
        return mode
    raise ConfigError("selective_recompute", mode,
                      "is not a recomputation mode: attention (Korthikanti et al.), op (torchtitan op-SAC), layer-N "
                      "(torchtitan: every N-th block fully checkpointed, N >= 1), or Megatron Core modules joined "
                      f"by + ({', '.join(MEGATRON_MODULES)}), each once")


def _recomputed(recompute: str, mode: str, *, layer: Any, op_sac: Any, core: Any, modules: Any) -> Any:
    """What the backward repeats of a layer's forward ``layer`` (time or FLOPs): all of it (full), the op-SAC
    part ``op_sac``, 1/N of the layers (layer-N), the Megatron modules' part (``modules``: (mask, amount)
    pairs) or the attention core ``core`` (selective)."""
    if recompute == "full":
        return layer
    if recompute != "selective":
        return 0.0
    if mode == "op":
        return op_sac
    n = layer_every(mode)
    if n:
        return layer / n
    mask = modules_mask(mode)
    if mask:
        return sum((v for m, v in modules if m & mask), 0.0)
    return core


def recomputed_s(recompute: str, mode: str, *, forward_s: Any, attention_core_s: Any, op_sac_s: Any,
                 flash: bool, module_s: Any = ()) -> Any:
    """Forward time a layer runs again in its backward under ``recompute`` and, for selective, ``mode`` (the
    ``attention`` mode with a fused attention kernel, which recomputes its core anyway: nothing more; Megatron
    Core's ``core_attn`` runs the fused kernel's forward again)."""
    return _recomputed(recompute, mode, layer=forward_s, op_sac=op_sac_s, core=0.0 if flash else attention_core_s,
                       modules=module_s)


def recomputed_flop(recompute: str, mode: str, *, layer_fwd: float, core_fwd: float, op_sac_fwd: float,
                    flash: bool, module_fwd: Any = ()) -> float:
    """Extra hardware FLOPs per sequence (compose.step_flops): a full layer forward, the op-SAC share, 1/N of the
    layers, the Megatron modules' forward, or the attention core counted forward and backward (Korthikanti et
    al. §6)."""
    flop: float = _recomputed(recompute, mode, layer=layer_fwd, op_sac=op_sac_fwd,
                              core=0.0 if flash else 3.0 * core_fwd, modules=module_fwd)
    if recompute == "selective" and not flash and modules_mask(mode) & _BIT["core_attn"]:
        flop += 2.0 * core_fwd  # an unfused core as Korthikanti et al. §6 count it: forward and backward
    return flop


def module_kept_bytes(act: Any, mode: str, *, tp: Any, sp: Any) -> Any:
    """Bytes one device keeps of a layer (memory.LayerActivation ``act``) when selective recomputation runs the
    Megatron Core modules of ``mode``: each module drops what it keeps beyond its input (memory.py's fields for
    them); ``core_attn`` drops the scores (a fused kernel's log-sum-exp)."""
    mask = modules_mask(mode)
    repl = act.replicated_bytes - (act.norm_out_bytes if mask & _BIT["layernorm"] else 0.0) \
        - (act.mlp_repl_bytes if mask & _BIT["mlp"] else 0.0)
    if mask & (_BIT["moe"] | _BIT["shared_experts"]) and not mask & _BIT["layernorm"]:  # the checkpoint's input
        repl = repl + act.moe_input_bytes
    split = act.split_bytes - (act.mla_up_bytes if mask & _BIT["mla_up_proj"] else 0.0) \
        - (act.mlp_split_bytes if mask & _BIT["mlp"] else 0.0)
    if mask & _BIT["moe"]:
        split = split - act.moe_split_bytes
    else:
        split = split - (act.moe_act_bytes if mask & _BIT["moe_act"] else 0.0) \
            - (act.shared_expert_bytes if mask & _BIT["shared_experts"] else 0.0)
    scores = 0.0 if mask & _BIT["core_attn"] else act.scores_bytes
    return repl / (tp if sp else 1) + (split + scores) / tp
