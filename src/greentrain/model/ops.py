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

from dataclasses import dataclass
from enum import Enum
from functools import cache

from greentrain.model.spec import TransformerSpec


class OpKind(str, Enum):
    MATMUL = "matmul"
    ATTENTION = "attention"  # activation x activation batched matmul (scores, attention over values)
    ELEMENTWISE = "elementwise"


class Shard(str, Enum):
    COLUMN = "column"
    ROW = "row"
    HEADS = "heads"
    HIDDEN = "hidden"
    TOKENS = "tokens"
    VOCAB = "vocab"
    REPLICATED = "replicated"


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One forward op of one micro-batch. ``count`` independent (m x k) @ (k x n) products for matmuls."""

    name: str
    kind: OpKind
    shard: Shard
    flop: float  # forward FLOPs, all ``count`` products together
    bytes: float  # forward bytes read + written at the activation precision (weights included)
    count: float = 1.0
    m: float = 0.0
    k: float = 0.0
    n: float = 0.0
    params: int = 0  # weight parameters the op reads
    attention_core: bool = False  # what selective recomputation recomputes (Korthikanti et al. §4.2)
    expert: bool = False  # an expert's op: count = experts, spread over expert parallelism
    backward_factor: float = 2.0  # backward time / forward time (2: gradients of both operands)


def matmul(name: str, m: float, k: float, n: float, bytes_per_elt: float, shard: Shard,
           count: float = 1.0, weight: bool = True, expert: bool = False) -> Op:
    """(m x k) @ (k x n), ``count`` times. Bytes: read both operands, write the result."""
    elts = count * (m * k + k * n + m * n)
    return Op(name=name, kind=OpKind.MATMUL if weight else OpKind.ATTENTION, shard=shard,
              flop=2.0 * count * m * k * n, bytes=elts * bytes_per_elt, count=count, m=m, k=k, n=n,
              params=int(count * k * n) if weight else 0, attention_core=not weight, expert=expert)


def elementwise(name: str, elements: float, bytes_per_elt: float, shard: Shard,
                reads: float = 1.0, writes: float = 1.0, extra_bytes_per_elt: float = 0.0,
                attention_core: bool = False, expert: bool = False) -> Op:
    """An element-wise op over ``elements`` values: ``reads`` inputs read, ``writes`` outputs written."""
    b = elements * ((reads + writes) * bytes_per_elt + extra_bytes_per_elt)
    return Op(name=name, kind=OpKind.ELEMENTWISE, shard=shard, flop=0.0, bytes=b, count=1.0,
              attention_core=attention_core, expert=expert)


def attention_ops(spec: TransformerSpec, b: int, s: int, s_kv: int, e: float, prefix: str,
                  cross: bool, flash: bool) -> list[Op]:
    """Self- or cross-attention block: norm, projections, attention core, output projection, residual.

    Naive attention (Megatron-LM 2022) materialises the b*heads*s*s_kv scores: softmax and dropout are
    separate memory-bound ops. Flash attention (Dao et al. 2022; Dao 2023, FlashAttention-2) fuses scores,
    softmax and values into one kernel that never writes the scores; its backward recomputes them and
    costs about 2.5x its forward (FlashAttention-2 §3.1).
    """
    d, q, kv, dh, heads = spec.hidden_size, spec.q_width, spec.kv_width, spec.head_dim, spec.num_heads
    tokens, kv_tokens = b * s, b * s_kv
    scores = b * heads * s * s_kv
    ops = [elementwise(f"{prefix}.norm", tokens * d, e, Shard.TOKENS)]
    if cross:  # queries from the decoder, keys and values from the encoder output
        ops.append(matmul(f"{prefix}.q", tokens, d, q, e, Shard.COLUMN))
        ops.append(matmul(f"{prefix}.kv", kv_tokens, d, 2 * kv, e, Shard.COLUMN))
    else:
        ops.append(matmul(f"{prefix}.qkv", tokens, d, q + 2 * kv, e, Shard.COLUMN))
    if flash:
        io = (2 * tokens * q + 2 * kv_tokens * kv) * e  # read q, k, v; write the output
        ops.append(Op(name=f"{prefix}.flash", kind=OpKind.ATTENTION, shard=Shard.HEADS,
                      flop=4.0 * scores * dh, bytes=io, count=b * heads, m=s, k=dh, n=s_kv,
                      attention_core=True, backward_factor=2.5))
    else:
        ops += [
            matmul(f"{prefix}.scores", s, dh, s_kv, e, Shard.HEADS, count=b * heads, weight=False),
            elementwise(f"{prefix}.softmax", scores, e, Shard.HEADS, attention_core=True),
            # dropout keeps a 1-byte mask per score (Korthikanti et al. §4.1)
            elementwise(f"{prefix}.dropout", scores, e, Shard.HEADS, extra_bytes_per_elt=1.0,
                        attention_core=True),
            matmul(f"{prefix}.values", s, s_kv, dh, e, Shard.HEADS, count=b * heads, weight=False),
        ]
    ops += [
        matmul(f"{prefix}.out", tokens, q, d, e, Shard.ROW),
        elementwise(f"{prefix}.dropout_residual", tokens * d, e, Shard.TOKENS, reads=2.0,
                    extra_bytes_per_elt=1.0),
    ]
    return ops


def mlp_ops(spec: TransformerSpec, tokens: int, e: float, prefix: str, moe: bool) -> list[Op]:
    d = spec.hidden_size
    up = 2 if spec.glu else 1  # gate and up projections are fused into one matmul
    ops = [elementwise(f"{prefix}.norm", tokens * d, e, Shard.TOKENS)]
    if not moe:
        f = spec.ffn_hidden_size
        ops += [
            matmul(f"{prefix}.up", tokens, d, up * f, e, Shard.COLUMN),
            elementwise(f"{prefix}.act", tokens * f, e, Shard.HIDDEN, reads=float(up)),
            matmul(f"{prefix}.down", tokens, f, d, e, Shard.ROW),
        ]
    else:
        f, n_exp = spec.expert_ffn_hidden_size, spec.num_experts
        per_expert = tokens * spec.top_k / n_exp  # balanced routing
        ops.append(matmul(f"{prefix}.router", tokens, d, n_exp, e, Shard.REPLICATED))
        ops += [
            matmul(f"{prefix}.experts.up", per_expert, d, up * f, e, Shard.COLUMN, count=n_exp, expert=True),
            elementwise(f"{prefix}.experts.act", tokens * spec.top_k * f, e, Shard.HIDDEN, reads=float(up),
                        expert=True),
            matmul(f"{prefix}.experts.down", per_expert, f, d, e, Shard.ROW, count=n_exp, expert=True),
        ]
        if spec.num_shared_experts:
            sh = spec.num_shared_experts
            ops += [
                matmul(f"{prefix}.shared.up", tokens, d, up * f, e, Shard.COLUMN, count=sh),
                elementwise(f"{prefix}.shared.act", sh * tokens * f, e, Shard.HIDDEN, reads=float(up)),
                matmul(f"{prefix}.shared.down", tokens, f, d, e, Shard.ROW, count=sh),
            ]
    ops.append(elementwise(f"{prefix}.dropout_residual", tokens * d, e, Shard.TOKENS, reads=2.0,
                           extra_bytes_per_elt=1.0))
    return ops


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerGroup:
    """``count`` identical transformer layers and the ops of one of them (one micro-batch, forward)."""

    name: str
    count: int
    ops: tuple[Op, ...]
    moe: bool = False

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

    @property
    def num_layers(self) -> int:
        return sum(g.count for g in self.layers)

    def forward_flop(self) -> float:
        layer = sum(g.count * g.flop for g in self.layers)
        return layer + sum(op.flop for op in self.embedding + self.head)

    def all_ops(self) -> list[Op]:
        out: list[Op] = list(self.embedding)
        for g in self.layers:
            out += list(g.ops) * g.count
        return out + list(self.head)


def layer_groups(spec: TransformerSpec, b: int, s: int, s_dec: int, e: float,
                 flash: bool) -> tuple[LayerGroup, ...]:
    """Encoder layers (if any), dense decoder layers and MoE decoder layers."""
    groups: list[LayerGroup] = []
    if spec.arch == "encoder-decoder":
        enc = (attention_ops(spec, b, s, s, e, "enc.attn", cross=False, flash=flash)
               + mlp_ops(spec, b * s, e, "enc.mlp", False))
        groups.append(LayerGroup(name="encoder", count=spec.num_encoder_layers, ops=tuple(enc)))
        dec_len, cross_len = s_dec, s
    else:
        dec_len, cross_len = s, 0
    n_moe = spec.num_moe_layers()
    for moe, count in ((False, spec.num_layers - n_moe), (True, n_moe)):
        if count == 0:
            continue
        ops = attention_ops(spec, b, dec_len, dec_len, e, "attn", cross=False, flash=flash)
        if cross_len:
            ops += attention_ops(spec, b, dec_len, cross_len, e, "xattn", cross=True, flash=flash)
        ops += mlp_ops(spec, b * dec_len, e, "mlp", moe)
        groups.append(LayerGroup(name="decoder-moe" if moe else "decoder", count=count, ops=tuple(ops), moe=moe))
    return tuple(groups)


@cache
def model_ops(spec: TransformerSpec, micro_batch: int, seq_len: int, bytes_per_elt: float,
              target_seq_len: int = 0, flash: bool = False) -> ModelOps:
    """Expand ``spec`` for one micro-batch of ``micro_batch`` sequences of ``seq_len`` tokens.

    For an encoder-decoder model, ``seq_len`` is the source length and ``target_seq_len`` the decoder's
    (default: the same as the source).
    """
    b, e, d, v = micro_batch, bytes_per_elt, spec.hidden_size, spec.vocab_size
    s_dec = target_seq_len or seq_len
    out_tokens = b * (s_dec if spec.arch == "encoder-decoder" else seq_len)
    in_tokens = b * seq_len + (out_tokens if spec.arch == "encoder-decoder" else 0)
    embedding = (elementwise("embedding", in_tokens * d, e, Shard.TOKENS, reads=1.0, writes=1.0),)
    head = (
        elementwise("final_norm", out_tokens * d, e, Shard.TOKENS),
        matmul("lm_head", out_tokens, d, v, e, Shard.VOCAB, weight=True),
        # logits are upcast to fp32 for the softmax cross-entropy: read them, write fp32 (4 bytes)
        elementwise("cross_entropy", out_tokens * v, e, Shard.VOCAB, reads=1.0, writes=0.0,
                    extra_bytes_per_elt=4.0),
    )
    return ModelOps(micro_batch=b, seq_len=seq_len, target_seq_len=s_dec,
                    layers=layer_groups(spec, b, seq_len, s_dec, e, flash), embedding=embedding, head=head)


def model_flop_per_sequence(spec: TransformerSpec, seq_len: int, target_seq_len: int = 0) -> float:
    """Model FLOPs (forward + backward = 3 x forward) of one training sequence, no recomputation."""
    return 3.0 * model_ops(spec, 1, seq_len, 2.0, target_seq_len).forward_flop()
