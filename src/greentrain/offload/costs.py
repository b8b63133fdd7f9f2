"""What one transformer layer costs over one chunk of tokens, for an offload framework: compute time (forward,
backward, recomputation per save level), saved bytes per level, state bytes, and the ends (embedding, head).

Everything is built on the estimator: ops from model/ops.py ``model_ops``, per-op roofline time from
estimate/compute.py ``local_op``/``op_time_s``, activation bytes from estimate/memory.py ``layer_activation``,
state bytes from estimate/memory.py; the ``pytorch`` framework's eager element-wise ops move the bytes counted for
the executor's own modules (offload/eager.py). Two additions live here until the estimator takes them
(design/offload.md section 4.2, "Estimator changes"):
- ``context_attention_ops``: the attention core of a chunk that packs several short sequences, or that is one
  chunk of a long sequence (its queries also see the earlier chunks' keys); the estimator's ops see one
  sequence. The causal halving of the executed FLOPs is the estimator's (``op_time_s``, ``is_causal``).
- ``profile_bytes_per_param``: bf16 optimizer state without an fp32 master (ml_dataflow keeps weight, gradient
  and both Adam moments in bf16: 8 bytes per parameter); the estimator's ``optimizer_bytes_per_param``
  always adds a 4-byte master under 16-bit training.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from greentrain.errors import ConfigError
from greentrain.estimate.compute import Sharding, local_op, loss_traffic_scale, op_time_s
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.memory import LSE_BYTES, layer_activation
from greentrain.estimate.state_dtypes import grad_bytes_per_param, optimizer_bytes_per_param, weight_bytes_per_param
from greentrain.hardware.chip import Chip
from greentrain.model.ops import Op, OpKind, model_ops
from greentrain.model.spec import TransformerSpec
from greentrain.offload.config import LEVELS, OffloadFramework
from greentrain.offload.dataflow import chunk_activation_bytes, dataflow_chunking, host_sticky_parts, sticky_parts
from greentrain.offload.eager import executor_eager_bytes

RMS_STAT_BYTES = 4.0  # one fp32 reciprocal RMS per token and norm (ml_dataflow keeps both norms' statistics)


def context_attention_ops(ops: tuple[Op, ...], *, seq_len: int, span_tokens: int) -> tuple[Op, ...]:
    """``ops`` (built by ``model_ops`` for sequences of ``span_tokens``) with the attention core of
    ``seq_len``-token sequences: a chunk of C tokens costs 4 C s q forward FLOPs (full-score convention, halved
    when executed causally) whether it packs C/s short sequences or is one of s/C chunks of a long one."""
    factor = seq_len / span_tokens
    return tuple(dataclasses.replace(op, flop=op.flop * factor, bytes=op.bytes * max(1.0, factor))
                 if op.kind is OpKind.ATTENTION else op for op in ops)


def profile_bytes_per_param(profile: OffloadFramework, optimizer: str, precision: str,
                            grad_dtype: str) -> tuple[float, float, float]:
    """(weight, gradient, optimizer) bytes per parameter under a framework (the estimator's
    memory.state_bytes_per_param is what a device holds of them after ZeRO sharding and offload).
    ``state_dtype_bytes`` set: every state in that dtype and Adam's two moments (the estimator's fp32 moment
    bytes x dtype / 4), plus a 4-byte master if asked."""
    if profile.state_dtype_bytes <= 0:
        return (weight_bytes_per_param(precision), grad_bytes_per_param(grad_dtype, precision),
                optimizer_bytes_per_param(optimizer, precision))
    b = profile.state_dtype_bytes
    return b, b, optimizer_bytes_per_param(optimizer, "bf16", b, bool(profile.master_weights))


def _recompute_fractions(spec: TransformerSpec, profile: OffloadFramework) -> dict[str, dict[str, float]]:
    """Forward ops recomputed in backward per host level: op name -> fraction of it.

    ml_dataflow (transformer_demo.c save levels): input keeps K, V and the norms' statistics, so the backward
    recomputes Q (its share of the fused qkv GEMM), the attention core, O, the residual and the FFN up
    projections and activation; attention also keeps the attention output and its log-sum-exp, so the core is
    not recomputed. PyTorch: checkpointing recomputes the whole layer forward (input); selective checkpointing
    that saves the attention kernel's outputs recomputes everything else (attention)."""
    q_share = spec.q_width / (spec.q_width + 2 * spec.kv_width)
    if profile.layout == "ml_dataflow":
        attn = {"attn.norm": 1.0, "attn.qkv": q_share, "attn.out": 1.0, "attn.dropout_residual": 1.0,
                "mlp.norm": 1.0, "mlp.up": 1.0, "mlp.act": 1.0}
        return {"input": {**attn, "attn.flash": 1.0}, "attention": attn, "full": {}}
    names = ("attn.norm", "attn.qkv", "attn.flash", "attn.out", "attn.dropout_residual", "mlp.norm", "mlp.up",
             "mlp.act", "mlp.down", "mlp.dropout_residual")
    full = {n: 1.0 for n in names}
    return {"input": full, "attention": {n: 1.0 for n in names if n != "attn.flash"}, "full": {}}


def _saved_bytes(spec: TransformerSpec, profile: OffloadFramework, nseq: int, span: int,
                 e: float) -> dict[str, float]:
    """Bytes one layer saves for one chunk at each level, and kept on the device ("device")."""
    t = nseq * span
    d, q, kv, f, heads = spec.hidden_size, spec.q_width, spec.kv_width, spec.ffn_hidden_size, spec.num_heads
    up = 2 if spec.glu else 1
    if profile.layout == "ml_dataflow":  # per token: x; K, V; two RMS statistics | + LSE, attention output |
        inp = t * (e * d + 2 * e * kv + 2 * RMS_STAT_BYTES)  # + Q, O output, FFN x1 and x3
        att = inp + t * (LSE_BYTES * heads + e * q)
        full = att + t * (e * q + e * d + up * e * f)
        # a device slot is what ml_dataflow's recording program allocates per (layer, chunk):
        # get_chunk_activations_size (offload/dataflow.py)
        return {"input": inp, "attention": att, "full": full, "device": chunk_activation_bytes(spec, t, e)}
    # greentrain's executor (offload/llama.py, eager PyTorch): what autograd saves per token, op by op
    # (torch/csrc/autograd/derivatives.yaml: a product saves the operand the other's gradient needs): each
    # RMSNorm its input, x * rsqrt, the normed output and one statistic; q and k after rotary (the rotary
    # products save only cos and sin), v; the SDPA output and its fp32 log-sum-exp; the flattened attention
    # output; SwiGLU gate, silu, up and product. The attention level keeps x, q, k, v, the SDPA output and LSE.
    full = t * (e * (6 * d + 3 * q + 2 * kv + up * 2 * f + 2) + LSE_BYTES * heads)
    att = t * (e * (d + 2 * q + 2 * kv) + LSE_BYTES * heads)
    inp = layer_activation(spec, nseq, span, e, moe=False, flash=True).input_bytes
    # device working set of a layer's backward (its MLP backward is the peak, tests/unit/offload): the MLP's
    # activation gradients (up x ffn + hidden per token) over what is live; input: the whole layer recomputed
    # (= full) too; attention: the post-attention checkpoint's inputs (x, the attention output) back from the
    # host and what it recomputes (its norm, the attention output it projects, the SwiGLU tensors); full: what
    # the MLP backward unpacks (the same post-attention tensors). Accounted on the tiny llama (fp32, 256 and
    # 1,024 tokens, 2026-11-26), bytes per token over the executor's fixed bytes: input 6,176 (modelled 5,912),
    # attention 4,620 (4,868), full 3,080 (3,076).
    post = t * e * (3 * d + 1 + q + up * 2 * f)
    grads = t * e * (up * f + d)
    return {"input": inp, "attention": att, "full": full, "device": full, "activation_grads": grads,
            "working_attention": t * e * (d + q) + post + grads, "working_full": post}


def scaled_efficiency(eff: Efficiency, profile: OffloadFramework) -> Efficiency:
    """The estimator's chip efficiency with the framework's two kernel scales (matmul, attention), capped at 1."""
    a = profile.attention_scale
    return dataclasses.replace(eff, matmul_max=min(1.0, eff.matmul_max * profile.matmul_scale),
                               attention_max_d64=min(1.0, eff.attention_max_d64 * a),
                               attention_max_d128=min(1.0, eff.attention_max_d128 * a))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkCosts:
    """One transformer layer over one chunk (and the ends over one chunk), on one chip, for one profile."""

    chunk_tokens: int
    chunks_per_round: int  # chunks of one round (layer-major) or of one micro-batch
    sequences_per_round: float
    num_layers: int
    fwd_s: float
    bwd_s: float
    recompute_s: dict[str, float]  # per host level
    recompute_flop: dict[str, float]
    saved_bytes: dict[str, float]  # per level and "device"
    layer_params: float
    weight_bytes_per_param: float
    grad_bytes_per_param: float
    optimizer_bytes_per_param: float
    end_params: float
    table_params: float  # one vocabulary x hidden table (embedding or head)
    largest_tensor_params: float  # a layer's largest weight (an MLP matrix, ffn x hidden)
    ends_fwd_s: float  # embedding + head + loss, one chunk
    ends_bwd_s: float
    model_flop_per_chunk: float  # 3 x forward, every layer and the ends
    head_logit_bytes_per_token: float  # vocabulary x (16-bit logits + fp32 gradient)
    context_bytes: float  # K and V of a whole sequence split into chunks (and their fp32 gradients)
    adam_device_s_per_param: float  # a memory-bound AdamW step on the device
    sticky: tuple[tuple[str, float], ...] = ()  # ml_dataflow: what its program reserves first (offload/dataflow.py)
    host_sticky: tuple[tuple[str, float], ...] = ()  # ml_dataflow: its host ends and transitions (dataflow.py)

    @property
    def tokens_per_round(self) -> int:
        return self.chunk_tokens * self.chunks_per_round

    @property
    def layer_state_bytes(self) -> float:
        return self.layer_params * (self.weight_bytes_per_param + self.grad_bytes_per_param
                                    + self.optimizer_bytes_per_param)


def _flop(ops: tuple[Op, ...], causal: bool) -> float:
    """Model FLOPs of ``ops``, the attention core halved when causal (the FLOPs executed; ml_dataflow counts
    its MFU this way; greentrain's `plan` keeps the full-score convention of Korthikanti et al.)."""
    return sum(op.flop * (0.5 if causal and op.kind is OpKind.ATTENTION else 1.0) for op in ops)


def _chunking(profile: OffloadFramework, spec: TransformerSpec, seq_len: int, micro_batch: int,
              e: float) -> tuple[int, int, int, float]:
    """(sequences per chunk op list, span tokens, chunks per round, sequences per round). ml_dataflow
    (offload/dataflow.py ``dataflow_chunking``, the minimum chunk from the profile): a round has as many
    sequence groups as make a layer's chunk activations about its weights, at least one
    (transformer_record_throughput.c ``main``: num_seq_groups_per_round = MAX(1, round(fwd_block_size /
    chunk_act_size / num_chunks_per_seq)), C's round: half away from zero)."""
    if profile.chunk_tokens <= 0:
        return micro_batch, seq_len, 1, float(micro_batch)
    chunk, per_seq, seqs_in_chunk = dataflow_chunking(seq_len, profile.chunk_tokens)
    weights = spec.layer_params(moe=False, cross_attention=False) * e
    groups = max(1, math.floor(weights / chunk_activation_bytes(spec, chunk, e) / per_seq + 0.5))
    return 1, chunk, per_seq * groups, float(groups * seqs_in_chunk)


def _op_timers(chip: Chip, eff: Efficiency, profile: OffloadFramework, precision: str,
               e: float) -> tuple[Callable[[Op], float], Callable[[Op], float]]:
    """(forward, backward) roofline time of one op on one chip (estimate/compute.py ``op_time_s``). An op of
    ``profile.eager_ops`` moves the executor's counted eager bytes (offload/eager.py), forward and backward; every
    other op's backward is its forward x ``backward_factor``, and the cross-entropy moves its loss kernel's bytes
    (compute.loss_traffic_scale), as in the estimator."""
    peak, bw = chip.peak_flop_per_s(precision), chip.memory_bytes_per_s

    def time_s(op: Op, backward: bool) -> float:
        fused = op.kind is OpKind.ATTENTION and op.name.endswith(".flash")
        local = local_op(op, Sharding())
        eager = op.eager_kind in profile.eager_ops
        scale, backward_factor = loss_traffic_scale(op, eff)  # a cross-entropy by its kernel, as the estimator
        if eager:
            scale = executor_eager_bytes(op, e)[backward] / op.bytes
        local = dataclasses.replace(local, bytes=local.bytes * scale)
        t = op_time_s(local, peak, bw, eff, fused, fused and profile.causal)
        return t * backward_factor if backward and not eager else t

    return (lambda op: time_s(op, False)), (lambda op: time_s(op, True))


@cache
def chunk_costs(spec: TransformerSpec, chip: Chip, eff: Efficiency, profile: OffloadFramework, seq_len: int,
                micro_batch: int, precision: str, optimizer: str, grad_dtype: str) -> ChunkCosts:
    if spec.arch != "decoder" or spec.is_moe:
        raise ConfigError("model", spec.name, "offload plans need a dense decoder-only layer stack")
    e = 4.0 if precision in ("fp32", "tf32") else 2.0
    nseq, span, chunks, seqs = _chunking(profile, spec, seq_len, micro_batch, e)
    mops = model_ops(spec, nseq, span, e, flash=True)
    (group,) = mops.layers
    layer = context_attention_ops(group.ops, seq_len=seq_len, span_tokens=span)
    op_s, op_bwd_s = _op_timers(chip, scaled_efficiency(eff, profile), profile, precision, e)
    fwd = sum(op_s(op) for op in layer)
    bwd = sum(op_bwd_s(op) for op in layer)
    rec_s: dict[str, float] = {}
    rec_f: dict[str, float] = {}
    for level, fractions in _recompute_fractions(spec, profile).items():
        chosen = [(op, fractions[op.name]) for op in layer if op.name in fractions]
        rec_s[level] = sum(op_s(op) * fr for op, fr in chosen)
        rec_f[level] = sum(_flop((op,), profile.causal) * fr for op, fr in chosen)
    ends = mops.embedding + mops.head
    w, g, o = profile_bytes_per_param(profile, optimizer, precision, grad_dtype)
    t = nseq * span
    ctx = 2 * seq_len * spec.kv_width * (e + 4.0) if chunks > 1 else 0.0
    adam_bytes = w + g + o + w + o  # read weight, gradient, states; write weight and states
    dataflow = profile.layout == "ml_dataflow"
    return ChunkCosts(
        chunk_tokens=t, chunks_per_round=chunks, sequences_per_round=seqs, num_layers=spec.num_layers,
        fwd_s=fwd, bwd_s=bwd, recompute_s=rec_s, recompute_flop=rec_f,
        saved_bytes=_saved_bytes(spec, profile, nseq, span, e),
        layer_params=float(spec.layer_params(moe=False, cross_attention=False)),
        weight_bytes_per_param=w, grad_bytes_per_param=g, optimizer_bytes_per_param=o,
        end_params=float(spec.embedding_params() + spec.output_params()),
        table_params=float(spec.vocab_size * spec.hidden_size),
        largest_tensor_params=float(max(spec.ffn_hidden_size, spec.q_width, spec.hidden_size) * spec.hidden_size),
        ends_fwd_s=sum(op_s(op) for op in ends), ends_bwd_s=sum(op_bwd_s(op) for op in ends),
        model_flop_per_chunk=3.0 * (spec.num_layers * _flop(layer, profile.causal) + _flop(ends, False)),
        head_logit_bytes_per_token=spec.vocab_size * (e + 4.0), context_bytes=ctx,
        adam_device_s_per_param=adam_bytes / (chip.memory_bytes_per_s * eff.memory),
        sticky=tuple(sticky_parts(spec, seq_len, span, chunks, max(1, span // seq_len), e).items()) if dataflow
        else (), host_sticky=tuple(host_sticky_parts(spec, span, chunks, e).items()) if dataflow else ())


assert LEVELS == ("input", "attention", "full")  # _recompute_fractions and _saved_bytes name these three
