"""Closed form of the seed-001 transformer's counts: an implementation independent of the layout algebra.

Formulas: shared/reference/seed-systems.md §1.5 (davidsj/ml_par_sim transformer.py reduced by hand), with
T = seq_len, A = num_heads*d_head, H = num_heads, e = experts, f = d_ffn, d = d_model. GQA (greentrain's
extension, 1 < num_kv_heads = g < H): K/V terms use the kv width g*d_head instead of A and TENSOR_INT
shards the kv heads; the H query heads are summed as G = H/g local groups (red(d·g·T, G, 1)) before the
residual reduce over g + f (or g) units. Tests check this against the algebra to 1e-9 relative.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from greentrain.estimate.traffic.config import TrafficConfig, check_shapes
from greentrain.estimate.traffic.transformer import TrafficCounts


@dataclass(slots=True)
class _Sum:
    """Running (FLOP, Tx, Rx) x (fwd, bwd) totals; ``scale`` multiplies the I of every term added."""

    scale: float = 1.0
    v: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("flop_f", "flop_b", "tx_f", "tx_b", "rx_f", "rx_b"), 0.0))

    def mul(self, s: float) -> None:
        """Pointwise product of S elements: S FLOP fwd, 4S bwd (seed-systems.md §1.4 "mul")."""
        self.v["flop_f"] += self.scale * s
        self.v["flop_b"] += 4 * self.scale * s

    def red(self, i: float, j: float, k: int) -> None:
        """Reduce J into 1 over I outputs, K ranks (seed-systems.md §1.4 "reduce")."""
        i *= self.scale
        self.v["flop_f"] += i * (j - 1)
        self.v["tx_f"] += i * (k - 1)
        self.v["rx_f"] += i * (k - 1)
        self.v["tx_b"] += i * (k > 1)
        self.v["rx_b"] += i * (k - 1)

    def bc(self, i: float, j: float, k: int, beta: float = 0.0) -> None:
        """Gather I elements over K scattered ranks, J replicas, boundary frequency β (§1.4 "bcast")."""
        i *= self.scale
        moved = i * j * (k + beta - 1)
        self.v["tx_f"] += i * max(float(k > 1), beta)
        self.v["rx_f"] += moved
        self.v["flop_b"] += moved
        self.v["tx_b"] += moved
        self.v["rx_b"] += moved


def boundary_frequency(cfg: TrafficConfig) -> float:
    """β = 1 − (1 − (pp−1)/L)·(1/pe): how often a layer's output leaves its chip (stage or expert change)."""
    return 1 - (1 - (cfg.pp - 1) / cfg.num_layers) * (1 / cfg.ep)


def _attention(c: _Sum, cfg: TrafficConfig) -> None:
    """Activation terms of attention, per sequence and layer (seed-systems.md §1.5, first rows)."""
    t, d, dh, h, e = cfg.seq_len, cfg.d_model, cfg.d_head, cfg.num_heads, cfg.num_experts
    a, akv = cfg.attn_width, cfg.kv_width
    pti, pte, ps, pe = cfg.tp_int, cfg.tp_ext, cfg.sp, cfg.ep
    c.mul(d * a * t)  # q = Wq @ x
    c.red(a * t, d, pte)
    c.bc(a * t, 1, pte)
    for _ in ("k", "v"):
        if cfg.multi_query:  # one K/V head, computed on every TENSOR_INT rank
            c.mul(d * dh * t * pti)
            c.red(dh * t * pti, d, pte)
            c.bc(dh * t, pti, ps * pe)
        else:
            c.mul(d * akv * t)
            c.red(akv * t, d, pte)
            c.bc(akv * t, 1, ps * pe)
    c.mul(a * t * t)  # scores q @ k
    c.red(h * t * t, dh, 1)
    c.red(h * t * t / e, e, 1)  # softmax normaliser
    c.red(h * t, t / e, pte)
    c.bc(h * t, 1, pte)
    c.mul(h * t * t)  # qk * normaliser
    c.mul(a * t * t)  # @ v
    c.red(a * t * t / e, e, 1)
    c.red(a * t, t / e, pte)
    c.bc(a * t, 1, pte)
    c.mul(d * a * t)  # Wo @ a
    c.red(d * h * t, dh, 1)
    if not cfg.multi_query and cfg.num_kv_heads != h:  # GQA: sum the query groups of each kv head
        g = cfg.num_kv_heads
        c.red(d * g * t, h // g, 1)


def _ffn_and_residual(c: _Sum, cfg: TrafficConfig) -> None:
    """Activation terms of the FFN and the residual reduce (seed-systems.md §1.5, last rows)."""
    t, d, f, pti, pte = cfg.seq_len, cfg.d_model, cfg.d_ffn, cfg.tp_int, cfg.tp_ext
    heads = cfg.num_heads if cfg.multi_query or cfg.num_kv_heads == cfg.num_heads else cfg.num_kv_heads
    beta = boundary_frequency(cfg)
    if cfg.consecutive_attn_and_ffn:
        c.red(d * t, heads, pti)
        c.bc(d * t, 1, pti, 0.0)
    for _ in range(2 if cfg.glu else 1):  # Wff1 @ x (and Wff1b @ x)
        c.mul(d * f * t)
        c.red(f * t, d, pte)
        c.bc(f * t, 1, pte)
    if cfg.glu:
        c.mul(f * t * pte)
    c.mul(d * f * t)  # Wff2 * h
    if cfg.consecutive_attn_and_ffn:
        c.red(d * t, f, pti)
    else:
        c.red(d * t, heads + f, pti)
    c.bc(d * t, 1, pti, beta)


def _weights(c: _Sum, cfg: TrafficConfig) -> None:
    """Per layer: every weight gathered from its scatter over DATA x SEQ (x TENSOR_INT for MQA's K/V)."""
    e, d, a, f = cfg.num_experts, cfg.d_model, cfg.attn_width, cfg.d_ffn
    zero = cfg.dp * cfg.sp
    c.bc(e * d * a, 1, zero)  # Wq
    c.bc(e * d * a, 1, zero)  # Wo
    for _ in ("Wk", "Wv"):
        if cfg.multi_query:
            c.bc(e * d * cfg.d_head, 1, zero * cfg.tp_int)
        else:
            c.bc(e * d * cfg.kv_width, 1, zero)
    for _ in range(3 if cfg.glu else 2):
        c.bc(e * d * f, 1, zero)


def closed_form_counts(cfg: TrafficConfig) -> TrafficCounts:
    """Whole run: n_batches × (b·L·activation terms per sequence-layer + L·weight terms per layer)."""
    check_shapes(cfg)
    act = _Sum(scale=cfg.batch_size * cfg.num_layers)
    _attention(act, cfg)
    _ffn_and_residual(act, cfg)
    wts = _Sum(scale=cfg.num_layers)
    _weights(wts, cfg)
    n = cfg.num_batches
    total = {k: n * (act.v[k] + wts.v[k]) for k in act.v}
    return TrafficCounts(flop_fwd=total["flop_f"], flop_bwd=total["flop_b"], tx_elements_fwd=total["tx_f"],
                         tx_elements_bwd=total["tx_b"], rx_elements_fwd=total["rx_f"],
                         rx_elements_bwd=total["rx_b"])
