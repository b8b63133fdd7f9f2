"""Saved inputs a frozen GEMM does not keep (fine-tuning: LoRA, frozen stacks).

A matmul keeps its input for its weight gradient only. PyTorch's generated backward of mm/addmm saves ``self``
only when ``mat2`` requires a gradient (``F.linear`` with a frozen weight keeps the weight alone under
``torch.autograd.graph.saved_tensors_hooks``: tests/unit/estimate/test_layer_saved_tensors.py), and Transformer
Engine's Linear and LayerNormLinear save their input only when the weight trains
(transformer_engine/pytorch/module/linear.py: ``backward_needs_input = is_grad_enabled and
weight.requires_grad``; layernorm_linear.py saves ``ln_out`` only ``if weight.requires_grad``). A LoRA adapter's
A matrix reads the same input and keeps it (model/finetune.py). What a frozen GEMM's input is in
estimate/memory.py's accounting, per layer:

- the QKV projection's input (the attention norm's output; replicated), unless an adapter sits on q, k or v;
- the output projection's input (split), unless an adapter sits on o or flash attention keeps it as its output;
- a dense MLP's first GEMM input (the MLP norm's output; replicated) and second GEMM input (the activation's
  output; split), unless an adapter sits on gate/up or down, or the activation's own backward needs its output
  (ReLU, a dropout after it);
- a MoE block's router and shared-expert input (the norm's output), the dispatched tokens (the routed experts'
  first GEMM input) and the experts' second GEMM inputs, unless an adapter sits on them (each expert's own).

An eager RMSNorm keeps its normalised value for the scale's gradient only (estimate/memory.py
EAGER_RMSNORM_EXTRA_BYTES): Hugging Face's LlamaRMSNorm (``weight * hidden``) a 16-bit one, Gemma's and OLMo 2's
an fp32 one (FP32_NORM_FAMILIES); a frozen scale drops it, per element of each norm of the layer (a QK-norm's
too). A Megatron Core MoE checkpoint (``--selective-recompute moe``) keeps its input, the norm's output, whether
or not the layer trains (LayerActivation.moe_input_bytes).

``kept`` is the bytes per element such an input holds where an fp8 recipe keeps its GEMM inputs as fp8 copies
(estimate/fp8.py saved_input_savings: 1) or ``e``; the router stays bf16, so the MoE norm's output is ``e``.
"""

from __future__ import annotations

from dataclasses import replace

from greentrain.estimate.memory import LayerActivation
from greentrain.model.primitives import Op, OpKind, matmul_elements
from greentrain.model.spec import TransformerSpec

_QKV = ("attn.qkv", "attn.q", "attn.kv")


def frozen_input_activation(la: LayerActivation, spec: TransformerSpec, ops: tuple[Op, ...], tokens: float, e: float,
                            kept: float, *, moe: bool, flash: bool, norm_value_bytes: float) -> LayerActivation:
    """``la`` (one decoder layer of attention and a dense or MoE MLP whose base weights are all frozen) less the
    inputs its frozen GEMMs do not keep; ``ops``: the layer's ops with their LoRA adapters (model/finetune.py);
    ``norm_value_bytes``: per element, the normalised value an eager RMSNorm keeps for its scale's gradient only
    (Llama's 16-bit one, Gemma's and OLMo 2's fp32 one; 0 for a fused norm). An adapter keeps its base op's input
    in 16 bits (``e``) where an fp8 GEMM kept a ``kept``-byte copy (a bf16 module beside the fp8 one)."""
    cast = {op.name.split(".lora_", 1)[0] for op in ops if ".lora_cast." in op.name or ".lora_drop." in op.name}
    adapted = {op.name.split(".lora_", 1)[0] for op in ops if ".lora_" in op.name} - cast
    names = {op.name for op in ops if op.kind is OpKind.MATMUL and op.params}
    t, h, back = tokens, spec.hidden_size, e - kept  # back: per element, what an adapter keeps beyond fp8's copy
    repl = split = 0.0
    if names & set(_QKV):
        repl += -back * t * h if adapted & set(_QKV) else kept * t * h
    if "attn.out" in names and "attn.out" in adapted:
        split -= back * t * spec.attn_out_width
    elif "attn.out" in names and not flash:  # flash keeps its output, the projection's input, anyway
        split += kept * t * spec.attn_out_width
    per_block = 2 if spec.post_norms else 1  # each block's norms' normalised values (and a QK-norm's)
    repl += norm_value_bytes * t * h * per_block * 2
    split += norm_value_bytes * t * (spec.q_width + spec.kv_width) if spec.qk_norm != "none" else 0.0
    mlp_norm = norm_value_bytes * t * h * per_block
    if moe:
        r, sp, deltas = _moe(la.moe_act_bytes, spec, adapted, t, e, kept, mlp_norm)
    else:
        r, sp, deltas = _dense(spec, adapted, names, t, e, kept, mlp_norm)
    own_repl, own_split = adapter_own_bytes(ops, t, cast)
    repl, split = repl - own_repl, split - own_split
    return replace(la, replicated_bytes=la.replicated_bytes - repl - r, split_bytes=la.split_bytes - split - sp,
                   **{k: max(0.0, getattr(la, k) + v) for k, v in deltas.items()})


def adapter_own_bytes(ops: tuple[Op, ...], tokens: float, cast: set[str]) -> tuple[float, float]:
    """(replicated, split) bytes ``tokens`` tokens' LoRA adapters keep of their own: every B keeps A's output (r
    wide), and an adapter that casts or drops out its input (peft's fp32 adapters, model/finetune.py lora_dtype,
    lora_dropout; its base op in ``cast``) its own copy of that input, at its GEMM's width (fp32: 4 bytes; under
    autocast the 16-bit copy), and a dropout's 1-byte mask.
    A row-parallel base op's input (o, down) and an expert's tokens are split under TP, the rest replicated.
    Counted for decoder layers of attention and a dense or MoE MLP (estimate/stage.py: not for encoder-decoder,
    MLA or Mamba layers, whose frozen inputs are not modelled either)."""
    layer_tokens = next((op.m for op in ops if op.kind is OpKind.MATMUL and not op.expert), 0.0)
    names = {op.name for op in ops}
    repl = split = 0.0
    for op in ops:
        if ".lora_a." not in op.name or not layer_tokens:
            continue
        width = op.bytes / matmul_elements(op.count, op.m, op.k, op.n)
        base, target = op.name.split(".lora_", 1)[0], op.name.rsplit(".", 1)[-1]
        per_token = width * op.m * op.count / layer_tokens  # an expert's op: its share of the tokens, each expert
        repl += per_token * op.n * tokens  # A's output, all-reduced where A is row-parallel
        mask = op.m * op.count / layer_tokens * op.k * tokens if f"{base}.lora_drop.{target}" in names else 0.0
        copy = per_token * op.k * tokens + mask if base in cast else 0.0
        split, repl = (split + copy, repl) if op.expert or base.endswith(("out", "down")) else (split, repl + copy)
    return repl, split


def _act_needs_output(spec: TransformerSpec) -> bool:
    """ReLU's backward reads its output, the second GEMM's input; a dropout after the activation keeps it too."""
    return (spec.activation == "relu" and not spec.glu) or spec.activation_dropout > 0


def _dense(spec: TransformerSpec, adapted: set[str], names: set[str], t: float, e: float, kept: float,
           mlp_norm: float) -> tuple[float, float, dict[str, float]]:
    """(replicated, split) bytes a frozen dense MLP keeps less, and what Megatron Core's ``mlp`` module frees less."""
    h, f, back = spec.hidden_size, spec.ffn_hidden_size, e - kept
    repl = split = 0.0
    if "mlp.up" in names:
        repl = -back * t * h if "mlp.up" in adapted else kept * t * h
    if "mlp.down" in names and "mlp.down" in adapted:
        split = -back * t * f
    elif "mlp.down" in names and not _act_needs_output(spec):
        split = kept * t * f
    return repl, split, {"mlp_repl_bytes": -(repl + mlp_norm), "mlp_split_bytes": -split}


def _moe(act_bytes: float, spec: TransformerSpec, adapted: set[str], t: float, e: float, kept: float,
         mlp_norm: float) -> tuple[float, float, dict[str, float]]:
    """(replicated, split) bytes a frozen MoE block keeps less: the router's and shared experts' input (the norm's
    output, bf16: the router stays bf16), the dispatched tokens and the experts' second GEMM inputs, less what
    adapters on the routed or shared experts keep; the module fields it changes (a MoE checkpoint keeps its input,
    the norm's output, whatever the layer trains: moe_input_bytes)."""
    h, f, k, back = spec.hidden_size, spec.expert_ffn_hidden_size, spec.top_k, e - kept
    shared_f = spec.num_shared_experts * (spec.shared_expert_ffn_hidden_size or f)
    needs = _act_needs_output(spec)
    up = -back * t * k * h if "mlp.experts.up" in adapted else kept * t * k * h
    down = -back * t * k * f if "mlp.experts.down" in adapted else (0.0 if needs else kept * t * k * f)
    shared = -back * t * shared_f if "mlp.shared.down" in adapted else (0.0 if needs else kept * t * shared_f)
    norm_out = 0.0 if "mlp.shared.up" in adapted else e * t * h
    act = act_bytes if down > 0 else 0.0  # the experts' activation output (LayerActivation.moe_act_bytes)
    return norm_out, up + down + shared, {"norm_out_bytes": -(norm_out + mlp_norm), "moe_input_bytes": norm_out,
                                          "moe_split_bytes": -(up + down + shared), "shared_expert_bytes": -shared,
                                          "moe_act_bytes": -act}
