"""Per-stage costs of one micro-batch: every transformer layer's compute (roofline, estimate/compute.py), TP/CP/EP
communication (estimate/parallel_costs.py), parameters and saved activations (Korthikanti et al. 2022 Table 2,
estimate/memory.py), the embedding / LM-head ends, split over pp stages by estimate/pipeline.py (evenly, or by
cost with the embedding first and the LM head last): the slowest stage gives the time, the stage with the most
parameters the weights, the first stage (most micro-batches in flight) the activations."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar, cast

import numpy as np

from greentrain.estimate import fp8, moe
from greentrain.estimate.act_offload import exposed_offload_s
from greentrain.estimate.comm import Collective
from greentrain.estimate.compute import OpsTime, Sharding, compute_peaks, expert_tp, ops_time
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.frozen import frozen_input_activation
from greentrain.estimate.local_params import kind_params, local_end_params, local_expert_params, local_layer_params
from greentrain.estimate.memory import (
    FP32_NORM_FAMILIES,
    LayerActivation,
    layer_activation,
    layer_activation_bytes,
    remat_bytes,
)
from greentrain.estimate.parallel_costs import collective_s, ranks_per_node, tp_layer_s
from greentrain.estimate.pipeline import block_cost_units, end_share, given_placement, placement
from greentrain.estimate.recompute import in_layer_comm_passes, recomputed_s
from greentrain.model.finetune import expert_adapter_params
from greentrain.model.ops import LayerGroup, ModelOps
from greentrain.model.spec import LayerKind
from greentrain.num import Num, ceil, is_column, maximum, minimum, where
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario

MTP_GROUP = "mtp"  # model/ops.py's name of the multi-token-prediction layers


@dataclass(frozen=True, slots=True, kw_only=True)
class MicroBatchTimes:
    """One micro-batch's compute and exposed in-layer communication on one device (float | ndarray)."""

    fwd_s: Num
    bwd_s: Num
    recompute_s: Num
    tp_s: Num
    cp_s: Num
    ep_s: Num


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTotals(MicroBatchTimes):
    """Every transformer layer of the model for one micro-batch on one device, before the pipeline split
    (split_stages places them). Depends on tp, cp, ep, sp, the micro-batch size and the recomputation only,
    so the vectorised search computes it once per key."""

    params: Num
    activation_bytes: Num
    trainable: Num  # the share of ``params`` that carries gradients and optimizer state (fine-tuning)
    expert_params: Num = 0.0  # the routed experts' share of ``params`` (their state shards over the expert dp group)
    expert_trainable: Num = 0.0  # ... and of ``trainable``
    remat_bytes: Num = 0.0  # the most one layer rematerialises during its backward (memory.remat_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndCosts:
    """The embedding, or the LM head with its loss, on one device."""

    fwd_s: Num
    bwd_s: Num
    params: Num
    trainable: Num  # parameters with gradients and optimizer state


def sharding(s: Strategy) -> Sharding:
    """The degrees of ``s`` that change an op's local shape."""
    return Sharding(tp=s.tp, cp=s.cp, ep=s.ep, etp=s.expert_tp, sp=s.sequence_parallel)


def stage_costs(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> StageSplit:
    """One micro-batch of strategy ``s`` on its pipeline stages (vector.py evaluates the same functions over
    columns, once per distinct key; here each part once per distinct value of what it depends on: _cached)."""
    flash = s.flash_attention and eff.attention_fused
    alive = (sc.model, sc.workload, sc.cluster, ops, eff)
    key = (s.tp, s.cp, s.ep, s.expert_tp, s.sequence_parallel, flash)
    groups, emb, head_1, head_n = _cached(alive, ("key", *key), lambda: _key_costs(sc, s, ops, eff, flash))
    lt = _cached(alive, ("totals", *key, s.recompute), lambda: sum_layer_totals(
        groups, recompute=s.recompute, flash=flash, tp=s.tp, sp=s.sequence_parallel, mode=eff.selective_recompute))
    split = ("split", *key, s.recompute, s.pp, s.vpp, s.stage_layers, s.offload_activations)
    return _cached(alive, split, lambda: _split(sc, s, eff, lt, emb, pipeline_head(s.pp, head_1, head_n)))


def _key_costs(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency,
               flash: bool) -> tuple[tuple[GroupCost, ...], EndCosts, EndCosts, EndCosts]:
    """Each layer group's costs whatever the recomputation, and the ends: what the key of ``s`` sets."""
    sh = sharding(s)
    return (layer_group_costs(sc, sh, ops, eff, flash), *end_parts(sc, sh, ops, eff))


def _split(sc: Scenario, s: Strategy, eff: Efficiency, lt: LayerTotals, emb: EndCosts, head: EndCosts) -> StageSplit:
    st = split_stages(lt, emb, head, layers=sc.model.total_layers, pp=s.pp, vpp=s.vpp, balance=eff.pipeline_balance,
                      stage_layers=s.stage_layers, balance_units=balance_units(sc))
    return offload_activations(st, lt, s.offload_activations, sc, eff) if s.offload_activations else st


_CACHE: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = {}
T = TypeVar("T")


def _cached(alive: tuple[object, ...], key: tuple[Any, ...], make: Callable[[], T]) -> T:
    """make(), once per ``key`` and the frozen inputs ``alive`` (keyed by identity, kept alive: a planner or a sample
    of strategies revisits few keys); bounded."""
    full = (*map(id, alive), *key)
    hit = _CACHE.get(full)
    if hit is not None and all(map(operator.is_, hit[0], alive)):
        return cast(T, hit[1])
    value = make()
    if len(_CACHE) > 8192:
        _CACHE.clear()
    _CACHE[full] = (alive, value)
    return value


def clear_cache() -> None:
    """Forget _cached's values (a test that edits a module's YAML data in place: the inputs' identities stay)."""
    _CACHE.clear()


def offload_activations(st: StageSplit, lt: LayerTotals, offloaded: Num, sc: Scenario, eff: Efficiency) -> StageSplit:
    """``st`` (one stage: pp = 1) with the saved activations of ``offloaded`` of the model's layers in host memory
    (estimate/act_offload.py): the device keeps the other layers' (the mean layer's each), and the micro-batch
    waits for the copies its computation does not hide; floats or columns (estimate/vector.py)."""
    layers = sc.model.total_layers
    layer_bytes = lt.activation_bytes / layers
    fwd, bwd = exposed_offload_s(offloaded=offloaded, layers=layers, layer_bytes=layer_bytes,
                                 layer_fwd_s=lt.fwd_s / layers, layer_bwd_s=(lt.bwd_s + lt.recompute_s) / layers,
                                 cl=sc.cluster, eff=eff)
    host = offloaded * layer_bytes
    first, middle, last = (maximum(0.0, b - host) for b in st.stage_activation_bytes)  # pp 1: the first counts
    return replace(st, fwd_s=st.fwd_s + fwd, bwd_s=st.bwd_s + bwd, activation_bytes=st.activation_bytes - host,
                   stage_activation_bytes=(first, middle, last), host_activation_bytes=host, offload_wait_s=fwd + bwd)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageSplit(MicroBatchTimes):
    """One micro-batch on the slowest pipeline stage (its layers plus the embedding or LM head), per device, over
    float | ndarray (one strategy, or a column per strategy)."""

    params: Num  # the stage holding the most parameters (its ends included)
    activation_bytes: Num  # the first stage's layers, one micro-batch (it holds the most in flight)
    layers: Num  # layers of the stage that sets the pace
    stage_params: tuple[Num, Num, Num] = (0.0, 0.0, 0.0)  # first, a middle and the last stage, ends included
    stage_activation_bytes: tuple[Num, Num, Num] = (0.0, 0.0, 0.0)  # their layers, one micro-batch
    trainable: Num = 0.0  # parameters with gradients on the stage holding the most of them (fine-tuning)
    stage_trainable: tuple[Num, Num, Num] = (0.0, 0.0, 0.0)
    # the routed experts' share of stage_params and stage_trainable (memory.device_memory)
    stage_expert_params: tuple[Num, Num, Num] = (0.0, 0.0, 0.0)
    stage_expert_trainable: tuple[Num, Num, Num] = (0.0, 0.0, 0.0)
    block_params: Num = 0.0  # one transformer layer's parameters on one device (the mean layer)
    remat_bytes: Num = 0.0  # LayerTotals.remat_bytes
    stage_end_params: tuple[Num, Num, Num] = (0.0, 0.0, 0.0)  # the embedding / LM head share of stage_params
    host_activation_bytes: Num = 0.0  # one micro-batch's activations offloaded to host memory (act_offload.py)
    offload_wait_s: Num = 0.0  # the part of fwd_s + bwd_s spent waiting for those copies (act_offload.py)


def pipeline_head(pp: Num, head_1: EndCosts, head_n: EndCosts) -> EndCosts:
    """The LM head of a pipeline of ``pp`` stages: end_parts' ``head_n`` when pp > 1, else ``head_1``."""
    many = pp > 1
    return EndCosts(fwd_s=where(many, head_n.fwd_s, head_1.fwd_s), bwd_s=where(many, head_n.bwd_s, head_1.bwd_s),
                    params=where(many, head_n.params, head_1.params),
                    trainable=where(many, head_n.trainable, head_1.trainable))


def balance_units(sc: Scenario) -> tuple[float, float]:
    """The ends' static costs a cost-balancing framework places by (pipeline.block_cost_units)."""
    m = sc.model
    return block_cost_units(hidden=m.hidden_size, ffn=m.ffn_hidden_size, ffn_matrices=3 if m.glu else 2,
                            vocab=m.vocab_size)


def split_stages(lt: LayerTotals, emb: EndCosts, head: EndCosts, *, layers: Any, pp: Any, vpp: Any,
                 balance: str, stage_layers: tuple[int, ...] = (),
                 balance_units: tuple[float, float] | None = None) -> StageSplit:
    """The costs of the stage that sets the pace (estimate/pipeline.py places the layers, or the run pins
    ``stage_layers``, one strategy)."""
    per_layer = (lt.fwd_s + lt.bwd_s + lt.recompute_s + lt.tp_s + lt.cp_s + lt.ep_s) / layers
    unit = maximum(per_layer, 1e-30)
    e_units, h_units = (emb.fwd_s + emb.bwd_s) / unit, (head.fwd_s + head.bwd_s) / unit
    pl = given_placement(stage_layers, e_units, h_units) if stage_layers else \
        placement(layers, pp, vpp, e_units, h_units, balance, balance_units)
    frac = pl.slowest_layers / layers
    e, h = end_share(pl.slowest, pp)
    la, single = lt.activation_bytes / layers, pp == 1

    def per_stage(layer_total: Any, first_end: Any, last_end: Any) -> tuple[Any, Any, Any]:
        per = layer_total / layers
        first = where(single, layer_total + first_end + last_end, pl.first * per + first_end)
        return first, pl.middle * per, where(single, first, pl.last * per + last_end)

    stage_p = per_stage(lt.params, emb.params, head.params)
    stage_t = per_stage(lt.trainable, emb.trainable, head.trainable)
    stage_ep, stage_et = per_stage(lt.expert_params, 0.0, 0.0), per_stage(lt.expert_trainable, 0.0, 0.0)
    stage_ends = per_stage(0.0 * lt.params, emb.params, head.params)
    params = maximum(maximum(stage_p[0], stage_p[1]), stage_p[2])
    return StageSplit(fwd_s=lt.fwd_s * frac + e * emb.fwd_s + h * head.fwd_s,
                      bwd_s=lt.bwd_s * frac + e * emb.bwd_s + h * head.bwd_s, recompute_s=lt.recompute_s * frac,
                      tp_s=lt.tp_s * frac, cp_s=lt.cp_s * frac, ep_s=lt.ep_s * frac, params=params,
                      activation_bytes=la * pl.first, layers=pl.slowest_layers, stage_params=stage_p,
                      stage_activation_bytes=(la * pl.first, la * pl.middle, la * pl.last),
                      trainable=maximum(maximum(stage_t[0], stage_t[1]), stage_t[2]), stage_trainable=stage_t,
                      stage_expert_params=stage_ep, stage_expert_trainable=stage_et,
                      block_params=lt.params / layers, stage_end_params=stage_ends, remat_bytes=lt.remat_bytes,
                      host_activation_bytes=0.0 * lt.activation_bytes, offload_wait_s=0.0 * lt.fwd_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCost:
    """One layer of a layer group for one micro-batch on one device, whatever the recomputation (floats, or
    columns when the sharding holds columns)."""

    count: int
    time: OpsTime
    tp_pass_s: Num  # TP communication of one pass (forward or backward)
    cp_fwd_s: Num  # exposed context-parallel K/V exchange of the forward
    ep_pass_s: Num  # expert-parallel all-to-alls of one pass
    params: Num
    trainable: Num  # the share of ``params`` with gradients (fine-tuning)
    activation: LayerActivation
    backward: bool  # the layer runs a backward (it is above a trainable parameter)
    expert_params: Num = 0.0  # the routed experts' share of ``params``
    expert_trainable: Num = 0.0  # ... and of ``trainable``


def layer_group_costs(sc: Scenario, sh: Sharding, ops: ModelOps, eff: Efficiency,
                      flash: bool) -> tuple[GroupCost, ...]:
    """Costs of each layer group that do not depend on the recomputation (the vectorised search reuses them),
    for ops.micro_batch sequences; ``sh`` may hold a column per strategy (estimate/vector.py)."""
    model, w, cl = sc.model, sc.workload, sc.cluster
    peaks = compute_peaks(cl.chip, w.precision, fp8.recipe_for(w.precision, w.fp8_recipe, eff.framework, cl.chip.name))
    bw, node = cl.chip.memory_bytes_per_s, cl.node_size
    tp_node, cp_node = ranks_per_node(1, sh.tp, node), ranks_per_node(sh.tp, sh.cp, node)
    e, b = w.activation_bytes, ops.micro_batch
    tokens_dec = b * ops.target_seq_len / sh.cp if model.arch == "encoder-decoder" else b * ops.seq_len / sh.cp
    out = []
    for g in ops.layers:
        if g.name == MTP_GROUP:  # on the last stage with the head (end_parts)
            continue
        t = ops_time(g.ops, sh, peaks, bw, eff)
        enc = g.name == "encoder"
        n_tok = b * ops.seq_len / sh.cp if enc else tokens_dec
        payload = n_tok * model.hidden_size * e
        per_pass = (1 if model.parallel_block else 2) + (1 if model.arch == "encoder-decoder" and not enc else 0)
        cp_fwd = _cp_forward_s(sc, sh, b, g.kind, n_tok, ops.seq_len, t.attention_core_s, cp_node, eff)
        ep_pass: Num = 0.0
        if g.moe:  # estimate/moe.py: all-to-alls split over NVLink and network, expert kernels after the sync
            ep_pass, t = moe.layer_costs(sc, sh, t, n_tok, eff)
        la = _activation(sc, ops, g, sh.cp, flash, eff)
        params = kind_params(g.params, g.expert_params, sh) if g.params else local_layer_params(sc, g.moe, enc, sh)
        experts = g.expert_params / (sh.ep * expert_tp(sh)) if g.params else local_expert_params(sc, g.moe, sh)
        trainable, expert_trainable = params, experts
        if g.params and g.frozen_params:  # fine-tuning: the adapters train, the dense over tp, the experts' over ep
            adapters = expert_adapter_params(g.ops)
            trainable = kind_params(g.params - g.frozen_params, adapters, sh)
            expert_trainable = adapters / (sh.ep * expert_tp(sh))
        backward = bool((t.backward_s > 0).all()) if is_column(t.backward_s) else t.backward_s > 0
        tp_pass = tp_layer_s(sh.tp, sh.sp, cl, eff, payload, tp_node, per_pass)
        out.append(GroupCost(count=g.count, time=t, tp_pass_s=tp_pass, cp_fwd_s=cp_fwd, ep_pass_s=ep_pass,
                             params=params, trainable=trainable, activation=la, backward=backward,
                             expert_params=experts, expert_trainable=expert_trainable))
    return tuple(out)


def _activation(sc: Scenario, ops: ModelOps, g: LayerGroup, cp: Num, flash: bool, eff: Efficiency) -> LayerActivation:
    """memory.layer_activation of one layer of group ``g``, its sequence split over ``cp`` ranks (a column: once
    per distinct cp, gathered); fp8 GEMM inputs kept in 1 byte, frozen GEMMs' inputs not kept (estimate/frozen.py)."""
    if is_column(cp):
        values, inverse = np.unique(cp, return_inverse=True)
        parts = [_activation(sc, ops, g, int(v), flash, eff) for v in values]
        cols: dict[str, Any] = {f.name: np.array([getattr(p, f.name) for p in parts])[inverse]
                                for f in fields(LayerActivation)}
        return LayerActivation(**cols)
    model, encoder, moe, kind = sc.model, g.name == "encoder", g.moe, g.kind
    seq_local = int((ops.seq_len if encoder or model.arch == "decoder" else ops.target_seq_len) / cp)
    cross_len = int(ops.seq_len / cp) if (model.arch == "encoder-decoder" and not encoder) else 0
    la = layer_activation(model, ops.micro_batch, seq_local, sc.workload.activation_bytes, moe=moe, flash=flash,
                          cross_len=cross_len, fused_glu=eff.fused_glu, kind=kind, eager_norm="norm" in eff.eager_ops,
                          eager_gelu="gelu" in eff.eager_ops, moe_outputs=eff.moe_weights_outputs)
    if model.arch != "decoder" or not (kind is None or (kind.mixer in ("attention", "sliding") and kind.mlp != "none")):
        return la
    tokens, e = ops.micro_batch * seq_local, sc.workload.activation_bytes
    fp8_inputs = eff.fp8_saves_inputs and sc.workload.precision.lower() == "fp8"
    if fp8_inputs:  # fp8 GEMM inputs in 1 byte
        repl, split = fp8.saved_input_savings(model, tokens, e, moe=moe)
        delta = fp8.saved_input_module_bytes(model, tokens, e, moe=moe)
        la = replace(la, replicated_bytes=la.replicated_bytes - repl, split_bytes=la.split_bytes - split,
                     **{k: getattr(la, k) + v for k, v in delta.items()})
    if g.frozen_params and not model.kv_lora_rank:  # every base weight of the layer frozen (model/finetune.py)
        eager = "norm" in eff.eager_ops and model.norm == "rmsnorm"  # its frozen scale's normalised value goes
        value = (4.0 if model.family in FP32_NORM_FAMILIES else e) if eager else 0.0
        la = frozen_input_activation(la, model, g.ops, tokens, e, 1.0 if fp8_inputs else e, moe=moe,
                                     flash=flash, norm_value_bytes=value)
    return la


def _cp_forward_s(sc: Scenario, sh: Sharding, b: int, kind: LayerKind | None, n_tok: Num, seq_len: int,
                  attention_core_s: Num, cp_per_node: Num, eff: Efficiency) -> Num:
    """Exposed context-parallel exchange of one layer's forward. Ring attention (Liu et al. 2023) passes the local
    K and V cp-1 hops, overlapped with the attention core, all ranks at once (a step waits for the slowest hop: a
    network one when cp exceeds ``cp_per_node``); MLA passes the decompressed K and V (DeepSeek-V2 §2.1); a sliding
    window, the hops it reaches; a state-space layer, its recurrent and convolution states rank to rank, serially."""
    m, e, cl = sc.model, sc.workload.activation_bytes, sc.cluster
    mixer = kind.mixer if kind else "attention"
    if mixer == "none" or (not is_column(sh.cp) and sh.cp == 1):  # a column's cp 1 rows come out 0 below
        return 0.0
    if mixer in ("mamba", "mamba2"):
        n, inner = m.ssm_state_size, m.ssm_inner
        channels = inner + (2 * m.ssm_num_groups * n if mixer == "mamba2" else 0)
        state = (4.0 * b * inner * n + (m.ssm_conv_kernel - 1) * channels * b * e) / sh.tp  # fp32 state, conv tail
        across = ceil(sh.cp / cp_per_node) - 1  # of the cp - 1 passes, those from one node to the next
        near, far = (collective_s(Collective.SEND_RECV, 2, k, state, cl, eff) for k in (cp_per_node, 1))
        return (sh.cp - 1 - across) * near + across * far
    width = m.num_heads * (m.head_dim + m.v_head_dim) if m.kv_lora_rank else 2 * m.kv_width
    hops = sh.cp - 1
    if mixer == "sliding" and m.sliding_window:
        hops = minimum(hops, ceil(m.sliding_window * sh.cp / seq_len))
    hop = collective_s(Collective.SEND_RECV, 2, where(sh.cp > cp_per_node, 1, cp_per_node), n_tok * width * e / sh.tp,
                       cl, eff)
    return maximum(0.0, hops * hop - attention_core_s)


def sum_layer_totals(groups: tuple[GroupCost, ...], *, recompute: str, flash: bool, tp: Num,
                     sp: Num, mode: str = "attention") -> LayerTotals:
    """Every layer's costs under a recomputation choice (``mode``: what selective saves, estimate/recompute.py);
    ``sp``: sequence parallelism in effect. A layer with no backward (below every trainable parameter) is
    neither recomputed nor keeps activations."""
    fwd = bwd = rec = tps = cps = eps = params = trainable = act = experts = expert_trainable = remat = 0.0
    for g in groups:
        t, n, backward = g.time, g.count, g.backward
        recomputed = recomputed_s(recompute, mode, forward_s=t.forward_s, attention_core_s=t.attention_core_s,
                                  op_sac_s=t.op_sac_s, flash=flash, module_s=t.module_s)
        # full recompute repeats the forward's comm (layer-N: 1 layer in N; Megatron's mlp/moe modules: their block's)
        passes = in_layer_comm_passes(recompute, mode) if backward else 1
        ep_passes = in_layer_comm_passes(recompute, mode, expert=True) if backward else 1
        fwd += n * t.forward_s
        bwd += n * t.backward_s
        rec += n * recomputed * backward
        tps += n * g.tp_pass_s * passes
        cps += n * g.cp_fwd_s * (3 if backward else 1)
        eps += n * g.ep_pass_s * ep_passes
        params += n * g.params
        trainable += n * g.trainable
        experts += n * g.expert_params
        expert_trainable += n * g.expert_trainable
        if backward:
            kept = _activation_bytes(g.activation, tp=tp, sp=sp, recompute=recompute, mode=mode)
            act += n * kept
            if recompute != "none":
                none = _activation_bytes(g.activation, tp=tp, sp=sp, recompute="none", mode=mode)
                remat = maximum(remat, remat_bytes(none, kept))
    return LayerTotals(fwd_s=fwd, bwd_s=bwd, recompute_s=rec, tp_s=tps, cp_s=cps, ep_s=eps, params=params,
                       activation_bytes=act, trainable=trainable, expert_params=experts,
                       expert_trainable=expert_trainable, remat_bytes=remat)


def _activation_bytes(act: LayerActivation, *, tp: Num, sp: Num, recompute: str, mode: str) -> Num:
    """memory.layer_activation_bytes; over a column of ``sp`` once with and once without."""
    if is_column(sp):
        return np.where(sp, layer_activation_bytes(act, tp=tp, sp=True, recompute=recompute, mode=mode),
                        layer_activation_bytes(act, tp=tp, sp=False, recompute=recompute, mode=mode))
    return layer_activation_bytes(act, tp=tp, sp=sp, recompute=recompute, mode=mode)


def end_parts(sc: Scenario, sh: Sharding, ops: ModelOps, eff: Efficiency) -> tuple[EndCosts, EndCosts, EndCosts]:
    """The embedding (first stage), and the LM head with its loss (last stage) with pp = 1 and with pp > 1
    (a tied head holds its own copy of the table when it is not on the embedding's stage)."""
    cl, w = sc.cluster, sc.workload
    peaks, bw = compute_peaks(cl.chip, w.precision).at_ends(), cl.chip.memory_bytes_per_s
    head_t, emb_t = ops_time(ops.head, sh, peaks, bw, eff), ops_time(ops.embedding, sh, peaks, bw, eff)
    emb_p, head_1, head_n = local_end_params(sc, sh.tp)
    # multi-token prediction modules (DeepSeek-V3 §2.2) follow the main head on the last stage
    mtp_fwd = mtp_bwd = mtp_p = mtp_t = 0.0
    for g in ops.layers:
        if g.name == MTP_GROUP:
            recipe = fp8.recipe_for(w.precision, w.fp8_recipe, eff.framework, cl.chip.name)
            mtp = compute_peaks(cl.chip, w.precision, recipe)  # fp8 GEMMs, the ends' attention, no quantization
            t = ops_time(g.ops, sh, replace(peaks, matmul=mtp.matmul), bw, eff)
            mtp_fwd, mtp_bwd = mtp_fwd + g.count * t.forward_s, mtp_bwd + g.count * t.backward_s
            p = g.count * kind_params(g.params, g.expert_params, sh)
            mtp_p, mtp_t = mtp_p + p, mtp_t + p * (1.0 - g.frozen_params / g.params)
    emb = EndCosts(fwd_s=emb_t.forward_s, bwd_s=emb_t.backward_s, params=emb_p,
                   trainable=emb_p if ops.embedding_trains else 0.0)
    fwd, bwd = head_t.forward_s + mtp_fwd, head_t.backward_s + mtp_bwd
    # a tied head trains with the table: its gradient goes to the embedding's copy (pp 1) or its own (pp > 1)
    head_t1, head_tn = (head_1, head_n) if ops.head_trains else (0.0, 0.0)
    return (emb, EndCosts(fwd_s=fwd, bwd_s=bwd, params=head_1 + mtp_p, trainable=head_t1 + mtp_t),
            EndCosts(fwd_s=fwd, bwd_s=bwd, params=head_n + mtp_p, trainable=head_tn + mtp_t))
