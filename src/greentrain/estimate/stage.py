"""Per-stage costs of one micro-batch: every transformer layer's compute (roofline), TP/CP/EP communication,
parameters and saved activations, and the embedding / LM-head ends, split over pp pipeline stages.

Volumes and overlaps: estimate/parallel_costs.py; compute: estimate/compute.py; activations: Korthikanti et al.
2022 Table 2 (estimate/memory.py). Layers divide evenly over stages (check_divisibility), so a stage holds 1/pp
of every layer total; the first stage adds the embedding, the last the LM head, and the slower end is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.estimate.comm import Collective
from greentrain.estimate.compute import OpsTime, Sharding, compute_peaks, ops_time
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.memory import LayerActivation, layer_activation, layer_activation_bytes
from greentrain.estimate.parallel_costs import axis_layout, collective_s, tp_layer_s
from greentrain.model.ops import ModelOps
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class StageCosts:
    """One micro-batch on the slowest pipeline stage (its layers plus the embedding or LM head), per device."""

    fwd_s: float
    bwd_s: float
    recompute_s: float
    tp_s: float
    cp_s: float
    ep_s: float
    layer_params: float  # parameters of the stage's layers on one device
    extra_params: float  # embedding or LM head on one device (the larger of first/last stage)
    activation_bytes: float  # one micro-batch, the stage's layers


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTotals:
    """Every transformer layer of the model for one micro-batch on one device, before the pipeline split:
    a stage of ``pp`` holds 1/pp of each (layers divide evenly by check_divisibility). Depends on tp, cp, ep,
    sp, the micro-batch size and the recomputation only, so the vectorised search computes it once per key."""

    fwd_s: float
    bwd_s: float
    recompute_s: float
    tp_s: float
    cp_s: float
    ep_s: float
    params: float
    activation_bytes: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EndCosts:
    """The embedding and LM head on one device: on the single stage when pp = 1, else the heavier end."""

    fwd_s: float
    bwd_s: float
    params: float


def stage_costs(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> StageCosts:
    lt, ends = layer_totals(sc, s, ops, eff), end_costs(sc, s, ops, eff)
    pp = s.pp
    return StageCosts(fwd_s=lt.fwd_s / pp + ends.fwd_s, bwd_s=lt.bwd_s / pp + ends.bwd_s,
                      recompute_s=lt.recompute_s / pp, tp_s=lt.tp_s / pp, cp_s=lt.cp_s / pp, ep_s=lt.ep_s / pp,
                      layer_params=lt.params / pp, extra_params=ends.params,
                      activation_bytes=lt.activation_bytes / pp)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCost:
    """One layer of a layer group for one micro-batch on one device, whatever the recomputation."""

    count: int
    time: OpsTime
    tp_pass_s: float  # TP communication of one pass (forward or backward)
    cp_fwd_s: float  # exposed context-parallel K/V exchange of the forward
    ep_pass_s: float  # expert-parallel all-to-alls of one pass
    params: float
    activation: LayerActivation


def layer_group_costs(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> tuple[GroupCost, ...]:
    """Costs of each layer group that do not depend on s.recompute (the vectorised search reuses them)."""
    model, w, cl = sc.model, sc.workload, sc.cluster
    peaks = compute_peaks(cl.chip, w.precision)
    bw = cl.chip.memory_bytes_per_s
    sh = Sharding(tp=s.tp, cp=s.cp, ep=s.ep, sp=s.sequence_parallel)
    lay = axis_layout(s, cl)
    e, b = w.activation_bytes, s.micro_batch_size
    tokens_dec = b * ops.target_seq_len / s.cp if model.arch == "encoder-decoder" else b * ops.seq_len / s.cp
    out = []
    for g in ops.layers:
        t = ops_time(g.ops, sh, peaks.matmul, bw, eff, peaks.attention)
        enc = g.name == "encoder"
        n_tok = b * ops.seq_len / s.cp if enc else tokens_dec
        payload = n_tok * model.hidden_size * e
        per_pass = (1 if model.parallel_block else 2) + (1 if model.arch == "encoder-decoder" and not enc else 0)
        cp_fwd = 0.0
        if s.cp > 1:  # K and V of the local chunk travel cp-1 hops, overlapped with the attention core
            kv_bytes = 2 * n_tok * model.kv_width * e / s.tp
            hop = collective_s(Collective.SEND_RECV, 2, lay.cp, kv_bytes, cl, eff)
            cp_fwd = max(0.0, (s.cp - 1) * hop - t.attention_core_s)
        ep_pass = 0.0
        if g.moe and s.ep > 1:
            a2a = n_tok * model.top_k * model.hidden_size * e
            ep_pass = 2 * collective_s(Collective.ALL_TO_ALL, s.ep, lay.ep, a2a, cl, eff)
        seq_local = int((ops.seq_len if enc or model.arch == "decoder" else ops.target_seq_len) / s.cp)
        cross_len = int(ops.seq_len / s.cp) if (model.arch == "encoder-decoder" and not enc) else 0
        la = layer_activation(model, b, seq_local, e, moe=g.moe, flash=s.flash_attention, cross_len=cross_len)
        out.append(GroupCost(count=g.count, time=t, tp_pass_s=tp_layer_s(s, cl, eff, payload, lay.tp, per_pass),
                             cp_fwd_s=cp_fwd, ep_pass_s=ep_pass, params=_local_layer_params(sc, g.moe, enc, s),
                             activation=la))
    return tuple(out)


def sum_layer_totals(groups: tuple[GroupCost, ...], *, recompute: str, flash: bool, tp: int,
                     sp: bool) -> LayerTotals:
    """Every layer's costs under a recomputation choice; ``sp``: sequence parallelism in effect."""
    fwd = bwd = rec = tps = cps = eps = params = act = 0.0
    passes = 3 if recompute == "full" else 2  # full recomputation repeats the forward's communication
    for g in groups:
        t, n = g.time, g.count
        recomputed = t.forward_s if recompute == "full" else (
            t.attention_core_s if recompute == "selective" and not flash else 0.0)
        fwd += n * t.forward_s
        bwd += n * t.backward_s
        rec += n * recomputed
        tps += n * g.tp_pass_s * passes
        cps += n * g.cp_fwd_s * 3
        eps += n * g.ep_pass_s * passes
        params += n * g.params
        act += n * layer_activation_bytes(g.activation, tp=tp, sp=sp, recompute=recompute)
    return LayerTotals(fwd_s=fwd, bwd_s=bwd, recompute_s=rec, tp_s=tps, cp_s=cps, ep_s=eps, params=params,
                       activation_bytes=act)


def layer_totals(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> LayerTotals:
    return sum_layer_totals(layer_group_costs(sc, s, ops, eff), recompute=s.recompute, flash=s.flash_attention,
                            tp=s.tp, sp=s.sequence_parallel)


def end_costs(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> EndCosts:
    return end_costs_both(sc, s, ops, eff)[1 if s.pp > 1 else 0]


def end_costs_both(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> tuple[EndCosts, EndCosts]:
    """The ends with pp = 1 (embedding and head on one stage) and with pp > 1 (the heavier end)."""
    cl, w = sc.cluster, sc.workload
    peak, bw = compute_peaks(cl.chip, w.precision).ends, cl.chip.memory_bytes_per_s
    sh = Sharding(tp=s.tp, cp=s.cp, ep=s.ep, sp=s.sequence_parallel)
    head_t = ops_time(ops.head, sh, peak, bw, eff)
    emb_t = ops_time(ops.embedding, sh, peak, bw, eff)
    one = EndCosts(fwd_s=head_t.forward_s + emb_t.forward_s, bwd_s=head_t.backward_s + emb_t.backward_s,
                   params=_local_end_params(sc, s.tp, 1))
    return one, EndCosts(fwd_s=head_t.forward_s, bwd_s=head_t.backward_s, params=_local_end_params(sc, s.tp, 2))


def _local_layer_params(sc: Scenario, moe: bool, encoder: bool, s: Strategy) -> float:
    """Parameters of one layer held by one device (TP splits matrices, EP splits experts)."""
    m = sc.model
    cross = m.arch == "encoder-decoder" and not encoder
    attn = m.attention_params() * (2 if cross else 1) / s.tp
    norms = m.norm_params() * (3 if cross else 2)
    if moe:
        experts = m.num_experts / s.ep * m.mlp_params(m.expert_ffn_hidden_size) / s.tp
        shared = m.num_shared_experts * m.mlp_params(m.expert_ffn_hidden_size) / s.tp
        mlp = experts + shared + m.hidden_size * m.num_experts
    else:
        mlp = m.mlp_params() / s.tp
    return attn + mlp + norms


def _local_end_params(sc: Scenario, tp: int, pp: int) -> float:
    """Embedding (first stage) or LM head (last stage), vocabulary-parallel over tp: the larger one."""
    m = sc.model
    table = m.vocab_size * m.hidden_size / tp
    emb = table + m.embedding_params() - m.vocab_size * m.hidden_size
    head = (table if (not m.tied_embeddings or pp > 1) else 0.0) + m.norm_params()
    return emb + head if pp == 1 else max(emb, head)
