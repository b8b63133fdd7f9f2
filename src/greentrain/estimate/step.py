"""One training step of a scenario, per device: time breakdown, FLOPs, MFU/HFU and memory.

The step is composed in estimate/compose.py (its time, rates and memory, with their sources), the same
functions estimate_steps (estimate/vector.py) evaluates over many strategies at once; this module checks
one strategy, evaluates them with its numbers and assembles the breakdown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from greentrain import units
from greentrain.errors import InfeasibleError
from greentrain.estimate.compose import (
    MEMORY_STAGES,
    StepTiming,
    compose_step,
    dp_exposed_s,
    memory_stage_present,
    model_efficiency,
    stage_memory,
    stage_transients,
    state_bytes,
    step_flops,
    step_rates,
)
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.memory import MemoryBreakdown
from greentrain.estimate.parallel_costs import axis_layout
from greentrain.estimate.recompute import in_layer_comm_passes
from greentrain.estimate.stage import StageSplit, stage_costs
from greentrain.estimate.state_dtypes import workload_finetune, workload_grad_bytes
from greentrain.estimate.step_terms import bucket_bytes
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
    offload_wait_time_s: float = 0.0  # waiting for offloaded activations' copies (part of compute_time_s)
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

    @property
    def compute_share(self) -> float:
        """The share of the step the slowest stage computes (forward, backward, recomputation); the rest it waits:
        on exposed collectives, in the pipeline bubble, on the host, in the optimizer."""
        return self.compute_time_s / self.step_time_s if self.step_time_s > 0 else 1.0


def _memory(sc: Scenario, s: Strategy, st: StageSplit, num_micro: int,
            eff: Efficiency) -> tuple[MemoryBreakdown, MemoryBreakdown]:
    """The stage that needs the most memory, and the first stage (pipeline rank 0)."""
    state = state_bytes(sc, s, eff)
    expert_state = state_bytes(sc, s, eff, experts=True) if sc.model.is_moe else None
    stages = [stage_memory(stage_transients(sc, s, st, eff, num_micro, stage), state, eff, expert_state)
              for stage in MEMORY_STAGES if memory_stage_present(stage, s.pp)]
    return max(stages, key=lambda m: m.total_bytes), stages[0]


@dataclass(frozen=True, slots=True)
class _Evaluated:
    """What estimate_step computes on its way to the estimate (estimate_micro_batch reads it too)."""

    strategy: Strategy
    eff: Efficiency
    ops: ModelOps
    split: StageSplit
    timing: StepTiming
    memory: MemoryBreakdown
    first_stage: MemoryBreakdown


def _evaluate(sc: Scenario, strategy: Strategy | None, check_fit: bool, eff: Efficiency | None) -> _Evaluated:
    s = strategy or sc.strategy
    if s is None:
        raise InfeasibleError("no strategy given: pass one or let `greentrain plan` choose")
    w, cl = sc.workload, sc.cluster
    eff = model_efficiency(eff or efficiency_for(cl.chip.name), sc.model)
    check_divisibility(s, sc.model, num_chips=cl.num_chips, global_batch_size=w.global_batch_size,
                       seq_len=w.seq_len)
    if s.zero not in eff.zero_stages:
        raise InfeasibleError(f"strategy {s.describe()}: the {eff.framework} framework runs ZeRO stages "
                              f"{', '.join(map(str, eff.zero_stages))}, not {s.zero}")
    if lacked := eff.lacks(tp=s.tp, pp=s.pp, cp=s.cp, ep=s.ep):
        raise InfeasibleError(f"strategy {s.describe()}: {eff.lacks_message(lacked)}")
    if s.offload_optimizer and not eff.optimizer_offload:
        raise InfeasibleError(f"strategy {s.describe()}: the {eff.framework} framework keeps the optimizer states "
                              "on the device (no optimizer offload)")
    if s.offload_activations and not eff.activation_offload:
        raise InfeasibleError(f"strategy {s.describe()}: the {eff.framework} framework keeps activations on the "
                              "device (no activation offload)")
    ops = model_ops(sc.model, s.micro_batch_size, w.seq_len, w.activation_bytes, w.target_seq_len,
                    s.flash_attention and eff.attention_fused, workload_finetune(w, eff))
    st = stage_costs(sc, s, ops, eff)
    timing = compose_step(sc, s, st, eff)
    mem, first_stage = _memory(sc, s, st, timing.num_micro, eff)
    if check_fit and not cl.host_memory_fits(mem.host_bytes):
        raise InfeasibleError(
            f"strategy {s.describe()} does not fit in host memory: its offloads need "
            f"{units.bytes_to_gib(mem.host_bytes * cl.node_size):.1f} GiB per node, a node of {cl.chip.name} has "
            f"{units.bytes_to_gib(cl.host_memory_limit_bytes):.1f} GiB")
    if check_fit and mem.total_bytes > cl.chip.memory_bytes:
        short = mem.total_bytes - cl.chip.memory_bytes
        raise InfeasibleError(
            f"strategy {s.describe()} does not fit: needs {units.bytes_to_gib(mem.total_bytes):.1f} GiB per "
            f"device, {cl.chip.name} has {units.bytes_to_gib(cl.chip.memory_bytes):.1f} GiB "
            f"(short by {units.bytes_to_gib(short):.1f} GiB)", shortfall_bytes=short)
    return _Evaluated(strategy=s, eff=eff, ops=ops, split=st, timing=timing, memory=mem, first_stage=first_stage)


def estimate_step(sc: Scenario, strategy: Strategy | None = None, *, check_fit: bool = True,
                  eff: Efficiency | None = None) -> StepEstimate:
    """Analytical estimate of one training step. Raises InfeasibleError if the strategy does not divide
    the model, or (with ``check_fit``) does not fit in the chip's memory."""
    e = _evaluate(sc, strategy, check_fit, eff)
    return _assemble(sc, e.strategy, e.ops, e.split, e.timing, e.memory, e.first_stage, e.eff)


@dataclass(frozen=True, slots=True, kw_only=True)
class MicroBatchTiming:
    """One micro-batch of one device on the slowest stage, as the event simulator runs it (sim/cluster.py), and
    what follows the pipeline: the estimator's own terms, split into the passes the events need."""

    schedule: str
    pp: int
    vpp: int
    num_micro_batches: int
    forward_s: float  # compute, and the forward's pass of the exposed in-layer (TP/CP/EP) collectives and host wait
    backward_s: float  # backward + recomputation + gradient accumulation, and the other passes of those
    pp_send_s: float  # its pipeline sends: both passes, every virtual stage
    pp_crosses_nodes: bool
    dp_reduce_s: float  # reducing one device's gradients with no backward to hide behind (0 with ZeRO-3)
    dp_crosses_nodes: bool
    dp_tail_s: float  # ZeRO-3: the step's exposed DP communication (its gathers run per micro-batch)
    grad_bytes: float  # one device's gradients
    bucket_bytes: float  # the framework's gradient bucket (0: all gradients at once; step_terms.bucket_bytes)
    optimizer_s: float  # the optimizer step and the fixed per-step costs
    step_s: float  # estimate_step's step time


def estimate_micro_batch(sc: Scenario, strategy: Strategy | None = None, *,
                         eff: Efficiency | None = None) -> MicroBatchTiming:
    """estimate_step's micro-batch and step tail, for an event simulation of the pipeline (sim/cluster.py).

    The exposed in-layer collectives of a micro-batch run in each pass that repeats them
    (recompute.in_layer_comm_passes: 2 without recomputation, 3 with full): one pass is the forward's, the rest
    the backward's; a host-bound micro-batch's wait is split the same way. The DP reduction is compose's
    dp_exposed_s without the backward compute it hides behind (recomputation stays): the events overlap its
    buckets with the backward themselves."""
    e = _evaluate(sc, strategy, True, eff)
    s, st, t, eff = e.strategy, e.split, e.timing, e.eff
    w, m = sc.workload, int(t.num_micro)
    in_layer = st.tp_s + st.cp_s + st.ep_s
    host_wait = max(0.0, t.micro_batch_s - t.device_s)
    fwd_share = 1 / in_layer_comm_passes(s.recompute, eff.selective_recompute)
    grad_bytes = workload_grad_bytes(st.trainable, w, eff)
    zero3, lay = s.zero == 3, axis_layout(s, sc.cluster)
    return MicroBatchTiming(
        schedule=s.schedule, pp=s.pp, vpp=s.vpp, num_micro_batches=m,
        forward_s=st.fwd_s + fwd_share * (in_layer + host_wait),
        backward_s=st.bwd_s + st.recompute_s + t.grad_accum_s + (1 - fwd_share) * (in_layer + host_wait),
        pp_send_s=t.pp_send_s, pp_crosses_nodes=lay.pp_crosses_nodes,
        dp_reduce_s=0.0 if zero3 else dp_exposed_s(sc, s, dataclasses.replace(st, bwd_s=0.0), eff, m),
        dp_crosses_nodes=lay.dp < s.grad_group, dp_tail_s=t.dp_s if zero3 else 0.0,
        grad_bytes=grad_bytes, bucket_bytes=bucket_bytes(grad_bytes, st.trainable, s.dp, st.layers, eff),
        optimizer_s=t.optimizer_s, step_s=t.step_s)


def _assemble(sc: Scenario, s: Strategy, ops: ModelOps, st: StageSplit, t: StepTiming,
              mem: MemoryBreakdown, first_stage: MemoryBreakdown, eff: Efficiency) -> StepEstimate:
    w, cl = sc.workload, sc.cluster
    num_micro, step = t.num_micro, t.step_s
    model_flop, extra = step_flops(sc, ops, s.flash_attention and eff.attention_fused, eff.selective_recompute)
    r = step_rates(sc, step, t.bubble_s, model_flop, extra[s.recompute])
    return StepEstimate(
        step_time_s=step, compute_time_s=num_micro * (st.fwd_s + st.bwd_s + st.recompute_s),
        grad_accum_time_s=num_micro * t.grad_accum_s,
        host_wait_time_s=num_micro * max(0.0, t.micro_batch_s - t.device_s),
        offload_wait_time_s=num_micro * float(st.offload_wait_s),
        recompute_time_s=num_micro * st.recompute_s, tp_comm_time_s=num_micro * st.tp_s,
        cp_comm_time_s=num_micro * st.cp_s, ep_comm_time_s=num_micro * st.ep_s,
        pp_comm_time_s=num_micro * t.pp_send_s, dp_comm_time_s=t.dp_s, bubble_time_s=t.bubble_s,
        optimizer_time_s=t.optimizer_s, num_micro_batches=num_micro, micro_batch_forward_s=st.fwd_s,
        micro_batch_backward_s=st.bwd_s + st.recompute_s, micro_batch_comm_s=t.micro_batch_comm_s,
        tokens_per_step=w.tokens_per_step, model_flop_per_step=model_flop, hardware_flop_per_step=r.hardware_flop,
        tokens_per_s=r.tokens_per_s, mfu=r.mfu, hfu=r.hfu, utilization=r.utilization, memory=mem,
        memory_capacity_bytes=cl.chip.memory_bytes, first_stage_memory=first_stage)
