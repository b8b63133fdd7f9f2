"""State-space mixers: Mamba (Gu & Dao 2023, arXiv 2312.00752) as Jamba uses it, and Mamba-2's SSD (Dao & Gu
2024, arXiv 2405.21060). Parameters as transformers builds them (JambaMambaMixer, Mamba2Mixer); ops with the
FLOPs of the matmul-like contractions and the bytes of the rest.

Shapes: d = hidden_size, I = TransformerSpec.ssm_inner (Mamba: ssm_expand * d; Mamba-2: H heads of width P),
N = ssm_state_size, k = ssm_conv_kernel; Mamba: R = ssm_dt_rank; Mamba-2: G groups of B and C, chunks of Q
tokens.
Tensor parallelism splits I (and H) like attention heads: in_proj by columns, out_proj by rows.
"""

from __future__ import annotations

import math
from typing import Protocol

from greentrain.model.primitives import Op, OpKind, Shard, elementwise, matmul


class SsmShape(Protocol):
    """The TransformerSpec fields a state-space mixer reads (model/spec.py), read-only."""

    @property
    def hidden_size(self) -> int: ...
    @property
    def ssm(self) -> str: ...  # mamba or mamba2
    @property
    def ssm_inner(self) -> int: ...  # I
    @property
    def ssm_state_size(self) -> int: ...  # N
    @property
    def ssm_conv_kernel(self) -> int: ...  # k
    @property
    def ssm_num_heads(self) -> int: ...  # H (Mamba-2)
    @property
    def ssm_head_dim(self) -> int: ...  # P (Mamba-2)
    @property
    def ssm_num_groups(self) -> int: ...  # G (Mamba-2)
    @property
    def ssm_chunk_size(self) -> int: ...  # Q (Mamba-2)
    @property
    def ssm_dt_rank(self) -> int: ...  # R (Mamba)
    @property
    def ssm_bias(self) -> bool: ...
    @property
    def ssm_conv_bias(self) -> bool: ...
    @property
    def ssm_inner_norms(self) -> bool: ...


def ssm_params(spec: SsmShape) -> int:
    """One mixer (without the layer's input norm)."""
    d, n, k = spec.hidden_size, spec.ssm_state_size, spec.ssm_conv_kernel
    inner = spec.ssm_inner
    if spec.ssm == "mamba2":
        h, g = spec.ssm_num_heads, spec.ssm_num_groups
        conv_ch = inner + 2 * g * n  # x, B, C go through the convolution (Mamba-2 §7.1)
        proj_out = 2 * inner + 2 * g * n + h  # z, x, B, C, dt
        in_proj = d * proj_out + (proj_out if spec.ssm_bias else 0)
        conv = conv_ch * k + (conv_ch if spec.ssm_conv_bias else 0)
        # dt_bias, A_log, D per head; the gated RMSNorm (MambaRMSNormGated) over I
        return in_proj + conv + 3 * h + inner + inner * d + (d if spec.ssm_bias else 0)
    r = spec.ssm_dt_rank
    in_proj = d * 2 * inner + (2 * inner if spec.ssm_bias else 0)  # x and the gate z
    conv = inner * k + (inner if spec.ssm_conv_bias else 0)
    x_proj = inner * (r + 2 * n)  # dt (low rank), B, C: selection (Gu & Dao 2023, Algorithm 2)
    dt_proj = r * inner + inner
    a_d = inner * n + inner  # A_log (I x N), D
    norms = (r + 2 * n) if spec.ssm_inner_norms else 0  # JambaMambaMixer dt/b/c_layernorm
    return in_proj + conv + x_proj + dt_proj + a_d + inner * d + (d if spec.ssm_bias else 0) + norms


def _contraction(name: str, count: float, m: float, k: float, n: float, e: float) -> Op:
    """Activation x activation products (``count`` of (m x k) @ (k x n)), split by heads under TP."""
    return matmul(name, m, k, n, e, Shard.HEADS, count=count, weight=False)


def _mamba2_scan_ops(spec: SsmShape, b: int, s: int, e: float, prefix: str) -> list[Op]:
    """The chunked SSD algorithm (Mamba-2 §7, Listing 1; mamba_ssm ssd_combined): per chunk of Q tokens,
    (1) C B^T per group and its product with X (the quadratic, attention-like part), (2) each chunk's final
    state B^T X, (3) the recurrence over chunk states, (4) the output from the states, C h."""
    n, h, g, p = spec.ssm_state_size, spec.ssm_num_heads, spec.ssm_num_groups, spec.ssm_head_dim
    q = min(spec.ssm_chunk_size, s)
    c = math.ceil(s / q)
    return [
        _contraction(f"{prefix}.ssd.cb", b * g * c, q, n, q, e),  # (Q, N) @ (N, Q) per group and chunk
        _contraction(f"{prefix}.ssd.diag", b * h * c, q, q, p, e),  # (Q, Q) @ (Q, P) per head and chunk
        _contraction(f"{prefix}.ssd.states", b * h * c, n, q, p, e),  # (N, Q) @ (Q, P)
        _contraction(f"{prefix}.ssd.pass", b * h, c + 1, c + 1, p * n, e),  # chunk recurrence
        _contraction(f"{prefix}.ssd.out", b * h * c, q, n, p, e),  # (Q, N) @ (N, P)
    ]


def _mamba_scan_op(spec: SsmShape, b: int, s: int, e: float, prefix: str) -> Op:
    """The selective scan (Gu & Dao 2023 §3.3.2): h_t = exp(Δ A) h_{t-1} + Δ B x_t, y_t = C h_t. The output
    contraction C h is 2 I N FLOPs per token (the recurrence is element-wise); the fused kernel keeps h in
    SRAM and moves x, Δ, z, y (I each) and B, C (N each) per token."""
    inner, n = spec.ssm_inner, spec.ssm_state_size
    io = b * s * (4 * inner + 2 * n) * e
    return Op(name=f"{prefix}.scan", kind=OpKind.ATTENTION, shard=Shard.HEADS, flop=2.0 * b * inner * s * n,
              bytes=io, count=b * inner, m=s, k=n, n=1.0)


def ssm_ops(spec: SsmShape, b: int, s: int, e: float, prefix: str) -> list[Op]:
    """One mixer block of ``b`` sequences of ``s`` tokens: norm, projections, causal depthwise convolution
    (2 k FLOPs per channel and token), scan, gate, output projection, residual."""
    d, n, k = spec.hidden_size, spec.ssm_state_size, spec.ssm_conv_kernel
    inner, t = spec.ssm_inner, b * s
    ops = [elementwise(f"{prefix}.norm", t * d, e, Shard.TOKENS)]
    if spec.ssm == "mamba2":
        g, h = spec.ssm_num_groups, spec.ssm_num_heads
        conv_ch = inner + 2 * g * n
        ops += [
            matmul(f"{prefix}.in_proj", t, d, 2 * inner + 2 * g * n + h, e, Shard.COLUMN),  # (T, d) @ (d, ...)
            elementwise(f"{prefix}.conv", t * conv_ch, e, Shard.HIDDEN, flop=2.0 * t * conv_ch * k),
            *_mamba2_scan_ops(spec, b, s, e, prefix),
            elementwise(f"{prefix}.gated_norm", t * inner, e, Shard.HIDDEN, reads=2.0),
        ]
    else:
        r = spec.ssm_dt_rank
        ops += [
            matmul(f"{prefix}.in_proj", t, d, 2 * inner, e, Shard.COLUMN),  # (T, d) @ (d, 2I)
            elementwise(f"{prefix}.conv", t * inner, e, Shard.HIDDEN, flop=2.0 * t * inner * k),
            # (T, I) @ (I, R + 2N): a row-split input, so under TP each rank holds a partial sum
            matmul(f"{prefix}.x_proj", t, inner, r + 2 * n, e, Shard.ROW),
            matmul(f"{prefix}.dt_proj", t, r, inner, e, Shard.COLUMN),  # (T, R) @ (R, I)
            _mamba_scan_op(spec, b, s, e, prefix),
            elementwise(f"{prefix}.gate", t * inner, e, Shard.HIDDEN, reads=2.0),
        ]
    ops += [
        matmul(f"{prefix}.out_proj", t, inner, d, e, Shard.ROW),  # (T, I) @ (I, d)
        elementwise(f"{prefix}.residual", t * d, e, Shard.TOKENS, reads=2.0),
    ]
    return ops
