"""One training step of a scenario, per device: time breakdown, FLOPs, MFU/HFU and memory.

Step time (Narayanan et al. 2021 §2.2, 1F1B and interleaved schedules):
    step = m * t_mb + (pp - 1) / vpp * t_mb + exposed DP communication + optimizer step
with m micro-batches per pipeline, t_mb the forward + backward (+ recomputation) time of one micro-batch on
the slowest stage including its exposed TP/CP/EP/PP communication; the bubble is (pp-1)/vpp micro-batch
times (GPipe has the same bubble, more memory).
MFU and HFU: Korthikanti et al. 2022 §6 / Chowdhery et al. 2022 App. B: model FLOPs / (step time x chips x
peak); hardware FLOPs also count recomputation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from greentrain import units
from greentrain.errors import InfeasibleError
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.memory import (
    MemoryBreakdown,
    device_memory,
    grad_bytes_per_param,
    loss_bytes_per_logit,
    stage_memory_args,
    weight_bytes_per_param,
    workload_master_bytes,
    workload_optimizer_bytes,
)
from greentrain.estimate.parallel_costs import axis_layout
from greentrain.estimate.recompute import recomputed_flop
from greentrain.estimate.stage import StageCosts, stage_costs
from greentrain.estimate.step_terms import dp_sync_s, grad_accum_s, micro_batch_s, optimizer_s, pp_send_s
from greentrain.model.ops import ModelOps, model_ops
from greentrain.parallel.strategy import Strategy, check_divisibility
from greentrain.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEstimate:
    step_time_s: float
    compute_time_s: float  # forward + backward + recomputation of all micro-batches, slowest stage
    recompute_time_s: float
    tp_comm_time_s: float  # exposed, whole step
    cp_comm_time_s: float
    ep_comm_time_s: float
    pp_comm_time_s: float
    dp_comm_time_s: float
    bubble_time_s: float
    optimizer_time_s: float
    num_micro_batches: int
    grad_accum_time_s: float = 0.0  # accumulating gradients outside the GEMMs, all micro-batches
    host_wait_time_s: float = 0.0  # the device waiting for the host to issue kernels (host-bound micro-batches)
    micro_batch_forward_s: float  # one micro-batch on the slowest stage, compute only
    micro_batch_backward_s: float  # backward + recomputation
    micro_batch_comm_s: float  # exposed TP/CP/EP/PP communication of one micro-batch (both passes)
    tokens_per_step: int
    model_flop_per_step: float
    hardware_flop_per_step: float
    tokens_per_s: float
    mfu: float
    hfu: float
    utilization: float  # fraction of the step a device is busy (not waiting in the pipeline bubble)
    memory: MemoryBreakdown  # the pipeline stage that needs the most
    memory_capacity_bytes: float
    first_stage_memory: MemoryBreakdown | None = None  # pipeline rank 0 (what a rank-0 log shows)


def dp_exposed_s(sc: Scenario, s: Strategy, st: StageCosts, eff: Efficiency, num_micro: int) -> float:
    """Exposed data-parallel communication of the whole step (step_terms.dp_sync_s)."""
    w = sc.workload
    params, wb = st.layer_params + st.extra_params, weight_bytes_per_param(w.precision)
    return dp_sync_s(zero=float(s.zero), dp_group=float(s.grad_group), dp_per_node=float(axis_layout(s, sc.cluster).dp),
                     grad_bytes=st.trainable * grad_bytes_per_param(w.grad_dtype, w.precision),
                     weight_bytes=params * wb, updated_weight_bytes=st.trainable * wb,
                     layers=st.layers, backward_s=st.bwd_s + st.recompute_s,
                     micro_batch_s=st.fwd_s + st.bwd_s + st.recompute_s, num_micro=float(num_micro),
                     cl=sc.cluster, eff=eff)


def _optimizer_s(sc: Scenario, s: Strategy, params: float, eff: Efficiency) -> float:
    """The optimizer step (step_terms.optimizer_s)."""
    w = sc.workload
    return optimizer_s(params=params, zero=s.zero, shard=s.grad_group, offload=s.offload_optimizer,
                       wb=weight_bytes_per_param(w.precision), gb=grad_bytes_per_param(w.grad_dtype, w.precision),
                       ob=workload_optimizer_bytes(w), cl=sc.cluster, eff=eff)


def _memory(sc: Scenario, s: Strategy, st: StageCosts, ops: ModelOps, num_micro: int,
            eff: Efficiency) -> tuple[MemoryBreakdown, MemoryBreakdown]:
    """The stage that needs the most memory, and the first stage (pipeline rank 0)."""
    which = (0,) if s.pp == 1 else (0, 2) if s.pp == 2 else (0, 1, 2)  # first, a middle, the last stage
    common = _memory_args(sc, s, ops, eff)
    stages = [device_memory(**common, **stage_memory_args(
        stage, pp=s.pp, vpp=s.vpp, num_micro=num_micro, gpipe=s.schedule == "gpipe", params=st.stage_params,
        trainable=st.stage_trainable, activations=st.stage_activation_bytes)) for stage in which]
    return max(stages, key=lambda m: m.total_bytes), stages[0]


def _memory_args(sc: Scenario, s: Strategy, ops: ModelOps, eff: Efficiency) -> dict[str, Any]:
    w = sc.workload
    return dict(spec=sc.model, shard=s.grad_group, zero=s.zero, offload=s.offload_optimizer,
                tokens=s.micro_batch_size * ops.seq_len / s.cp, tp=s.tp, sp=s.sequence_parallel, e=w.activation_bytes,
                wb=weight_bytes_per_param(w.precision), gb=grad_bytes_per_param(w.grad_dtype, w.precision),
                ob=workload_optimizer_bytes(w), reserved_bytes=eff.reserved_bytes,
                fragmentation=eff.fragmentation,
                loss_bytes_per_logit=loss_bytes_per_logit(eff.loss_kernel, w.activation_bytes),
                unsharded_master_bytes=0.0 if eff.zero_shards_master else workload_master_bytes(w))


def estimate_step(sc: Scenario, strategy: Strategy | None = None, *, check_fit: bool = True,
                  eff: Efficiency | None = None) -> StepEstimate:
    """Analytical estimate of one training step. Raises InfeasibleError if the strategy does not divide
    the model, or (with ``check_fit``) does not fit in the chip's memory."""
    s = strategy or sc.strategy
    if s is None:
        raise InfeasibleError("no strategy given: pass one or let `greentrain plan` choose")
    w, cl = sc.workload, sc.cluster
    eff = eff or efficiency_for(cl.chip.name)
    check_divisibility(s, sc.model, num_chips=cl.num_chips, global_batch_size=w.global_batch_size,
                       seq_len=w.seq_len)
    if s.zero not in eff.zero_stages:
        raise InfeasibleError(f"strategy {s.describe()}: the {eff.framework} framework runs ZeRO stages "
                              f"{', '.join(map(str, eff.zero_stages))}, not {s.zero}")
    ops = model_ops(sc.model, s.micro_batch_size, w.seq_len, w.activation_bytes, w.target_seq_len,
                    s.flash_attention and eff.attention_fused, w.finetune)
    num_micro = w.global_batch_size // (s.dp * s.micro_batch_size)
    st = stage_costs(sc, s, ops, eff)
    pp_mb = 2 * s.vpp * pp_send_s(pp=s.pp, tp=s.tp, inner=s.tp * s.cp * s.dp, cl=cl, eff=eff,
                                  payload_bytes=ops.micro_batch * ops.seq_len / s.cp * sc.model.hidden_size
                                  * w.activation_bytes)
    comm_mb = st.tp_s + st.cp_s + st.ep_s + pp_mb
    accum = grad_accum_s(st.trainable, cl.chip.memory_bytes_per_s, eff)
    device_mb = st.fwd_s + st.bwd_s + st.recompute_s + accum + comm_mb
    t_mb = micro_batch_s(device_mb, st.layers, eff, tp=s.tp, pp=s.pp, cl=cl)
    bubble = (s.pp - 1) / s.vpp * t_mb
    dp_s = dp_exposed_s(sc, s, st, eff, num_micro)
    opt_s = _optimizer_s(sc, s, st.trainable, eff) + eff.step_overhead_s
    step = num_micro * t_mb + bubble + dp_s + opt_s
    mem, first_stage = _memory(sc, s, st, ops, num_micro, eff)
    if check_fit and mem.total_bytes > cl.chip.memory_bytes:
        short = mem.total_bytes - cl.chip.memory_bytes
        raise InfeasibleError(
            f"strategy {s.describe()} does not fit: needs {units.bytes_to_gib(mem.total_bytes):.1f} GiB per "
            f"device, {cl.chip.name} has {units.bytes_to_gib(cl.chip.memory_bytes):.1f} GiB "
            f"(short by {units.bytes_to_gib(short):.1f} GiB)", shortfall_bytes=short)
    timing = StepTiming(num_micro=num_micro, micro_batch_s=t_mb, device_s=device_mb, grad_accum_s=accum,
                        micro_batch_comm_s=comm_mb, pp_send_s=pp_mb,
                        bubble_s=bubble, dp_s=dp_s, optimizer_s=opt_s, step_s=step)
    return _assemble(sc, s, ops, st, timing, mem, first_stage, eff)


def step_flops(sc: Scenario, ops: ModelOps, flash: bool, mode: str = "attention") -> tuple[float, dict[str, float]]:
    """Model FLOPs of one step, and per recomputation choice the extra hardware FLOPs per sequence.

    Model FLOPs: forward + the backward that runs (3 x forward when every weight trains; ModelOps.train_flop).
    Hardware FLOPs as Korthikanti et al. 2022 §6 define them: full recomputation adds one forward of every
    layer (96 B s L h^2 (1 + s/6h + V/16Lh), Narayanan et al. 2021 eq. 3); selective recomputation adds the
    attention core's forward and backward FLOPs (72 B s L h^2 (1 + s/3h + V/12hL)), although only its
    forward runs again (the time model recomputes the forward only). Layers with no backward (below every
    trainable parameter) are not recomputed. ``mode``: what selective recomputes (estimate/recompute.py)."""
    train, layer_fwd, core_fwd, sac_fwd = _flop_parts(ops)
    model_flop = train / ops.micro_batch * sc.workload.global_batch_size
    return model_flop, {r: recomputed_flop(r, mode, layer_fwd=layer_fwd, core_fwd=core_fwd, op_sac_fwd=sac_fwd,
                                           flash=flash) for r in ("none", "selective", "full")}


_FLOP_PARTS: dict[int, tuple[ModelOps, tuple[float, float, float, float]]] = {}


def _flop_parts(ops: ModelOps) -> tuple[float, float, float, float]:
    """(train FLOPs of a micro-batch, the forward of its layers with a backward, their attention cores, their op-SAC
    recomputed share) per sequence, once per ModelOps (model_ops caches them, so the same object comes back; keyed
    by identity with the object kept alive)."""
    hit = _FLOP_PARTS.get(id(ops))
    if hit is not None and hit[0] is ops:
        return hit[1]
    trained = [g for g in ops.layers if any(op.backward_share for op in g.ops)]
    layer_fwd = sum(g.count * g.flop for g in trained) / ops.micro_batch
    core_fwd = sum(g.count * sum(op.flop for op in g.ops if op.attention_core) for g in trained) / ops.micro_batch
    sac_fwd = sum(g.count * sum(op.flop * op.sac_recompute for op in g.ops) for g in trained) / ops.micro_batch
    parts = (ops.train_flop(), layer_fwd, core_fwd, sac_fwd)
    if len(_FLOP_PARTS) > 4096:
        _FLOP_PARTS.clear()
    _FLOP_PARTS[id(ops)] = (ops, parts)
    return parts


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTiming:
    """How a step's time is made: micro-batches on the slowest stage, the bubble, and what follows them."""

    num_micro: int
    micro_batch_s: float  # one micro-batch on the slowest stage: max(device, host), communication included
    device_s: float  # its device time (compute, accumulation, exposed communication): micro_batch_s's first term
    grad_accum_s: float  # its gradient accumulation outside the GEMMs
    micro_batch_comm_s: float  # its exposed TP/CP/EP/PP communication
    pp_send_s: float  # its pipeline sends (both passes, every virtual stage)
    bubble_s: float
    dp_s: float  # exposed data-parallel communication
    optimizer_s: float  # the optimizer step and fixed per-step costs
    step_s: float


def _assemble(sc: Scenario, s: Strategy, ops: ModelOps, st: StageCosts, t: StepTiming,
              mem: MemoryBreakdown, first_stage: MemoryBreakdown, eff: Efficiency) -> StepEstimate:
    w, cl = sc.workload, sc.cluster
    num_micro, comm_mb, pp_mb, bubble, dp_s, opt_s, step = (t.num_micro, t.micro_batch_comm_s, t.pp_send_s,
                                                            t.bubble_s, t.dp_s, t.optimizer_s, t.step_s)
    model_flop, extra = step_flops(sc, ops, s.flash_attention and eff.attention_fused, eff.selective_recompute)
    hw_flop = model_flop + extra[s.recompute] * w.global_batch_size
    peak_total = step * cl.num_chips * cl.chip.peak_flop_per_s(w.precision)
    return StepEstimate(
        step_time_s=step, compute_time_s=num_micro * (st.fwd_s + st.bwd_s + st.recompute_s),
        grad_accum_time_s=num_micro * t.grad_accum_s,
        host_wait_time_s=num_micro * max(0.0, t.micro_batch_s - t.device_s),
        recompute_time_s=num_micro * st.recompute_s, tp_comm_time_s=num_micro * st.tp_s,
        cp_comm_time_s=num_micro * st.cp_s, ep_comm_time_s=num_micro * st.ep_s,
        pp_comm_time_s=num_micro * pp_mb, dp_comm_time_s=dp_s, bubble_time_s=bubble, optimizer_time_s=opt_s,
        num_micro_batches=num_micro, micro_batch_forward_s=st.fwd_s,
        micro_batch_backward_s=st.bwd_s + st.recompute_s, micro_batch_comm_s=comm_mb,
        tokens_per_step=w.tokens_per_step, model_flop_per_step=model_flop, hardware_flop_per_step=hw_flop,
        tokens_per_s=w.tokens_per_step / step, mfu=model_flop / peak_total, hfu=hw_flop / peak_total,
        utilization=1.0 - bubble / step, memory=mem, memory_capacity_bytes=cl.chip.memory_bytes,
        first_stage_memory=first_stage)
