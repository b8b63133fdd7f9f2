"""Multi-head latent attention (MLA): DeepSeek-V2 (arXiv 2405.04434) §2.1.2-2.1.3, DeepSeek-V3 (arXiv
2412.19437) §2.1.1, eq. 1-11.

Keys and values come from a compressed latent c_KV = W_DKV h (width ``kv_lora_rank``, eq. 1), normalised
and up-projected per head into the "nope" part of the keys and the values (eq. 2, 5); a decoupled rotary key
k_R = RoPE(W_KR h) of width ``qk_rope_head_dim`` is shared by all heads (eq. 3). Queries likewise come from a
latent of width ``q_lora_rank`` (eq. 6-8) or, with q_lora_rank 0, from one projection. Training computes the
decompressed per-head keys and values (transformers DeepseekV3Attention, Megatron-Core MLASelfAttention), so
the attention core is ordinary attention with q/k head width ``head_dim`` (nope + rope) and value head width
``v_head_dim``. Under tensor parallelism the two down-projections are replicated and the up-projections split
by heads (Megatron-Core multi_latent_attention.py).
"""

from __future__ import annotations

from typing import Protocol

from greentrain.model.primitives import Op, Shard, elementwise, matmul


class MlaShape(Protocol):
    """The TransformerSpec fields an MLA block reads (model/spec.py), read-only."""

    @property
    def hidden_size(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...  # q/k head width, rotary part included
    @property
    def v_head_dim(self) -> int: ...
    @property
    def q_lora_rank(self) -> int: ...  # 0: queries from one projection
    @property
    def kv_lora_rank(self) -> int: ...
    @property
    def qk_rope_head_dim(self) -> int: ...
    @property
    def attention_bias(self) -> bool: ...
    @property
    def linear_bias(self) -> bool: ...
    @property
    def norm(self) -> str: ...  # layernorm or rmsnorm


def mla_params(spec: MlaShape) -> int:
    """Projections and latent norms of one MLA block (DeepseekV3Attention: q_a_proj, q_a_layernorm,
    q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj). ``attention_bias`` puts biases on
    q_a_proj, kv_a_proj_with_mqa and o_proj only."""
    d, h, dqk, dv = spec.hidden_size, spec.num_heads, spec.head_dim, spec.v_head_dim
    rq, rkv, rope = spec.q_lora_rank, spec.kv_lora_rank, spec.qk_rope_head_dim
    bias = spec.attention_bias or spec.linear_bias
    per_norm = 2 if spec.norm == "layernorm" else 1
    # eq. 6-8: W_DQ, the latent norm, W_UQ and W_QR in one matrix; without a query latent, one projection
    q = (d * rq + (rq if bias else 0) + per_norm * rq + rq * h * dqk) if rq else d * h * dqk
    kv = d * (rkv + rope) + ((rkv + rope) if bias else 0)  # eq. 1 and 3: W_DKV and W_KR in one matrix
    kv += per_norm * rkv + rkv * h * (dqk - rope + dv)  # eq. 2 and 5: W_UK and W_UV in one matrix
    out = h * dv * d + (d if bias else 0)  # eq. 11: W_O
    return q + kv + out


def mla_projection_ops(spec: MlaShape, tokens: float, e: float, prefix: str) -> list[Op]:
    """The query and key/value projections of one MLA block, T = ``tokens``."""
    d, h, dqk, dv = spec.hidden_size, spec.num_heads, spec.head_dim, spec.v_head_dim
    rq, rkv, rope = spec.q_lora_rank, spec.kv_lora_rank, spec.qk_rope_head_dim
    ops: list[Op] = []
    if rq:
        ops += [
            matmul(f"{prefix}.q_down", tokens, d, rq, e, Shard.REPLICATED),  # (T, d) @ (d, rq)
            elementwise(f"{prefix}.q_norm", tokens * rq, e, Shard.TOKENS),
            matmul(f"{prefix}.q_up", tokens, rq, h * dqk, e, Shard.COLUMN),  # (T, rq) @ (rq, h*dqk)
        ]
    else:
        ops.append(matmul(f"{prefix}.q", tokens, d, h * dqk, e, Shard.COLUMN))  # (T, d) @ (d, h*dqk)
    ops += [
        matmul(f"{prefix}.kv_down", tokens, d, rkv + rope, e, Shard.REPLICATED),  # (T, d) @ (d, rkv+rope)
        elementwise(f"{prefix}.kv_norm", tokens * rkv, e, Shard.TOKENS),
        # (T, rkv) @ (rkv, h*(nope+dv)): per-head keys (nope part) and values
        matmul(f"{prefix}.kv_up", tokens, rkv, h * (dqk - rope + dv), e, Shard.COLUMN),
    ]
    return ops
