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

An eager RMSNorm (Hugging Face's LlamaRMSNorm: ``weight * hidden``) keeps its 16-bit normalised value for the
weight's gradient only (estimate/memory.py EAGER_RMSNORM_EXTRA_BYTES): a frozen scale drops it, ``e`` per element
of each norm of the layer (a QK-norm's too).

``kept`` is the bytes per element such an input holds where an fp8 recipe keeps its GEMM inputs as fp8 copies
(estimate/fp8.py saved_input_savings: 1) or ``e``; the router stays bf16, so the MoE norm's output is ``e``.
"""

from __future__ import annotations

from dataclasses import replace

from greentrain.estimate.memory import LayerActivation
from greentrain.model.primitives import Op, OpKind
from greentrain.model.spec import TransformerSpec

_QKV = ("attn.qkv", "attn.q", "attn.kv")


def frozen_input_activation(la: LayerActivation, spec: TransformerSpec, ops: tuple[Op, ...], tokens: float, e: float,
                            kept: float, *, moe: bool, flash: bool, eager_norm: bool) -> LayerActivation:
    """``la`` (one decoder layer of attention and a dense or MoE MLP whose base weights are all frozen) less the
    inputs its frozen GEMMs do not keep; ``ops``: the layer's ops with their LoRA adapters (model/finetune.py);
    ``eager_norm``: its RMSNorms run as Llama's eager kernels, whose frozen scales keep no normalised value."""
    adapted = {op.name.split(".lora_", 1)[0] for op in ops if ".lora_" in op.name}
    names = {op.name for op in ops if op.kind is OpKind.MATMUL and op.params}
    t, h = tokens, spec.hidden_size
    repl = split = 0.0
    deltas: dict[str, float] = {}
    if not adapted & set(_QKV) and names & set(_QKV):
        repl += kept * t * h
    if not flash and "attn.out" in names and "attn.out" not in adapted:
        split += kept * t * spec.attn_out_width
    if eager_norm:
        norms = 2 * (2 if spec.post_norms else 1)
        repl += e * t * h * norms
        split += e * t * (spec.q_width + spec.kv_width) if spec.qk_norm != "none" else 0.0
    act_needs_output = (spec.activation == "relu" and not spec.glu) or spec.activation_dropout > 0
    if not moe:
        if "mlp.up" in names and "mlp.up" not in adapted:
            repl += kept * t * h
            deltas["mlp_repl_bytes"] = -kept * t * h
        if "mlp.down" in names and "mlp.down" not in adapted and not act_needs_output:
            split += kept * t * spec.ffn_hidden_size
            deltas["mlp_split_bytes"] = -kept * t * spec.ffn_hidden_size
    else:  # an adapter on the experts' (shared experts') first or second GEMM keeps that GEMM's input
        shared_f = spec.num_shared_experts * (spec.shared_expert_ffn_hidden_size or spec.expert_ffn_hidden_size)
        down_goes = not act_needs_output and "mlp.experts.down" not in adapted
        routed = kept * t * spec.top_k * ((0 if "mlp.experts.up" in adapted else h)
                                          + (spec.expert_ffn_hidden_size if down_goes else 0))
        shared = kept * t * shared_f if not act_needs_output and "mlp.shared.down" not in adapted else 0.0
        norm_out = 0.0 if "mlp.shared.up" in adapted else e * t * h  # the router's, the shared experts' input
        repl += norm_out
        split += routed + shared
        deltas.update(norm_out_bytes=-norm_out, moe_split_bytes=-(routed + shared), shared_expert_bytes=-shared,
                      moe_act_bytes=-(la.moe_act_bytes if down_goes else 0.0))
    return replace(la, replicated_bytes=la.replicated_bytes - repl, split_bytes=la.split_bytes - split,
                   **{k: max(0.0, getattr(la, k) + v) for k, v in deltas.items()})
