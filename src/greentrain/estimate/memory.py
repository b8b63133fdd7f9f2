"""Memory per device: weights, gradients, optimizer states (ZeRO 0-3, offload), activations, reserved.

Activations follow Korthikanti et al. 2022 (arXiv 2205.05198) §4: per transformer layer, no parallelism,
16-bit activations and 1-byte dropout masks,  s*b*h*(34 + 5*a*s/h)  bytes:
  attention block 11*sbh + 5*a*s^2*b  (QKV input 2, Q and K 4, softmax output 2as^2b, its dropout mask
  as^2b, dropout output 2as^2b, V 2, output-projection input 2, dropout mask 1), MLP 19*sbh (input 2,
  activation input 8, second GEMM input 8, mask 1), two LayerNorm inputs 4*sbh.
Table 2: with tensor parallelism t the Q/K/V/scores/MLP-hidden terms (24*sbh + 5as^2b) are split by t and the
rest (10*sbh) is replicated; sequence parallelism splits the rest too (34/t); selective recomputation drops
the 5as^2b/t scores terms; full recomputation keeps only the layer input 2*sbh (/t with SP).
The formula here is the same accounting written per tensor, with the dropout masks of the model's own
dropout (``hidden_dropout``, ``attention_dropout``; none at 0: s*b*h*(32 + 2*a*s/h) for that GPT), so it also
covers GQA/MQA (K and V of width num_kv_heads*head_dim), GLU (gate and up outputs both saved), MoE (top_k copies
of each token's MLP), flash attention (no scores; a float32 log-sum-exp per query and head instead), QK-norms,
and any activation width (ReLU keeping its output only). Checked against whole transformers and Megatron-Core
layers under torch's saved-tensor hooks (tests/unit/estimate/test_layer_saved_tensors.py,
benchmarks/check_megatron_activations.py).
Pipeline: a stage holds the micro-batches its schedule keeps in flight (parallel/schedules.py, each schedule's
``held`` rule: 1F1B pp - rank, interleaving the (pp - rank - 1) * 2 + (vpp - 1) * pp + 1 model chunks of
Megatron-LM's warm-up, GPipe all of them);
the first stage adds the embedding's, the last the head's and the loss's buffers (transient_bytes).
Weights and optimizer states (bytes per parameter: estimate/state_dtypes.py): Rajbhandari et al. 2020 (ZeRO) §3:
mixed-precision Adam keeps 2 (weights)
+ 2 (gradients) + 12 (fp32 master, momentum, variance) bytes per parameter; Megatron-LM accumulates
gradients in fp32 (4 bytes), giving the 18 bytes per parameter of Korthikanti et al. Fig. 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from greentrain.estimate.recompute import module_kept_bytes, modules_mask
from greentrain.model.loss import LOSS_FP32_BYTES_PER_LOGIT
from greentrain.model.primitives import COMPOSITE_ACTIVATIONS
from greentrain.model.sac import op_sac_saved_bytes
from greentrain.model.spec import LayerKind, TransformerSpec
from greentrain.num import maximum, select, where
from greentrain.parallel.schedules import by_schedule

MASK_BYTES = 1.0  # a dropout mask element (Korthikanti et al. §4.1)
# Hugging Face's gelu_new as eager ops keeps x (pow's input), tanh's output, 0.5 x and 1 + tanh(.) where torch's
# GELU kernel keeps x: 3 tensors of the MLP's width more (transformers' GPT-2 block under saved-tensor hooks)
EAGER_GELU_EXTRA_TENSORS = 3
LSE_BYTES = 4.0  # flash attention's float32 log-sum-exp per query row and head


def hidden_mask_bytes(spec: TransformerSpec) -> float:
    """Bytes per element of a residual branch's dropout mask: 1 with hidden dropout, 0 without. PyTorch's dropout
    at p = 0 returns its input and keeps nothing (aten/native/Dropout.cpp; tests/unit/estimate), which is how
    Llama, Qwen, GPT-OSS and DeepSeek train (Megatron-Bridge's bridges set hidden_dropout 0.0; Hugging Face's
    Llama-style layers have no residual dropout)."""
    return MASK_BYTES if spec.hidden_dropout > 0 else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerActivation:
    """Saved activations of one layer, one micro-batch, on one device, in bytes."""
    replicated_bytes: float  # not split by tp unless sequence parallel
    split_bytes: float  # split by tp (Q, K, V, MLP hidden, ...) excluding the attention scores
    scores_bytes: float  # b*heads*s*s_kv terms (split by tp), dropped by selective recomputation
    input_bytes: float  # the layer input, all that full recomputation keeps
    # what torchtitan's op-level selective checkpointing keeps (estimate/recompute.py): the layer input, the
    # outputs of every other matmul and of the attention kernel; replicated (h wide) and split by tp
    op_sac_replicated_bytes: float = 0.0
    op_sac_split_bytes: float = 0.0
    # what Megatron Core's recompute modules free (estimate/recompute.py module_kept_bytes): the outputs of the
    # norms it runs as modules (before MoE, before MLA; replicated), MLA's up-projected Q, K, V (split), a dense
    # MLP beyond its input (its fused norm's output, replicated; the rest, split), the MoE block beyond its input,
    # the routed experts' activation outputs, the shared experts' tensors (split)
    norm_out_bytes: float = 0.0
    mla_up_bytes: float = 0.0
    mlp_repl_bytes: float = 0.0
    mlp_split_bytes: float = 0.0
    moe_split_bytes: float = 0.0
    moe_act_bytes: float = 0.0
    shared_expert_bytes: float = 0.0
    moe_input_bytes: float = 0.0  # the MoE norm's output a frozen layer keeps only as a MoE checkpoint's input


def _attention_saved(spec: TransformerSpec, b: int, s: int, s_kv: int, e: float, *, flash: bool, cross: bool,
                     window: int) -> tuple[float, float, float]:
    """(replicated, split, scores) bytes one attention block keeps. MLA (DeepSeek-V2 §2.1) keeps its two
    latents (not split by tensor parallelism: the down-projections are replicated) and the decompressed
    Q, K, V; a sliding window (Beltagy et al. 2020) keeps s x window scores."""
    h, heads, t = spec.hidden_size, spec.num_heads, b * s
    repl = (2 * e + hidden_mask_bytes(spec)) * t * h  # norm input, projection input, output dropout mask
    if spec.kv_lora_rank:
        repl += e * t * (spec.q_lora_rank + spec.kv_lora_rank + spec.qk_rope_head_dim)
        split = e * t * (2 * spec.q_width + 2 * spec.attn_out_width)  # Q, K; V and the output-projection input
    else:
        kv_saved = 0.0 if cross else 2 * e * t * spec.kv_width  # cross-attention K/V: the shared encoder output
        split = 2 * e * t * spec.q_width + kv_saved  # Q and the output-projection input; K and V
    keys = min(s_kv, window) if window else s_kv
    # softmax output (e), with attention dropout its mask (1 byte) and the dropout output (e); flash: a
    # log-sum-exp per query (its dropout keeps the random generator's state, not a mask)
    per_score = e + (MASK_BYTES + e if spec.attention_dropout > 0 else 0.0)
    scores = LSE_BYTES * b * heads * s if flash else per_score * b * heads * s * keys
    return repl, split, scores


def _ssm_saved(spec: TransformerSpec, b: int, s: int, e: float) -> float:
    """Bytes a state-space mixer keeps (split by tensor parallelism over its inner width). Mamba-2 (Dao & Gu
    2024 §7): in_proj output T(2I + 2GN + H), conv output T(I + 2GN), the chunk states b H c P N in fp32, the
    gated norm's two inputs 2TI, the out-projection input TI. Mamba (Gu & Dao 2023): in_proj 2TI, conv TI,
    x_proj output T(R + 2N), the scan's input and gate 2TI."""
    t, inner, n = b * s, spec.ssm_inner, spec.ssm_state_size
    if spec.ssm == "mamba2":
        g, heads = spec.ssm_num_groups, spec.ssm_num_heads
        chunks = math.ceil(s / spec.ssm_chunk_size)
        states = 4.0 * b * heads * chunks * spec.ssm_head_dim * n
        return e * t * ((2 * inner + 2 * g * n + heads) + (inner + 2 * g * n) + 2 * inner + inner) + states
    return e * (2 * t * inner + t * inner + t * (spec.ssm_dt_rank + 2 * n) + 2 * t * inner)


def _mlp_saved(spec: TransformerSpec, t: float, e: float, *, moe: bool, fused_glu: bool, eager_gelu: bool,
               moe_outputs: bool, shared_only: bool = False) -> float:
    """Split bytes of the MLP (``shared_only``: of its shared experts): activation input(s) and second GEMM input
    per routed (and shared) expert; an unfused GLU keeps act(gate) too; MoE keeps the dispatched tokens in their
    permuted order. ReLU's backward needs its output only (aten ``threshold_backward(grad, result)``), which is
    the second GEMM's input (plain MLP) or the product's (GLU): its input is not kept (transformers' T5 block
    under saved-tensor hooks)."""
    relu = spec.activation == "relu"
    # GLU: gate and up, the product; an unfused act(gate) * up keeps act(gate) too (ReLU: instead of gate).
    # Plain: the activation's input and output (the second GEMM's input); ReLU: the output only
    glu = 3 * e + (e if not fused_glu and not relu else 0.0)
    per_width = glu if spec.glu else (e if relu else 2 * e)
    if spec.activation_dropout > 0:  # its mask; its output becomes the second GEMM's input, which ReLU's was
        per_width += MASK_BYTES + (e if relu and not spec.glu else 0.0)
    if eager_gelu and spec.activation in COMPOSITE_ACTIVATIONS:  # x, tanh(.), 0.5 x, 1 + tanh(.) for x's one
        per_width += EAGER_GELU_EXTRA_TENSORS * e
    if not moe:
        return per_width * t * spec.ffn_hidden_size
    shared_f = spec.shared_expert_ffn_hidden_size or spec.expert_ffn_hidden_size
    if shared_only:
        return per_width * t * spec.num_shared_experts * shared_f
    routed = spec.top_k * spec.expert_ffn_hidden_size + spec.num_shared_experts * shared_f
    # the dispatched tokens; each routed token's expert output too where the routing weights multiply it
    outputs = (2 if moe_outputs else 1) * spec.top_k * e * t * spec.hidden_size
    return per_width * t * routed + outputs


# An RMSNorm run as eager kernels (Hugging Face's LlamaRMSNorm: x.to(fp32), pow, mean, * rsqrt, .to(e), * weight)
# keeps the fp32 upcast for pow's backward and the 16-bit normalised value for the weight product: 4 bytes per
# element more than a fused kernel, which keeps its input (e) (torch saved_tensors_hooks on LlamaRMSNorm ->
# Linear: 8.03 bytes per element in bf16 against 4, 12.03 against 8 in fp32; tests/unit/estimate).
EAGER_RMSNORM_EXTRA_BYTES = 4.0
# Gemma's RMSNorm (GemmaRMSNorm.forward: the whole norm and its (1 + weight) in fp32, then cast) and OLMo 2's
# (Olmo2RMSNorm: weight * the fp32 value, then cast) keep the fp32 normalised value instead of a 16-bit one: 8 - e
# bytes more per element than a fused norm (the same as Llama's in fp32). In bf16 a GemmaDecoderLayer keeps 50.13
# bytes per token and hidden element (46.06 counted with Llama's 4), an Olmo2DecoderLayer 62.12 (55.06).
FP32_NORM_FAMILIES = ("gemma", "gemma2", "gemma3", "gemma3_text", "olmo2")


def eager_norm_extra_bytes(spec: TransformerSpec, e: float) -> float:
    """Bytes per element an eager RMSNorm keeps beyond a fused one's input (0 for LayerNorm, one torch kernel)."""
    if spec.norm != "rmsnorm":
        return 0.0
    return 8.0 - e if spec.family in FP32_NORM_FAMILIES else EAGER_RMSNORM_EXTRA_BYTES


def layer_activation(spec: TransformerSpec, b: int, s: int, e: float, *, moe: bool, flash: bool,
                     cross_len: int = 0, fused_glu: bool = True, kind: LayerKind | None = None,
                     eager_norm: bool = False, eager_gelu: bool = False, moe_outputs: bool = False) -> LayerActivation:
    """Per-tensor activation accounting of one layer (before any parallel split), by the layer's ``kind``
    (mixer: attention, sliding, mamba, mamba2 or none; MLP: dense, moe or none; None: attention + dense or
    MoE). A GLU written as ``act(gate) * up`` (``fused_glu`` False: nanotron, Hugging Face, torchtitan) also
    keeps act(gate) for the product's backward; a fused kernel recomputes it (Megatron-LM bias_swiglu).
    ``eager_norm``: RMSNorms run as eager kernels keep eager_norm_extra_bytes more per element; ``eager_gelu``:
    Hugging Face's gelu_new as eager ops keeps EAGER_GELU_EXTRA_TENSORS more of the MLP's width; ``moe_outputs``:
    the routing weights multiply the experts' outputs (transformers' MoE blocks), which keeps them, where Megatron
    Core applies them inside the expert (benchmarks/check_megatron_activations.py). A QK-norm keeps
    its input, the projection's output (q and k width), which nothing else keeps: the rotary output is what
    attention keeps (transformers' Qwen3DecoderLayer under saved-tensor hooks; tests/unit/estimate)."""
    h, t = spec.hidden_size, b * s
    mixer = kind.mixer if kind else "attention"
    mlp = kind.mlp if kind else ("moe" if moe else "dense")
    norm_extra = eager_norm_extra_bytes(spec, e) * t * h if eager_norm else 0.0
    norms = 2 if spec.post_norms else 1  # per block: its input norm (and Gemma's post-norm)
    repl = split = scores = 0.0
    if mixer in ("attention", "sliding"):
        window = spec.sliding_window if mixer == "sliding" else 0
        for s_kv, cross in [(s, False)] + ([(cross_len, True)] if cross_len else []):
            r, sp_, sc_ = _attention_saved(spec, b, s, s_kv, e, flash=flash, cross=cross, window=window)
            repl, split, scores = repl + r + norms * norm_extra, split + sp_, scores + sc_
        if spec.qk_norm != "none":  # Qwen3, Gemma 3, OLMo 2: the norms of q and k keep their inputs (+ eager's)
            qk_extra = eager_norm_extra_bytes(spec, e) if eager_norm else 0.0
            split += (e + qk_extra) * t * (spec.q_width + spec.kv_width)
    elif mixer in ("mamba", "mamba2"):
        repl += e * t * h + norm_extra  # the norm input
        split += _ssm_saved(spec, b, s, e)
    modules: dict[str, float] = {}  # a recomputed norm runs without autograd: its output, an eager one's tensors
    if spec.kv_lora_rank and mixer in ("attention", "sliding"):  # MLA: its norm output, up-projected Q, K, V
        modules.update(norm_out_bytes=e * t * h + norm_extra, mla_up_bytes=e * t * (2 * spec.q_width
                                                                                    + spec.attn_out_width))
    if mlp != "none":
        repl += (2 * e + hidden_mask_bytes(spec)) * t * h + norms * norm_extra  # norm, GEMM inputs, dropout mask
        kw = dict(fused_glu=fused_glu, eager_gelu=eager_gelu, moe_outputs=moe_outputs)
        mlp_split = _mlp_saved(spec, t, e, moe=mlp == "moe", **kw)
        split += mlp_split
        if mlp == "moe":
            modules.update(norm_out_bytes=modules.get("norm_out_bytes", 0.0) + e * t * h + norm_extra,
                           moe_split_bytes=mlp_split, moe_act_bytes=e * t * spec.top_k * spec.expert_ffn_hidden_size,
                           shared_expert_bytes=_mlp_saved(spec, t, e, moe=True, shared_only=True, **kw))
        else:
            modules.update(mlp_repl_bytes=e * t * h + norm_extra, mlp_split_bytes=mlp_split)
    sac_repl, sac_split = op_sac_saved_bytes(spec, t, e, mixer, mlp, flash_lse=scores if flash else 0.0)
    if mixer not in ("attention", "sliding"):  # no op-SAC account of other mixers: what no recomputation keeps
        sac_repl, sac_split = repl, split + scores
    return LayerActivation(replicated_bytes=repl, split_bytes=split, scores_bytes=scores, input_bytes=e * t * h,
                           op_sac_replicated_bytes=sac_repl, op_sac_split_bytes=sac_split, **modules)


def layer_activation_bytes(act: LayerActivation, *, tp: int, sp: bool, recompute: str,
                           mode: str = "attention") -> float:
    """Korthikanti et al. 2022 Table 2, generalised: bytes one device keeps for one layer; ``mode``: what
    selective recomputation saves (estimate/recompute.py): Megatron's attention core drops the scores; op-SAC
    keeps its own list; layer-N keeps a full checkpoint's input on one layer in N and everything on the rest."""
    if recompute == "full":
        return act.input_bytes / (tp if sp else 1)
    repl = act.replicated_bytes / (tp if sp else 1)
    if recompute == "selective" and mode == "op":
        return act.op_sac_replicated_bytes / (tp if sp else 1) + act.op_sac_split_bytes / tp
    if recompute == "selective" and modules_mask(mode):
        return module_kept_bytes(act, mode, tp=tp, sp=sp)
    if recompute == "selective" and mode.startswith("layer-"):
        n = int(mode[6:])
        return (act.input_bytes / (tp if sp else 1) + (n - 1) * (repl + (act.split_bytes + act.scores_bytes) / tp)) / n
    scores = 0.0 if recompute == "selective" else act.scores_bytes
    return repl + (act.split_bytes + scores) / tp


def held_micro_batches(stage: int, *, pp: Any, vpp: Any, num_micro: Any, schedule: Any) -> Any:
    """Micro-batches of activations pipeline stage ``stage`` (0 the first, 1 the second, 2 the last) holds in
    flight under the pipeline schedule ``schedule`` (a parallel.schedules code, or a column of them): the
    schedule's record says how many (its ``held`` rule and source)."""
    rank = {0: 0.0, 1: 1.0, 2: pp - 1.0}[stage]
    return by_schedule(schedule, "held", rank, pp, vpp, num_micro)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    weights_bytes: float
    gradients_bytes: float  # those the peak holds (freed_gradient_bytes: none where the loop frees them)
    optimizer_bytes: float
    activations_bytes: float
    reserved_bytes: float
    host_bytes: float = 0.0  # optimizer states and activations offloaded to host memory (per device)
    temporary_bytes: float = 0.0  # buffers alive at the peak only: logits and loss in fp32

    @property
    def total_bytes(self) -> float:
        """What the device must hold: the allocator's peak and the memory outside it (against capacity)."""
        return self.allocator_bytes + self.reserved_bytes

    @property
    def allocator_bytes(self) -> float:
        """The caching allocator's peak, as PyTorch reports it (torch.cuda.max_memory_reserved): the tensors with
        fragmentation, without the CUDA context and NCCL's buffers (``reserved_bytes``), which PyTorch does not
        allocate. What frameworks log as peak memory (nanotron: max_memory_allocated and _reserved), and what
        `greentrain track` records as peak_cuda_reserved_bytes (its peak_cuda_bytes is the allocated peak)."""
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
                + self.temporary_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBytes:
    """Bytes per parameter of the model's state on one device (float | ndarray): ZeRO shards them."""

    weights: Any
    gradients: Any
    optimizer: Any  # on the device
    host: Any  # offloaded to host memory

    @property
    def device(self) -> Any:
        return self.weights + self.gradients + self.optimizer


def state_bytes_per_param(*, shard: Any, zero: Any, offload: Any, wb: float, gb: float, ob: float,
                          unsharded_master_bytes: float = 0.0, shards_are_master: bool = False) -> StateBytes:
    """ZeRO (Rajbhandari et al. 2020 §5): stage 1 shards the optimizer states over the gradient group
    ``shard``, 2 the gradients too, 3 the weights too; ``unsharded_master_bytes`` of the state stay whole (a
    framework whose fp32 master copy lives outside the sharded optimizer); offloading moves the optimizer
    states to host memory. ``shards_are_master``: at stage 3 the weight shards are the master parameters the
    optimizer steps (PyTorch FSDP2's MixedPrecisionPolicy: "FSDP ... keeps the high-precision sharded
    parameters in memory anyway", torch/distributed/fsdp/_fully_shard/_fsdp_api.py), so no 16-bit shard
    beside the master; the 16-bit copies exist only gathered (fsdp_gathered_bytes)."""
    mu = unsharded_master_bytes
    opt = (ob - mu) / where(zero >= 1, shard, 1.0) + mu
    w3 = 0.0 if shards_are_master else wb
    return StateBytes(weights=where(zero >= 3, w3 / shard, wb), gradients=gb / where(zero >= 2, shard, 1.0),
                      optimizer=where(offload, 0.0 * opt, opt), host=where(offload, opt, 0.0 * opt))


def transient_bytes(*, spec: TransformerSpec, held: Any, stage_activation_bytes: Any, tokens: Any, tp: Any,
                    sp: Any, e: float, embedding: Any = True, head: Any = True,
                    loss_bytes: Any = None, remat_bytes: Any = 0.0) -> tuple[Any, Any]:
    """(activations, temporary buffers) of one stage: ``held`` micro-batches of its layers' activations, the
    ends it holds (Korthikanti et al. §4.3, Megatron: input ids 8*s*b and the embedding output s*b*h per
    in-flight micro-batch on the first stage; output norm and projection input on the last) and, on the last,
    the loss's logits buffers (``loss_bytes`` per logit: model/loss.py loss_bytes_per_logit; None: the fp32 loss's).
    ``remat_bytes``: what a recomputed layer rematerialises during its backward (remat_bytes); the loss's
    buffers are gone by then (the head's backward consumed their gradient), so the larger of the two."""
    h, v = spec.hidden_size, spec.vocab_size
    first = held * (8 * tokens + tokens * h * where(sp, 1.0 / tp, 1.0))
    last = 2 * tokens * h * e / tp
    acts = held * stage_activation_bytes + where(embedding, first, 0.0 * first) + where(head, last, 0.0 * last)
    per_logit = e + LOSS_FP32_BYTES_PER_LOGIT if loss_bytes is None else loss_bytes
    temporary = maximum(where(head, tokens * v / tp * per_logit, 0.0 * tokens), remat_bytes)
    return acts, temporary


def remat_bytes(none_bytes: Any, kept_bytes: Any) -> Any:
    """Bytes one layer rematerialises while its backward runs (one micro-batch): recomputation reruns the
    layer's forward from the ``kept_bytes`` it saved, so its activations as no recomputation keeps them
    (``none_bytes``, layer_activation_bytes with recompute none) exist again until the backward consumes them
    (Chen et al. 2016, arXiv 1604.06174, §3: the peak adds one segment's activations to the checkpoints)."""
    return maximum(none_bytes - kept_bytes, 0.0)


def fsdp_gathered_bytes(*, block_params: Any, end_params: Any, wb: float, gathered: Any) -> Any:
    """Unsharded weights a fully sharded data-parallel framework with one FSDP unit per transformer block
    (``gathered``: ZeRO-3 with per-block units) holds at its peak, beside the sharded state: the block
    prefetched for the backward and the root unit (the embedding, the final norm and the LM head, which
    torchtitan and Composer leave to the root's fully_shard) gathered for the loss's backward, ``wb`` bytes
    per parameter. PyTorch FSDP2 all-gathers one unit ahead of the one running (fully_shard's implicit
    prefetch, torch/distributed/fsdp/_fully_shard/_fsdp_state.py); FSDP1 with limit_all_gathers keeps at most
    two units gathered (torch/distributed/fsdp/_runtime_utils.py)."""
    return where(gathered, wb * (block_params + end_params), 0.0 * block_params)


def freed_gradient_bytes(gradients: Any, transients: Any, freed: Any, end_bytes: Any = 0.0) -> Any:
    """Gradient bytes the peak holds beside ``transients`` (the activations and the loss's buffers). A training loop
    that frees the gradients between steps (torch.optim.Optimizer.zero_grad's set_to_none=True, its default since
    PyTorch 2.0) runs the forward with none (``freed``); the backward then writes each layer's gradients as it frees
    that layer's activations, so the peak is the larger of the transients as the backward starts and the gradients
    as it ends, beside what is still alive then (``end_bytes``: the last recomputed layer's rematerialised
    activations): the gradients add only their excess. Measured on an H200 (BENCHMARKS.md "Session 24", Llama 3 8B
    pure bf16, one micro-batch of 2 x 4,096 tokens, no DDP): 113.78 GB allocated at the peak; the sum of the terms
    127.6 GB, this 113.7 GB."""
    return select(freed, lambda: maximum(gradients + end_bytes - transients, 0.0), lambda: gradients)


def device_memory(*, params: Any, trainable: Any, state: StateBytes, activations: Any, temporary: Any,
                  reserved_bytes: float, fragmentation: float, expert_params: Any = 0.0,
                  expert_trainable: Any = 0.0, expert_state: StateBytes | None = None,
                  gathered_bytes: Any = 0.0, host_activation_bytes: Any = 0.0,
                  grads_freed: Any = False, end_bytes: Any = 0.0) -> MemoryBreakdown:
    """Memory of one device of one pipeline stage at its peak, over float | ndarray: ``params`` on the stage,
    their ``state`` (state_bytes_per_param: gradients and optimizer states only for the ``trainable`` ones, a
    frozen parameter keeps its weights alone) and the transient tensors (transient_bytes: ``activations`` and
    ``temporary`` buffers); the allocator's fragmentation multiplies what the tensors need (reserved over
    allocated). ``expert_params`` (``expert_trainable``) of ``params`` are routed experts whose state is sharded
    over the expert data-parallel group instead (``expert_state``; dp x cp x tp / (ep x etp) ranks): Megatron
    Core keeps the experts in their own gradient buffers, reduced and sharded over intra_expt_dp_group, with
    their own distributed optimizer (NVIDIA/Megatron-LM megatron/core/distributed/distributed_data_parallel.py,
    megatron/core/optimizer/__init__.py), torchtitan shards them with FSDP over efsdp = dp_shard x cp x tp / ep
    ranks (pytorch/torchtitan @b5bcd76 torchtitan/config/configs.py). ``gathered_bytes``: unsharded copies of sharded
    weights alive at the peak (fsdp_gathered_bytes); ``host_activation_bytes``: activations held in host memory;
    ``grads_freed``: the step's forward runs with no gradient allocated, ``end_bytes`` alive beside them as the
    backward ends (freed_gradient_bytes)."""
    c, k = state, 1.0 + fragmentation
    weights = params * c.weights + gathered_bytes
    grads, opt, host = trainable * c.gradients, trainable * c.optimizer, trainable * c.host + host_activation_bytes
    if expert_state is not None:  # without one the experts' state is the rest's: their terms are zero
        ce = expert_state
        weights = weights + expert_params * (ce.weights - c.weights)
        grads = grads + expert_trainable * (ce.gradients - c.gradients)
        opt = opt + expert_trainable * (ce.optimizer - c.optimizer)
        host = host + expert_trainable * (ce.host - c.host)
    grads = freed_gradient_bytes(grads, activations + temporary, grads_freed, end_bytes)
    return MemoryBreakdown(weights_bytes=weights * k, gradients_bytes=grads * k, optimizer_bytes=opt * k,
                           activations_bytes=activations * k, reserved_bytes=reserved_bytes, host_bytes=host,
                           temporary_bytes=temporary * k)
