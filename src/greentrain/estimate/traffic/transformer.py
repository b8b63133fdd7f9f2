"""The GPT-like transformer of seed 001 (davidsj/ml_par_sim ``transformer.py``) built on the layout algebra.

One layer: attention (multi-query by default; multi-head; or grouped-query, a greentrain extension) and a
FFN (optionally GLU), as a parallel block (GPT-J) or consecutive blocks; top-1 MoE where every weight has
an EXPERT dim; weights are kept scattered over DATA and SEQ (ZeRO-3 style) and gathered once per batch.
Embedding, unembedding, the router and the residual additions are not modelled (as in the seed).
Layouts and dims follow seed-systems.md §1.5.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.estimate.traffic.algebra import Data, DataDim, Mesh, ParallelAxis
from greentrain.estimate.traffic.config import TrafficConfig, check_shapes


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficCounts:
    """Raw counts of a whole run, summed over the cluster (elements, not bytes), before checkpointing."""

    flop_fwd: float
    flop_bwd: float
    tx_elements_fwd: float
    tx_elements_bwd: float
    rx_elements_fwd: float
    rx_elements_bwd: float

    def as_tuple(self) -> tuple[float, ...]:
        return (self.flop_fwd, self.flop_bwd, self.tx_elements_fwd, self.tx_elements_bwd,
                self.rx_elements_fwd, self.rx_elements_bwd)


class _Dims:
    """The mesh and logical dims of one model (seed-systems.md §1.5, table "Dims")."""

    def __init__(self, cfg: TrafficConfig) -> None:
        self.data_ax = ParallelAxis("DATA", cfg.dp)
        self.pipe_ax = ParallelAxis("PIPE", cfg.pp, rotational=True)
        self.exp_ax = ParallelAxis("EXP", cfg.ep)
        self.seq_ax = ParallelAxis("SEQ", cfg.sp)
        self.tint_ax = ParallelAxis("TENSOR_INT", cfg.tp_int)
        self.text_ax = ParallelAxis("TENSOR_EXT", cfg.tp_ext)
        self.mesh = Mesh([self.data_ax, self.pipe_ax, self.exp_ax, self.seq_ax, self.tint_ax, self.text_ax])
        el = cfg.tokens_per_expert
        self.sample = DataDim("SAMPLE", cfg.dp, self.data_ax)
        self.layer = DataDim("LAYER", cfg.pp, self.pipe_ax, virtual_size=cfg.num_layers)
        self.expert = DataDim("EXPERT", cfg.num_experts, self.exp_ax)
        self.token = DataDim("TOKEN", el, self.seq_ax)
        self.write_expert = DataDim("WRITE_EXPERT", cfg.num_experts, autoreduce=True)
        self.write_token = DataDim("WRITE_TOKEN", el, self.text_ax, autoreduce=True)
        self.d_model = DataDim("D_MODEL", cfg.d_model, self.text_ax, autoreduce=True)
        self.d_ffn = DataDim("D_FFN", cfg.d_ffn, self.tint_ax, autoreduce=True)
        self.d_head = DataDim("D_HEAD", cfg.d_head, autoreduce=True)
        if cfg.multi_query or cfg.num_kv_heads == cfg.num_heads:
            # The seed's layouts: one head dim on TENSOR_INT (MHA), or no K/V head dim at all (MQA).
            self.kv_head: DataDim | None = None
            self.q_group: DataDim | None = None
            self.head = DataDim("ATTN_HEAD", cfg.num_heads, self.tint_ax)
        else:
            # GQA: heads = kv heads (on TENSOR_INT) x query heads per kv head (local).
            self.head = DataDim("KV_HEAD", cfg.num_kv_heads, self.tint_ax)
            self.kv_head = self.head
            self.q_group = DataDim("Q_GROUP", cfg.num_heads // cfg.num_kv_heads)

    def head_dims(self) -> tuple[DataDim, ...]:
        """The query-side head dims: (ATTN_HEAD,) or (KV_HEAD, Q_GROUP)."""
        return (self.head,) if self.q_group is None else (self.head, self.q_group)


def _weights(cfg: TrafficConfig, m: _Dims) -> dict[str, Data]:
    """Gather every weight matrix of one layer (pipeline stage) from its ZeRO-3 scatter over DATA and SEQ."""
    zero = (m.data_ax, m.seq_ax)
    base = (m.layer, m.expert, m.d_model)
    q_like = (*base, *m.head_dims(), m.d_head)
    shards = {"Wq": m.mesh.data(*q_like, scatter=zero), "Wo": m.mesh.data(*q_like, scatter=zero)}
    for name in ("Wk", "Wv"):
        if cfg.multi_query:  # one K/V head, replicated over TENSOR_INT, so also scattered over it
            shards[name] = m.mesh.data(*base, m.d_head, scatter=(*zero, m.tint_ax))
        elif m.kv_head is None:
            shards[name] = m.mesh.data(*q_like, scatter=zero)
        else:
            shards[name] = m.mesh.data(*base, m.kv_head, m.d_head, scatter=zero)
    ffn_names = ("Wff1", "Wff2", "Wff1b") if cfg.glu else ("Wff1", "Wff2")
    for name in ffn_names:
        shards[name] = m.mesh.data(*base, m.d_ffn, scatter=zero)
    return {name: shard.bcast() for name, shard in shards.items()}


def _heads_reduced(m: _Dims, attn_out: Data) -> Data:
    """GQA only: sum the local query-group dim so attention output has one head dim, like the seed's."""
    return attn_out if m.q_group is None else attn_out.reduce(m.q_group)


def _layer(cfg: TrafficConfig, m: _Dims, w: dict[str, Data]) -> None:
    """One token-layer of forward (and, by the algebra's rules, backward) pass."""
    x = m.mesh.data(m.sample, m.layer, m.expert, m.token, m.d_model)
    q = w["Wq"] @ x
    # Keys and values: reduce over D_MODEL scattering tokens over TENSOR_EXT, then every expert's
    # tokens are gathered for attention (EXPERT -> WRITE_EXPERT leaves EXP scattered).
    k = ((w["Wk"] * x).reduce(m.d_model, transpose=(m.token, m.write_token))
         .scatter_transpose(m.expert, m.write_expert).bcast())
    v = ((w["Wv"] * x).reduce(m.d_model, transpose=(m.token, m.write_token))
         .scatter_transpose(m.expert, m.write_expert).bcast())
    qk = q @ k
    softmax_normalizer = qk.reduce(m.write_expert).allreduce(m.write_token)
    a = (qk * softmax_normalizer) @ v
    attn_out = w["Wo"] @ a  # not yet reduced over the head dim
    if cfg.consecutive_attn_and_ffn:
        x = _heads_reduced(m, attn_out).allreduce(m.head)
    h = w["Wff1"] @ x
    if cfg.glu:
        h = h * (w["Wff1b"] @ x)
    ffn_out = w["Wff2"] * h  # not yet reduced over D_FFN
    # Residual: the output crosses a pipeline stage or moves to another expert (boundary frequency β).
    if cfg.consecutive_attn_and_ffn:
        ffn_out.allreduce(m.d_ffn, rotate=(m.layer, m.expert))
    else:
        _heads_reduced(m, attn_out).reduce_with(ffn_out, (m.head, m.d_ffn)).bcast(rotate=(m.layer, m.expert))


def count_traffic(cfg: TrafficConfig) -> TrafficCounts:
    """FLOP, Tx and Rx of the whole run by the layout algebra (the seed's Meter nesting, in its order)."""
    check_shapes(cfg)
    m = _Dims(cfg)
    meter = m.mesh.meter
    layers_per_stage = cfg.num_layers // cfg.pp
    with meter.scope(cfg.num_batches):
        with meter.scope(layers_per_stage):  # weights: gathered once per batch, gradients reduced
            w = _weights(cfg, m)
        per_token = layers_per_stage / (cfg.dp * cfg.seq_len)  # x holds dp samples and one stage's layer
        with meter.scope(cfg.batch_size * cfg.seq_len), meter.scope(per_token):
            _layer(cfg, m, w)
    return TrafficCounts(
        flop_fwd=meter.get("FLOP", "fwd"), flop_bwd=meter.get("FLOP", "bwd"),
        tx_elements_fwd=meter.get("Tx", "fwd"), tx_elements_bwd=meter.get("Tx", "bwd"),
        rx_elements_fwd=meter.get("Rx", "fwd"), rx_elements_bwd=meter.get("Rx", "bwd"),
    )
