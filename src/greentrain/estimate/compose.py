"""One training step composed from its terms, written once over ``float | ndarray``.

estimate_step (estimate/step.py) calls these with one Strategy and its stage split (stage.StageSplit of
floats); estimate_steps (estimate/vector.py) with a StrategyTable and a StageSplit of columns, each function
evaluated once per distinct value of what it depends on. Neither composes a term of its own.

Step time (Narayanan et al. 2021 §2.2, 1F1B and interleaved schedules):
    step = m * t_mb + bubble * t_mb + exposed DP communication + optimizer step
with m micro-batches per pipeline, t_mb the forward + backward (+ recomputation) time of one micro-batch on
the slowest stage including its exposed TP/CP/EP/PP communication (step_terms.micro_batch_s: or the host's
time, when longer); the bubble, in micro-batch times, is the schedule's (parallel/schedules.py: (pp-1)/vpp for
1F1B, interleaved and GPipe, which holds more memory).
MFU and HFU: Korthikanti et al. 2022 §6 / Chowdhery et al. 2022 App. B: model FLOPs / (step time x chips x
peak); hardware FLOPs also count recomputation.
Memory: the first, a middle and the last pipeline stage (estimate/memory.py), the largest of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Protocol

from greentrain.estimate.comm import Collective, collective_s
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.memory import (
    MemoryBreakdown,
    StateBytes,
    device_memory,
    fsdp_gathered_bytes,
    held_micro_batches,
    state_bytes_per_param,
    transient_bytes,
)
from greentrain.estimate.parallel_costs import ranks_per_node
from greentrain.estimate.recompute import op_module_masks, recomputed_flop
from greentrain.estimate.stage import StageSplit
from greentrain.estimate.state_dtypes import (
    workload_grad_bytes,
    workload_master_bytes,
    workload_optimizer_bytes,
    workload_weight_bytes,
)
from greentrain.estimate.step_terms import dp_sync_s, grad_accum_s, micro_batch_s, optimizer_s, pp_send_s
from greentrain.model.loss import loss_bytes_per_logit
from greentrain.model.ops import ModelOps
from greentrain.model.spec import TransformerSpec
from greentrain.num import Num, maximum, minimum, where
from greentrain.parallel.derived import Fields
from greentrain.parallel.schedules import by_schedule
from greentrain.scenario import Scenario
from greentrain.workload import Workload


class StepStrategy(Fields, Protocol):
    """What the composition reads of a strategy: a parallel.Strategy (numbers) or a parallel.StrategyTable
    (a column per strategy) satisfy it, derived names (parallel/derived.py) included."""

    @property
    def vpp(self) -> Any: ...
    @property
    def zero(self) -> Any: ...
    @property
    def micro_batch_size(self) -> Any: ...
    @property
    def offload_optimizer(self) -> Any: ...
    @property
    def grad_group(self) -> Any: ...
    @property
    def ep(self) -> Any: ...
    @property
    def expert_tp(self) -> Any: ...
    @property
    def sequence_parallel(self) -> Any: ...
    @property
    def stage_ranks(self) -> Any: ...
    @property
    def schedule_code(self) -> Any: ...


def num_micro_batches(w: Workload, s: StepStrategy) -> Num:
    """Micro-batches per pipeline and step."""
    return w.global_batch_size // (s.dp * s.micro_batch_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineTiming:
    """The micro-batches on the slowest stage, the bubble and the exposed data-parallel communication: the step
    without its optimizer (float | ndarray)."""

    num_micro: Num
    micro_batch_s: Num  # one micro-batch on the slowest stage: max(device, host), communication included
    device_s: Num  # its device time (compute, accumulation, exposed communication): micro_batch_s's first term
    grad_accum_s: Num  # its gradient accumulation outside the GEMMs
    micro_batch_comm_s: Num  # its exposed TP/CP/EP/PP communication
    pp_send_s: Num  # its pipeline sends (both passes, every virtual stage)
    bubble_s: Num
    dp_s: Num  # exposed data-parallel communication


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTiming:
    """How a step's time is made: micro-batches on the slowest stage, the bubble, and what follows them."""

    num_micro: Num
    micro_batch_s: Num
    device_s: Num
    grad_accum_s: Num
    micro_batch_comm_s: Num
    pp_send_s: Num
    bubble_s: Num
    dp_s: Num
    optimizer_s: Num  # the optimizer step and fixed per-step costs
    step_s: Num


def pp_payload_bytes(sc: Scenario, s: StepStrategy) -> Num:
    """One micro-batch's activation (or its gradient) sent between adjacent stages, before the tp split."""
    w = sc.workload
    return s.micro_batch_size * w.seq_len / s.cp * sc.model.hidden_size * w.activation_bytes


def pipeline_timing(sc: Scenario, s: StepStrategy, st: StageSplit, eff: Efficiency, num_micro: Num) -> PipelineTiming:
    """The step up to the optimizer, of strategy ``s`` with the stage split ``st``."""
    cl = sc.cluster
    pp_mb = 2 * s.vpp * pp_send_s(pp=s.pp, tp=s.tp, inner=s.stage_ranks, cl=cl, eff=eff,
                                  payload_bytes=pp_payload_bytes(sc, s))
    comm_mb = st.tp_s + st.cp_s + st.ep_s + pp_mb
    accum = grad_accum_s(st.trainable, cl.chip.memory_bytes_per_s, eff)
    device_mb = st.fwd_s + st.bwd_s + st.recompute_s + accum + comm_mb
    t_mb = micro_batch_s(device_mb, st.layers, eff, tp=s.tp, pp=s.pp, cl=cl)
    bubble = by_schedule(s.schedule_code, "bubble", s.pp, s.vpp)  # in micro-batch times
    return PipelineTiming(num_micro=num_micro, micro_batch_s=t_mb, device_s=device_mb, grad_accum_s=accum,
                          micro_batch_comm_s=comm_mb, pp_send_s=pp_mb, bubble_s=bubble * t_mb,
                          dp_s=dp_exposed_s(sc, s, st, eff, num_micro))


def expert_dp_group(s: StepStrategy) -> Num:
    """Ranks that reduce a routed expert's gradients together: a stage's dp x cp x tp ranks over the ep x etp of
    an expert group (Megatron Core's expert data-parallel group, parallel_state intra_expt_dp_group, laid out
    outside etp and ep; torchtitan's efsdp = dp_shard x cp x tp / ep)."""
    return maximum(s.grad_group * s.tp / (s.ep * s.expert_tp), 1.0)


def expert_share(st: StageSplit) -> tuple[Num, Num]:
    """(trainable, all) routed-expert parameters of the stage holding the most of them, at most the stage
    split's own trainable and params."""
    t, p = st.stage_expert_trainable, st.stage_expert_params
    return (minimum(maximum(maximum(t[0], t[1]), t[2]), st.trainable),
            minimum(maximum(maximum(p[0], p[1]), p[2]), st.params))


def dp_exposed_s(sc: Scenario, s: StepStrategy, st: StageSplit, eff: Efficiency, num_micro: Num) -> Num:
    """Exposed data-parallel communication of the whole step (step_terms.dp_sync_s): the dense parameters'
    gradients over the gradient group, the routed experts' over the expert data-parallel group (expert_dp_group;
    Megatron Core's DDP keeps them in their own buffer reduced over that group, distributed_data_parallel.py
    expert_parallel_buffers), each group with its ranks per node. One stream reduces both kinds in bucket
    order as the backward produces them, so each overlaps with the share of the backward its reduction's time
    is of the whole."""
    w, cl = sc.workload, sc.cluster
    wb = workload_weight_bytes(w, eff)

    def sync(trainable: Num, params: Num, group: Num, per_node: Num, share: Num) -> Num:
        return dp_sync_s(zero=s.zero, dp_group=group, dp_per_node=per_node,
                         grad_bytes=workload_grad_bytes(trainable, w, eff), weight_bytes=params * wb,
                         updated_weight_bytes=trainable * wb, layers=st.layers,
                         backward_s=(st.bwd_s + st.recompute_s) * share,
                         micro_batch_s=(st.fwd_s + st.bwd_s + st.recompute_s) * share, num_micro=num_micro, cl=cl,
                         eff=eff, params=trainable, dp=s.dp)

    # the gradient group is dp x cp (Megatron Core's dp_cp group, FSDP's dp_shard x cp): tp ranks apart
    dense_per_node = ranks_per_node(s.tp, s.grad_group, cl.node_size)
    if not sc.model.is_moe:  # no routed experts: one group
        return sync(st.trainable, st.params, s.grad_group, dense_per_node, 1.0)
    e_trainable, e_params = expert_share(st)
    edp = expert_dp_group(s)
    parts = ((st.trainable - e_trainable, st.params - e_params, s.grad_group, dense_per_node),
             (e_trainable, e_params, edp, ranks_per_node(s.ep * s.expert_tp, edp, cl.node_size)))
    raw = [where(tr > 0, collective_s(Collective.REDUCE_SCATTER, g, k, workload_grad_bytes(tr, w, eff), cl,
                                      eff), 0.0) for tr, _, g, k in parts]
    whole = maximum(raw[0] + raw[1], 1e-30)
    shares = (where(raw[1] > 0, raw[0] / whole, 1.0), where(raw[1] > 0, raw[1] / whole, 0.0))
    out: Num = 0.0
    for (trainable, params, group, per_node), share in zip(parts, shares, strict=True):
        out = out + where(trainable > 0, sync(trainable, params, group, per_node, share), 0.0)
    return out


def step_optimizer_s(sc: Scenario, s: StepStrategy, trainable: Num, eff: Efficiency,
                     expert_trainable: Num = 0.0) -> Num:
    """The optimizer step of the ``trainable`` parameters (step_terms.optimizer_s) and the fixed per-step costs;
    the ``expert_trainable`` of them (routed experts) sharded over the expert data-parallel group."""
    w = sc.workload
    wb, gb = workload_weight_bytes(w, eff), workload_grad_bytes(1.0, w, eff)
    out: Num = eff.step_overhead_s
    parts = ((trainable - expert_trainable, s.grad_group), (expert_trainable, expert_dp_group(s)))
    for params, shard in parts if sc.model.is_moe else parts[:1]:
        out = out + optimizer_s(params=params, zero=s.zero, shard=shard, offload=s.offload_optimizer, wb=wb, gb=gb,
                                ob=workload_optimizer_bytes(w, eff), cl=sc.cluster, eff=eff)
    return out


def step_timing(p: PipelineTiming, optimizer_s: Num) -> StepTiming:
    """The step: every micro-batch, the bubble, the exposed DP communication and the optimizer step."""
    step = p.num_micro * p.micro_batch_s + p.bubble_s + p.dp_s + optimizer_s
    return StepTiming(num_micro=p.num_micro, micro_batch_s=p.micro_batch_s, device_s=p.device_s,
                      grad_accum_s=p.grad_accum_s, micro_batch_comm_s=p.micro_batch_comm_s, pp_send_s=p.pp_send_s,
                      bubble_s=p.bubble_s, dp_s=p.dp_s, optimizer_s=optimizer_s, step_s=step)


def compose_step(sc: Scenario, s: StepStrategy, st: StageSplit, eff: Efficiency) -> StepTiming:
    """pipeline_timing, step_optimizer_s and step_timing at one granularity (one strategy: estimate_step)."""
    p = pipeline_timing(sc, s, st, eff, num_micro_batches(sc.workload, s))
    return step_timing(p, step_optimizer_s(sc, s, st.trainable, eff, expert_share(st)[0]))


def step_flops(sc: Scenario, ops: ModelOps, flash: bool, mode: str = "attention") -> tuple[float, dict[str, float]]:
    """Model FLOPs of one step, and per recomputation choice the extra hardware FLOPs per sequence.

    Model FLOPs: forward + the backward that runs (3 x forward when every weight trains; ModelOps.train_flop).
    Hardware FLOPs as Korthikanti et al. 2022 §6 define them: full recomputation adds one forward of every
    layer (96 B s L h^2 (1 + s/6h + V/16Lh), Narayanan et al. 2021 eq. 3); selective recomputation adds the
    attention core's forward and backward FLOPs (72 B s L h^2 (1 + s/3h + V/12hL)), although only its
    forward runs again (the time model recomputes the forward only). Layers with no backward (below every
    trainable parameter) are not recomputed. ``mode``: what selective recomputes (estimate/recompute.py)."""
    train, layer_fwd, core_fwd, sac_fwd, module_fwd = _flop_parts(ops)
    model_flop = train / ops.micro_batch * sc.workload.global_batch_size
    return model_flop, {r: recomputed_flop(r, mode, layer_fwd=layer_fwd, core_fwd=core_fwd, op_sac_fwd=sac_fwd,
                                           flash=flash, module_fwd=module_fwd) for r in ("none", "selective", "full")}


_Parts = tuple[float, float, float, float, tuple[tuple[int, float], ...]]
_FLOP_PARTS: dict[int, tuple[ModelOps, _Parts]] = {}


def _flop_parts(ops: ModelOps) -> _Parts:
    """(train FLOPs of a micro-batch, the forward of its layers with a backward, their attention cores, their op-SAC
    recomputed share, the forward of each set of Megatron recompute modules) per sequence, once per ModelOps
    (model_ops caches them, so the same object comes back; keyed by identity with the object kept alive)."""
    hit = _FLOP_PARTS.get(id(ops))
    if hit is not None and hit[0] is ops:
        return hit[1]
    trained = [g for g in ops.layers if any(op.backward_share for op in g.ops)]
    layer_fwd = sum(g.count * g.flop for g in trained) / ops.micro_batch
    core_fwd = sum(g.count * sum(op.flop for op in g.ops if op.attention_core) for g in trained) / ops.micro_batch
    sac_fwd = sum(g.count * sum(op.flop * op.sac_recompute for op in g.ops) for g in trained) / ops.micro_batch
    modules: dict[int, float] = {}
    for g in trained:
        for op, mask in zip(g.ops, op_module_masks(g.ops), strict=True):
            if mask:
                modules[mask] = modules.get(mask, 0.0) + g.count * op.flop / ops.micro_batch
    parts = (ops.train_flop(), layer_fwd, core_fwd, sac_fwd, tuple(modules.items()))
    if len(_FLOP_PARTS) > 4096:
        _FLOP_PARTS.clear()
    _FLOP_PARTS[id(ops)] = (ops, parts)
    return parts


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRates:
    """Throughput and utilisation of a step (float | ndarray)."""

    model_flop: Num
    hardware_flop: Num
    tokens_per_s: Num
    mfu: Num
    hfu: Num
    utilization: Num  # fraction of the step a device is busy (not waiting in the pipeline bubble)


def step_rates(sc: Scenario, step_s: Num, bubble_s: Num, model_flop: Num, recomputed_flop_per_seq: Num) -> StepRates:
    """MFU and HFU over the cluster's peak (step_flops gives the FLOPs), tokens per second, utilisation."""
    w, cl = sc.workload, sc.cluster
    hw_flop = model_flop + recomputed_flop_per_seq * w.global_batch_size
    peak_total = step_s * cl.num_chips * cl.chip.peak_flop_per_s(w.precision)
    return StepRates(model_flop=model_flop, hardware_flop=hw_flop, tokens_per_s=w.tokens_per_step / step_s,
                     mfu=model_flop / peak_total, hfu=hw_flop / peak_total, utilization=1.0 - bubble_s / step_s)


# Pipeline stages whose memory is checked: the first (most micro-batches in flight, the embedding), the second
# (a middle one, when pp > 2), the last (the head and the loss, when pp > 1).
MEMORY_STAGES = (0, 1, 2)


def memory_stage_present(stage: int, pp: Num) -> Num:
    """Whether stage ``stage`` of MEMORY_STAGES is a distinct stage of a pipeline of ``pp``."""
    return (pp >= 1, pp > 2, pp > 1)[stage]


def _state_zero(s: StepStrategy, eff: Efficiency) -> Num:
    """The ZeRO stage the state's memory follows: ZeRO-1's with a pipeline where Efficiency.pp_gathers_state."""
    return where((s.pp > 1) & eff.pp_gathers_state, minimum(s.zero, 1), s.zero)


def model_efficiency(eff: Efficiency, model: TransformerSpec) -> Efficiency:
    """The profile as it runs ``model``: a framework whose own MoE model implementations fuse element-wise ops its
    Hugging Face models run as eager chains (``moe_fused_ops``; NeMo AutoModel) runs every norm of a MoE model
    fused, and its routed experts' GLU (compute.is_eager) as a fused kernel that keeps its input only (fused_glu;
    the memory of a dense or shared-expert MLP beside them, eager there, is counted as fused too). A framework
    whose fused RoPE takes no YaRN scale (``scaled_rope_fused`` false) runs a scaled rope (``rope_mscale`` != 1)
    as the eager chain: Megatron Core since 0.16 (rope_utils.py apply_rotary_pos_emb: "mscale is not supported
    by TE's fused RoPE. Using unfused implementation", 987395813b, 2025-11: the bshd layout; packed thd inputs
    later), gpt-oss's 1.347 among them. 0.15 ran the fused kernel, ignoring the scale."""
    if model.rotary and model.rope_mscale != 1.0 and not eff.scaled_rope_fused and "rope" not in eff.eager_ops:
        eff = _eager_rope(eff)
    return _moe_efficiency(eff) if model.is_moe and eff.moe_fused_ops else eff


@lru_cache(maxsize=64)
def _eager_rope(eff: Efficiency) -> Efficiency:  # one object per profile, as _moe_efficiency
    return replace(eff, eager_ops=(*eff.eager_ops, "rope"))


@lru_cache(maxsize=64)
def _moe_efficiency(eff: Efficiency) -> Efficiency:  # one object per profile: the estimator's caches key on it
    eager = tuple(k for k in eff.eager_ops if k != "norm" or k not in eff.moe_fused_ops)
    return replace(eff, eager_ops=eager, fused_glu=eff.fused_glu or "glu" in eff.moe_fused_ops)


def state_bytes(sc: Scenario, s: StepStrategy, eff: Efficiency, experts: bool = False) -> StateBytes:
    """Bytes per parameter of the model's state on one device of strategy ``s`` (sharded over grad_group; the
    routed experts' over the expert data-parallel group, dp x cp x tp / (ep x etp): memory.device_memory)."""
    w = sc.workload
    shard, master = expert_dp_group(s) if experts else s.grad_group, workload_master_bytes(w, eff)
    return state_bytes_per_param(shard=shard, zero=_state_zero(s, eff), offload=s.offload_optimizer,
                                 wb=workload_weight_bytes(w, eff),
                                 gb=workload_grad_bytes(1.0, w, eff), ob=workload_optimizer_bytes(w, eff),
                                 unsharded_master_bytes=0.0 if eff.zero_shards_master else master,
                                 shards_are_master=eff.shards_are_master and master > 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTransients:
    """One pipeline stage's parameters and transient tensors (float | ndarray), before the state's bytes."""

    params: Num
    trainable: Num
    activations_bytes: Num
    temporary_bytes: Num
    expert_params: Num = 0.0  # the routed experts' share of params (and of trainable)
    expert_trainable: Num = 0.0
    gathered_bytes: Num = 0.0  # memory.fsdp_gathered_bytes: unsharded weights beside the sharded ones
    host_activation_bytes: Num = 0.0  # activations offloaded to host memory (estimate/act_offload.py)
    grads_freed: Num = False  # no gradient before the forward (memory.freed_gradient_bytes): grads_freed below
    remat_bytes: Num = 0.0  # a recomputed layer's rematerialised activations, alive beside the last gradients


def grads_freed(s: StepStrategy, eff: Efficiency, num_micro: Num) -> Num:
    """Whether the step's forward runs with no gradient allocated: the framework frees them between steps
    (grads_set_to_none), one micro-batch a step (a second one's forward runs beside the first's gradients) and no
    DDP bucket holds them (torch DistributedDataParallel's buckets, allocated once with the reducer, exist
    when it wraps the model: more than one rank reducing gradients, without FSDP's per-block reduce-scatter)."""
    if not eff.grads_set_to_none:
        return False
    no_buckets = (s.grad_group <= 1) | ((_state_zero(s, eff) > 0) & eff.dp_bucket_per_layer)
    return (num_micro == 1) & no_buckets


def stage_transients(sc: Scenario, s: StepStrategy, st: StageSplit, eff: Efficiency, num_micro: Num,
                     stage: int) -> StageTransients:
    """Pipeline stage ``stage`` of MEMORY_STAGES: its parameters and transient tensors (memory.transient_bytes:
    memory.held_micro_batches of its layers' activations; the embedding on the first stage, the head and the
    loss on the last, the one stage of a pipeline of one holding both)."""
    w = sc.workload
    held = held_micro_batches(stage, pp=s.pp, vpp=s.vpp, num_micro=num_micro, schedule=s.schedule_code)
    acts, temp = transient_bytes(spec=sc.model, held=held, stage_activation_bytes=st.stage_activation_bytes[stage],
                                 tokens=s.micro_batch_size * w.seq_len / s.cp, tp=s.tp, sp=s.sequence_parallel,
                                 e=w.activation_bytes, embedding=stage == 0, head=where(s.pp == 1, True, stage == 2),
                                 loss_bytes=loss_bytes_per_logit(eff.loss_kernel, w.activation_bytes, s.tp > 1),
                                 remat_bytes=st.remat_bytes)
    gathered = fsdp_gathered_bytes(block_params=st.block_params, end_params=st.stage_end_params[stage],
                                   wb=workload_weight_bytes(w, eff),
                                   gathered=(_state_zero(s, eff) >= 3) & eff.dp_bucket_per_layer)
    return StageTransients(params=st.stage_params[stage], trainable=st.stage_trainable[stage],
                           activations_bytes=acts, temporary_bytes=temp,
                           expert_params=st.stage_expert_params[stage],
                           expert_trainable=st.stage_expert_trainable[stage], gathered_bytes=gathered,
                           host_activation_bytes=st.host_activation_bytes, grads_freed=grads_freed(s, eff, num_micro),
                           remat_bytes=st.remat_bytes)


def stage_memory(t: StageTransients, state: StateBytes, eff: Efficiency,
                 expert_state: StateBytes | None = None) -> MemoryBreakdown:
    """memory.device_memory of one stage: its transients and its parameters' state (the routed experts' at
    ``expert_state``: state_bytes with experts)."""
    return device_memory(params=t.params, trainable=t.trainable, state=state, activations=t.activations_bytes,
                         temporary=t.temporary_bytes, reserved_bytes=eff.reserved_bytes,
                         fragmentation=eff.fragmentation, expert_params=t.expert_params,
                         expert_trainable=t.expert_trainable, expert_state=expert_state,
                         gathered_bytes=t.gathered_bytes, host_activation_bytes=t.host_activation_bytes,
                         grads_freed=t.grads_freed, end_bytes=t.remat_bytes)
