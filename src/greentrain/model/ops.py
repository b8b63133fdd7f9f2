"""A model expands into ops: matmuls (m, k, n), attention cores and element-wise ops, each with its
forward FLOPs and bytes. Every part of greentrain (estimate, search, simulate, emulate) costs these ops.

Conventions (Korthikanti et al. 2022, arXiv 2205.05198, §4 and appendix; Narayanan et al. 2021 §5.1):
- a matmul (m x k) @ (k x n) costs 2*m*k*n forward FLOPs and 4*m*k*n backward (input and weight gradients);
- attention scores and attention-over-values count the full s x s_kv product (no causal halving), so the
  sum over a GPT layer is 24*T*h^2*(1 + s/(6h)) forward (T = b*s tokens), as in the paper;
- element-wise ops (norms, softmax, dropout, activations, residual adds) count 0 model FLOPs but move
  bytes: they are memory bound and are costed by bytes.

``shard`` says how tensor parallelism (degree t) splits an op: COLUMN divides n, ROW divides k,
HEADS divides the head batch, HIDDEN divides an element-wise op on an already split activation,
TOKENS is an element-wise op on the full hidden width (replicated under TP, split by t with sequence
parallelism), REPLICATED is never split, VOCAB divides the vocabulary (the LM head and its loss).
Expert ops (``expert=True``) of a MoE layer are further spread over expert parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from greentrain.model.finetune import FULL, Finetune, Flow, expert_adapter_params, layer_ops
from greentrain.model.loss import loss_traffic_bytes
from greentrain.model.mla import mla_projection_ops
from greentrain.model.primitives import (
    COMPOSITE_ACTIVATIONS,
    FLASH_KERNELS,
    NORM_KERNELS,
    Op,
    OpKind,
    Shard,
    eager_bytes_per_elt,
    eager_kernels,
    elementwise,
    matmul,
)
from greentrain.model.routing import EXPERT_ACT, EXPERT_DOWN, EXPERT_UP, expert_extra_ops, token_permutation_ops
from greentrain.model.sac import op_sac
from greentrain.model.spec import LayerKind, TransformerSpec
from greentrain.model.ssm import ssm_ops

__all__ = ["COMPOSITE_ACTIVATIONS", "LayerGroup", "ModelOps", "Op", "OpKind", "Shard",
           "active_params_without_input_embedding", "attention_ops", "eager_bytes_per_elt", "elementwise",
           "layer_groups", "matmul", "mlp_ops", "model_flop_per_sequence", "model_ops", "trainable_params"]


def _norm(spec: TransformerSpec, name: str, elements: float, e: float, shard: Shard) -> Op:
    """A norm over ``elements`` values: one kernel, or HF's eager RMSNorm chain (eager_bytes_per_elt)."""
    if spec.norm != "rmsnorm":
        return elementwise(name, elements, e, shard, kernels=NORM_KERNELS)
    return elementwise(name, elements, e, shard, eager_kind="norm", eager_bytes_per_elt=eager_bytes_per_elt("norm", e),
                       kernels=NORM_KERNELS, eager_kernels=eager_kernels("norm", e))


def _rope(spec: TransformerSpec, tokens: float, e: float, prefix: str) -> list[Op]:
    """Rotary embeddings rotate q and k (Su et al. 2021, RoFormer eq. 34); MLA rotates its decoupled rotary
    part of every query head and the one shared rotary key (DeepSeek-V2 §2.1.3)."""
    if not spec.rotary:
        return []
    if spec.is_mla:
        elements = tokens * (spec.num_heads + 1) * spec.qk_rope_head_dim
    else:
        elements = tokens * (spec.q_width + spec.kv_width)
    return [elementwise(f"{prefix}.rope", elements, e, Shard.HIDDEN, eager_kind="rope",
                        eager_bytes_per_elt=eager_bytes_per_elt("rope", e), eager_kernels=eager_kernels("rope", e))]


def _projection_ops(spec: TransformerSpec, tokens: float, kv_tokens: float, e: float, prefix: str,
                    cross: bool) -> list[Op]:
    """Q, K, V projections (MLA: model/mla.py) and the QK-norm if any."""
    d, q, kv = spec.hidden_size, spec.q_width, spec.kv_width
    if spec.is_mla:
        ops = mla_projection_ops(spec, tokens, e, prefix)
    elif cross:  # queries from the decoder, keys and values from the encoder output
        ops = [matmul(f"{prefix}.q", tokens, d, q, e, Shard.COLUMN),  # (T, d) @ (d, q)
               matmul(f"{prefix}.kv", kv_tokens, d, 2 * kv, e, Shard.COLUMN)]  # (T_kv, d) @ (d, 2 kv)
    else:
        ops = [matmul(f"{prefix}.qkv", tokens, d, q + 2 * kv, e, Shard.COLUMN)]  # (T, d) @ (d, q + 2 kv)
    if spec.qk_norm != "none":  # Qwen3 / Gemma 3 per head, OLMo 2 over the full width: a norm of q and k
        ops.append(_norm(spec, f"{prefix}.qk_norm", tokens * q + kv_tokens * kv, e, Shard.HIDDEN))
    return ops + ([] if cross else _rope(spec, tokens, e, prefix))


def attention_ops(spec: TransformerSpec, b: int, s: int, s_kv: int, e: float, prefix: str,
                  cross: bool, flash: bool, window: int = 0) -> list[Op]:
    """Self- or cross-attention block: norm, projections, attention core, output projection, residual.

    Naive attention (Megatron-LM 2022) materialises the b*heads*s*s_kv scores: softmax and dropout are
    separate memory-bound ops. Flash attention (Dao et al. 2022; Dao 2023, FlashAttention-2) fuses scores,
    softmax and values into one kernel that never writes the scores; its backward recomputes them and
    costs about 2.5x its forward (FlashAttention-2 §3.1).

    ``window`` > 0 (a sliding-window layer, Beltagy et al. 2020 §3.1; Mistral 7B §2): each query attends to
    its last ``window`` keys, so the core costs s x min(s_kv, window) per head instead of s x s_kv (the
    same no-causal-halving convention as full attention). Query/key and value head widths may differ (MLA).
    """
    d, heads, dqk, dv = spec.hidden_size, spec.num_heads, spec.head_dim, spec.v_head_dim
    q, kv, out_w = spec.q_width, spec.kv_width, spec.attn_out_width
    tokens, kv_tokens = b * s, b * s_kv
    keys = min(s_kv, window) if window else s_kv  # keys each query attends to
    scores = b * heads * s * keys
    ops = [_norm(spec, f"{prefix}.norm", tokens * d, e, Shard.TOKENS)]
    ops += _projection_ops(spec, tokens, kv_tokens, e, prefix, cross)
    if flash:
        io = (tokens * (q + out_w) + kv_tokens * (kv + spec.num_kv_heads * dv)) * e  # read q, k, v; write o
        ops.append(Op(name=f"{prefix}.flash", kind=OpKind.ATTENTION, shard=Shard.HEADS,
                      flop=2.0 * scores * (dqk + dv), bytes=io, count=b * heads, m=s, k=(dqk + dv) / 2,
                      n=keys, attention_core=True, backward_factor=2.5, window=window, kernels=FLASH_KERNELS))
    else:
        ops += [
            replace(matmul(f"{prefix}.scores", s, dqk, keys, e, Shard.HEADS, count=b * heads, weight=False),
                    window=window),
            *([elementwise(f"{prefix}.softcap", scores, e, Shard.HEADS, attention_core=True)]
              if spec.logit_softcap else []),  # Gemma 2: scores = c tanh(scores / c)
            elementwise(f"{prefix}.softmax", scores, e, Shard.HEADS, attention_core=True),
            # attention dropout keeps a 1-byte mask per score (Korthikanti et al. §4.1)
            *([elementwise(f"{prefix}.dropout", scores, e, Shard.HEADS, extra_bytes_per_elt=1.0,
                           attention_core=True)] if spec.attention_dropout > 0 else []),
            replace(matmul(f"{prefix}.values", s, keys, dv, e, Shard.HEADS, count=b * heads, weight=False),
                    window=window),
        ]
    ops.append(matmul(f"{prefix}.out", tokens, out_w, d, e, Shard.ROW))  # (T, heads*dv) @ (heads*dv, d)
    if spec.post_norms:  # Gemma 2/3: the block's output is normalised before the residual add
        ops.append(_norm(spec, f"{prefix}.post_norm", tokens * d, e, Shard.TOKENS))
    ops.append(_dropout_residual(spec, prefix, tokens * d, e))
    return ops


def _dropout_residual(spec: TransformerSpec, prefix: str, elements: float, e: float) -> Op:
    """The block's output added to the residual stream (Megatron's bias-dropout-add): reads both, writes the
    sum, and with hidden dropout writes a 1-byte mask too (Korthikanti et al. §4.1)."""
    return elementwise(f"{prefix}.dropout_residual", elements, e, Shard.TOKENS, reads=2.0,
                       extra_bytes_per_elt=1.0 if spec.hidden_dropout > 0 else 0.0)


def _act(spec: TransformerSpec, name: str, elements: float, e: float, expert: bool = False) -> list[Op]:
    """The MLP's activation over ``elements`` hidden values: act(gate) * up for a GLU (two eager kernels or one
    fused: eager_bytes_per_elt), act(x) otherwise; then the activation dropout (T5, BART), which writes a
    1-byte mask beside its output."""
    composite = spec.activation in COMPOSITE_ACTIVATIONS
    if not spec.glu and not composite:
        act = elementwise(name, elements, e, Shard.HIDDEN, expert=expert)
    elif not spec.glu:
        act = elementwise(name, elements, e, Shard.HIDDEN, expert=expert, eager_kind="gelu",
                          eager_bytes_per_elt=eager_bytes_per_elt("gelu", e), eager_kernels=eager_kernels("gelu", e))
    else:  # an eager GLU whose activation is itself a chain (T5 v1.1's gated-gelu): that chain replaces act(gate)
        act_bytes, (act_fwd, act_bwd) = (eager_bytes_per_elt("gelu", e), eager_kernels("gelu", e)) if composite \
            else (2 * e, (1.0, 2.0))
        fwd, bwd = eager_kernels("glu", e)
        act = elementwise(name, elements, e, Shard.HIDDEN, reads=2.0, expert=expert, eager_kind="glu",
                          eager_bytes_per_elt=eager_bytes_per_elt("glu", e) - 2 * e + act_bytes,
                          eager_kernels=(fwd - 1 + act_fwd, bwd - 2 + act_bwd))
    if spec.activation_dropout <= 0:
        return [act]
    return [act, elementwise(f"{name}_dropout", elements, e, Shard.HIDDEN, expert=expert, extra_bytes_per_elt=1.0)]


def mlp_ops(spec: TransformerSpec, tokens: int, e: float, prefix: str, moe: bool) -> list[Op]:
    """Dense MLP, or MoE: the router (T, d) @ (d, E), then dropless routing (every token reaches its top_k
    experts, T * top_k expert-token pairs, spread evenly over the experts; with a capacity factor c each
    expert computes c times its share, padded), moved to their experts and back (model/routing.py, with GPT-OSS's
    extra element-wise ops), and shared experts that every token passes through (DeepSeekMoE, Dai et al. 2024
    §3.2). Auxiliary-loss-free balancing (DeepSeek-V3 §2.1.2) and the top-k selection cost nothing here."""
    d = spec.hidden_size
    up = 2 if spec.glu else 1  # gate and up projections are fused into one matmul
    ops = [_norm(spec, f"{prefix}.norm", tokens * d, e, Shard.TOKENS)]
    if not moe:
        f = spec.ffn_hidden_size
        ops += [
            matmul(f"{prefix}.up", tokens, d, up * f, e, Shard.COLUMN),
            *_act(spec, f"{prefix}.act", tokens * f, e),
            matmul(f"{prefix}.down", tokens, f, d, e, Shard.ROW),
        ]
    else:
        f, n_exp = spec.expert_ffn_hidden_size, spec.num_experts
        per_expert = tokens * spec.top_k / n_exp * (spec.capacity_factor or 1.0)  # balanced (or capacity) load
        into, back = token_permutation_ops(spec, tokens, e, prefix)  # model/routing.py
        clamp, bias = expert_extra_ops(spec, per_expert * n_exp, f, e, prefix)  # GPT-OSS's (model/routing.py)
        ops += [
            matmul(f"{prefix}.router", tokens, d, n_exp, e, Shard.REPLICATED), into,
            matmul(f"{prefix}.{EXPERT_UP}", per_expert, d, up * f, e, Shard.COLUMN, count=n_exp, expert=True), *clamp,
            *_act(spec, f"{prefix}.{EXPERT_ACT}", per_expert * n_exp * f, e, expert=True),
            matmul(f"{prefix}.{EXPERT_DOWN}", per_expert, f, d, e, Shard.ROW, count=n_exp, expert=True), *bias, back,
        ]
        if spec.num_shared_experts:
            sh, f = spec.num_shared_experts, spec.shared_expert_ffn_hidden_size
            ops += [
                matmul(f"{prefix}.shared.up", tokens, d, up * f, e, Shard.COLUMN, count=sh),
                *_act(spec, f"{prefix}.shared.act", sh * tokens * f, e),
                matmul(f"{prefix}.shared.down", tokens, f, d, e, Shard.ROW, count=sh),
            ]
            if spec.shared_expert_gate:  # (T, d) @ (d, 1), then a sigmoid
                ops.append(matmul(f"{prefix}.shared.gate", tokens, d, 1, e, Shard.REPLICATED))
    if spec.post_norms:
        ops.append(_norm(spec, f"{prefix}.post_norm", tokens * d, e, Shard.TOKENS))
    ops.append(_dropout_residual(spec, prefix, tokens * d, e))
    return ops


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerGroup:
    """``count`` identical transformer layers and the ops of one of them (one micro-batch, forward)."""

    name: str
    count: int
    ops: tuple[Op, ...]
    moe: bool = False
    kind: LayerKind | None = None  # mixer and MLP of a decoder layer (None: encoder / encoder-decoder layers)
    params: int = 0  # all parameters of one layer of the group (TransformerSpec.kind_params), norms included
    expert_params: int = 0  # the routed experts' share of ``params`` (spread over expert parallelism)
    frozen_params: int = 0  # the share of ``params`` that carries no gradient (fine-tuning: model/finetune.py)

    @property
    def flop(self) -> float:
        return sum(op.flop for op in self.ops)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOps:
    """All ops of one forward pass of one micro-batch."""

    micro_batch: int
    seq_len: int
    target_seq_len: int
    layers: tuple[LayerGroup, ...]
    embedding: tuple[Op, ...]
    head: tuple[Op, ...]
    embedding_trains: bool = True  # the token table carries a gradient (model/finetune.py)
    head_trains: bool = True  # the LM head does

    @property
    def num_layers(self) -> int:
        return sum(g.count for g in self.layers)

    def forward_flop(self) -> float:
        layer = sum(g.count * g.flop for g in self.layers)
        return layer + sum(op.flop for op in self.embedding + self.head)

    def train_flop(self) -> float:
        """Model FLOPs of one forward and backward: a matmul's backward is twice its forward (input and weight
        gradients), times the share of it that runs (Op.backward_share: 3 x forward when every weight trains)."""
        def flop(ops: tuple[Op, ...]) -> float:
            return sum(op.flop * (1.0 + 2.0 * op.backward_share) for op in ops)

        return sum(g.count * flop(g.ops) for g in self.layers) + flop(self.embedding) + flop(self.head)

    def all_ops(self) -> list[Op]:
        out: list[Op] = list(self.embedding)
        for g in self.layers:
            out += list(g.ops) * g.count
        return out + list(self.head)


def _kind_ops(spec: TransformerSpec, kind: LayerKind, b: int, s: int, e: float, flash: bool) -> list[Op]:
    """The ops of one decoder layer of ``kind`` (decoder-only), with their op-SAC shares (op_sac)."""
    if kind.mixer == "none":
        ops = []
    elif kind.mixer in ("mamba", "mamba2"):
        ops = ssm_ops(spec, b, s, e, kind.mixer)
    else:
        window = spec.sliding_window if kind.mixer == "sliding" else 0
        ops = attention_ops(spec, b, s, s, e, "attn", cross=False, flash=flash, window=window)
    if kind.mlp != "none":
        ops += mlp_ops(spec, b * s, e, "mlp", kind.mlp == "moe")
    return op_sac(spec, ops)


def mtp_ops(spec: TransformerSpec, b: int, s: int, e: float, flash: bool) -> list[Op]:
    """One multi-token-prediction module (DeepSeek-V3 §2.2, eq. 21-23): normalise the hidden state and the
    next token's embedding, project their concatenation (T, 2d) @ (2d, d), one transformer layer, and the
    shared output head with its own cross-entropy."""
    d, t = spec.hidden_size, b * s
    kind = LayerKind(mixer="attention", mlp="moe" if spec.is_moe else "dense")
    return [elementwise("mtp.norms", 2 * t * d, e, Shard.TOKENS),
            matmul("mtp.proj", t, 2 * d, d, e, Shard.REPLICATED),
            *_kind_ops(spec, kind, b, s, e, flash),
            *_head_ops(spec, t, e, "mtp.")]


def layer_groups(spec: TransformerSpec, b: int, s: int, s_dec: int, e: float,
                 flash: bool) -> tuple[LayerGroup, ...]:
    """Encoder layers (if any), then one group per kind of decoder layer (dense, MoE, sliding-window,
    state-space: ``TransformerSpec.layer_kinds``) in order of first appearance, then the multi-token-
    prediction modules."""
    if spec.arch == "encoder-decoder":
        enc = (attention_ops(spec, b, s, s, e, "enc.attn", cross=False, flash=flash)
               + mlp_ops(spec, b * s, e, "enc.mlp", False))
        groups = [LayerGroup(name="encoder", count=spec.num_encoder_layers, ops=tuple(enc),
                             params=spec.layer_params(moe=False, cross_attention=False))]
        n_moe = spec.num_moe_layers()
        for moe, count in ((False, spec.num_layers - n_moe), (True, n_moe)):
            if count:
                ops = (attention_ops(spec, b, s_dec, s_dec, e, "attn", cross=False, flash=flash)
                       + attention_ops(spec, b, s_dec, s, e, "xattn", cross=True, flash=flash)
                       + mlp_ops(spec, b * s_dec, e, "mlp", moe))
                groups.append(LayerGroup(name="decoder-moe" if moe else "decoder", count=count, ops=tuple(ops),
                                         moe=moe, params=spec.layer_params(moe=moe, cross_attention=True),
                                         expert_params=spec.num_experts * spec.expert_params() if moe else 0))
        return tuple(groups)
    experts = spec.num_experts * spec.expert_params()
    groups = [LayerGroup(name=kind.name, count=count, ops=tuple(_kind_ops(spec, kind, b, s, e, flash)),
                         moe=kind.mlp == "moe", kind=kind, params=spec.kind_params(kind),
                         expert_params=experts if kind.mlp == "moe" else 0)
              for kind, count in spec.layer_kinds()]
    if spec.num_mtp_layers:
        kind = LayerKind(mixer="attention", mlp="moe" if spec.is_moe else "dense")
        groups.append(LayerGroup(name="mtp", count=spec.num_mtp_layers, ops=tuple(mtp_ops(spec, b, s, e, flash)),
                                 moe=spec.is_moe, kind=kind, params=spec.mtp_params() // spec.num_mtp_layers,
                                 expert_params=experts if spec.is_moe else 0))
    return tuple(groups)


def _head_ops(spec: TransformerSpec, tokens: int, e: float, prefix: str = "") -> tuple[Op, ...]:
    d, v = spec.hidden_size, spec.vocab_size
    return (
        _norm(spec, f"{prefix}final_norm", tokens * d, e, Shard.TOKENS),
        matmul(f"{prefix}lm_head", tokens, d, v, e, Shard.VOCAB, weight=True),
        *([elementwise(f"{prefix}softcap", tokens * v, e, Shard.VOCAB)] if spec.logit_softcap else []),
        # the softmax cross-entropy: its bytes by the implementation the framework runs (model/loss.py)
        replace(elementwise(f"{prefix}cross_entropy", tokens * v, e, Shard.VOCAB, reads=1.0, writes=0.0,
                            extra_bytes_per_elt=4.0), loss_bytes=loss_traffic_bytes(tokens * v, e)),
    )


@cache
def model_ops(spec: TransformerSpec, micro_batch: int, seq_len: int, bytes_per_elt: float,
              target_seq_len: int = 0, flash: bool = False, finetune: Finetune = FULL) -> ModelOps:
    """Expand ``spec`` for one micro-batch of ``micro_batch`` sequences of ``seq_len`` tokens.

    For an encoder-decoder model, ``seq_len`` is the source length and ``target_seq_len`` the decoder's
    (default: the same as the source). ``finetune``: which parameters train (model/finetune.py).
    """
    full = _model_ops(spec, micro_batch, seq_len, bytes_per_elt, target_seq_len, flash)
    return full if finetune == FULL else _finetuned(spec, full, finetune, bytes_per_elt)


def _finetuned(spec: TransformerSpec, mo: ModelOps, ft: Finetune, e: float) -> ModelOps:
    """``mo`` with each op's backward share, LoRA adapters and frozen parameters (model/finetune.py). Layer groups
    are by kind, not in layer order: the first layer of each stack is the one whose input may carry no gradient
    (frozen embeddings below it), so a group whose first layer starts the gradient is split into 1 + the rest."""
    ft.check(spec)
    emb = ft.trains_embeddings
    stream = {"encoder": emb, "decoder": emb}
    groups: list[LayerGroup] = []
    for g in mo.layers:
        stack = "encoder" if g.name == "encoder" else "decoder"
        trains = ft.trains_layers(stack == "encoder")
        flow = Flow(stream=stream[stack], encoder_out=stream["encoder"])
        ops, after, adapters = layer_ops(spec, g.ops, ft, trainable=trains, flow=flow, e=e)
        expert_adapters = expert_adapter_params(ops)  # split over expert parallelism as the experts are
        one = replace(g, ops=ops, params=g.params + adapters, expert_params=g.expert_params + expert_adapters,
                      frozen_params=0 if trains else g.params)
        if after != flow.stream and g.count > 1:
            rest, after, _ = layer_ops(spec, g.ops, ft, trainable=trains, flow=replace(flow, stream=after), e=e)
            groups += [replace(one, count=1), replace(one, count=g.count - 1, ops=rest)]
        else:
            groups.append(one)
        stream[stack] = after
    head, _, _ = layer_ops(spec, mo.head, ft, trainable=ft.trains_head(spec), flow=Flow(stream=stream["decoder"]),
                           e=e, norms_train=ft.trains_layers(False))  # the final norm is the decoder stack's
    return replace(mo, layers=tuple(groups), head=head, embedding_trains=emb, head_trains=ft.trains_head(spec),
                   embedding=tuple(replace(op, backward_share=float(emb)) for op in mo.embedding))


def _model_ops(spec: TransformerSpec, micro_batch: int, seq_len: int, bytes_per_elt: float,
               target_seq_len: int, flash: bool) -> ModelOps:
    b, e, d = micro_batch, bytes_per_elt, spec.hidden_size
    s_dec = target_seq_len or seq_len
    out_tokens = b * (s_dec if spec.arch == "encoder-decoder" else seq_len)
    in_tokens = b * seq_len + (out_tokens if spec.arch == "encoder-decoder" else 0)
    embedding = (elementwise("embedding", in_tokens * d, e, Shard.TOKENS, reads=1.0, writes=1.0),)
    head = _head_ops(spec, out_tokens, e)
    return ModelOps(micro_batch=b, seq_len=seq_len, target_seq_len=s_dec,
                    layers=layer_groups(spec, b, seq_len, s_dec, e, flash), embedding=embedding, head=head)


def trainable_params(spec: TransformerSpec, finetune: Finetune = FULL) -> int:
    """Parameters that carry a gradient under ``finetune``: the layers' (LoRA: the adapters'), the token table's
    and an untied LM head's when they train."""
    mo = model_ops(spec, 1, 1, 2.0, 0, False, finetune)
    layers = sum(g.count * (g.params - g.frozen_params) for g in mo.layers)
    head = 0 if spec.tied_embeddings else spec.vocab_size * spec.hidden_size
    return (layers + (spec.embedding_params() if mo.embedding_trains else 0)
            + (head + spec.norm_params() if mo.head_trains else 0))


def active_params_without_input_embedding(spec: TransformerSpec) -> int:
    """The active parameters as model cards count them (OpenAI's gpt-oss card: 5.1 B active for gpt-oss-120b):
    without the input embedding table, a lookup that does no arithmetic (nor learned position tables). A tied
    table stays counted once: it is the LM head's weight. greentrain's own count (TransformerSpec.num_active_params)
    includes the table."""
    table = 0 if spec.tied_embeddings else spec.vocab_size * spec.hidden_size
    positions = spec.embedding_params() - spec.vocab_size * spec.hidden_size
    return spec.num_active_params() - table - positions


def model_flop_per_sequence(spec: TransformerSpec, seq_len: int, target_seq_len: int = 0) -> float:
    """Model FLOPs (forward + backward = 3 x forward) of one training sequence, no recomputation."""
    return 3.0 * model_ops(spec, 1, seq_len, 2.0, target_seq_len).forward_flop()
