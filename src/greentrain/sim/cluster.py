"""`greentrain simulate step`: one training step of a scenario, event by event.

Costs come from the analytical model (estimate/step.py), so both price the same ops: per micro-batch, the
forward and backward (+ recomputation) time of a stage, its exposed TP/CP/EP collectives (inside the layers:
added to the stage's forward and backward, one pass of estimate/recompute.in_layer_comm_passes forward:
1/2 when nothing is recomputed, 1/3 with full recomputation), the activation send between stages and the DP
gradient reduction.
Every stage costs what estimate/step.py's slowest stage costs (uniform devices); one DP replica's pipeline
is simulated, the others run the same schedule in lockstep.

What the events add: the schedule itself (sim/schedules.py: GPipe, 1F1B, interleaved 1F1B) with each
micro-batch's dependencies instead of the closed-form bubble (pp - 1) / vpp; sends that block the sender
(Megatron-LM's non-overlapped p2p) on links shared by concurrent transfers (sim/engine.py SharedLink: the
node's NIC for traffic between nodes, NVLink within one); DP gradient buckets reduced as they become ready
during each model chunk's last backward (PyTorch DDP buckets, Li et al. 2020, VLDB, §3.2.3), sharing the
link with the sends; stragglers (a stage computing slower) and slow inter-node links.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from greentrain import units
from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError
from greentrain.scenario import Scenario
from greentrain.sim.engine import Engine, SharedLink
from greentrain.sim.schedules import build_schedule
from greentrain.sim.trace import Trace

if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Efficiency

MAX_BUCKETS = 10_000  # per model chunk (DDP's default 25 MB: 5,600 for all of a 70B model's bf16 gradients)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOptions:
    stragglers: Mapping[int, float] = field(default_factory=dict)  # pipeline stage -> compute slowdown
    inter_node_slowdown: float = 1.0  # inter-node transfers take this many times longer
    bucket_mb: float = 0.0  # DP gradient bucket in MB; 0: the framework profile's (StepCosts.bucket_bytes)

    def __post_init__(self) -> None:
        slow = BOUNDS["slowdown"]  # ranges and reasons: config.BOUNDS (0=1e8 looped forever in the engine)
        for stage, factor in self.stragglers.items():
            require(slow.ok(factor), "step.stragglers", f"{stage}={factor:g}", "factor " + slow.rule())
        slow.check(self.inter_node_slowdown, "step.inter_node_slowdown")
        require(math.isfinite(self.bucket_mb) and self.bucket_mb >= 0, "step.bucket_mb", self.bucket_mb,
                "must be >= 0 (0: the framework's buckets)")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCosts:
    """Per-chunk costs of one micro-batch on one device, from estimate/step.py."""

    pp: int
    vpp: int
    num_micro_batches: int
    schedule: str
    forward_s: float  # one chunk's forward, TP/CP/EP forward collectives included
    backward_s: float  # one chunk's backward + recomputation + collectives
    send_s: float  # one activation or gradient send between adjacent virtual stages
    pp_crosses_nodes: bool
    dp_reduce_s: float  # reducing one device's gradients (all chunks), unoverlapped
    dp_crosses_nodes: bool
    dp_tail_s: float  # ZeRO-3: the analytical exposed DP time, added at the end (not event-level)
    grad_bytes: float  # one device's gradients
    optimizer_s: float
    analytic_step_time_s: float
    # the framework's gradient bucket (0: one bucket per model chunk); PyTorch DDP's 25 MiB by default
    bucket_bytes: float = 25 * 2**20


def step_costs(sc: Scenario, eff: Efficiency | None = None) -> StepCosts:
    """The analytical model's per-micro-batch costs, split into chunks and passes."""
    from greentrain.estimate.compose import dp_exposed_s
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.estimate.memory import workload_grad_bytes
    from greentrain.estimate.parallel_costs import axis_layout
    from greentrain.estimate.recompute import in_layer_comm_passes
    from greentrain.estimate.stage import stage_costs
    from greentrain.estimate.step import estimate_step
    from greentrain.estimate.step_terms import bucket_bytes
    from greentrain.model.ops import model_ops

    s, w = sc.strategy, sc.workload
    eff = eff or efficiency_for(sc.cluster.chip.name)
    if s is None:
        raise ConfigError("strategy", None, "simulate step needs a strategy")
    est = estimate_step(sc, s, eff=eff)
    m = est.num_micro_batches
    ops = model_ops(sc.model, s.micro_batch_size, w.seq_len, w.activation_bytes, w.target_seq_len,
                    s.flash_attention, w.finetune)
    st = stage_costs(sc, s, ops, eff)
    in_layer = (est.tp_comm_time_s + est.cp_comm_time_s + est.ep_comm_time_s) / m
    fwd_share = 1 / in_layer_comm_passes(s.recompute, eff.selective_recompute)  # one pass of them is the forward
    host_wait, accum = est.host_wait_time_s / m, est.grad_accum_time_s / m  # a host-bound micro-batch's wait
    lay = axis_layout(s, sc.cluster)
    zero3 = s.zero == 3
    dp_reduce = 0.0 if zero3 else dp_exposed_s(sc, s, dataclasses.replace(st, bwd_s=0.0), eff, m)
    grad_bytes = workload_grad_bytes(st.trainable, w)
    return StepCosts(
        pp=s.pp, vpp=s.vpp, num_micro_batches=m, schedule=s.schedule,
        forward_s=(est.micro_batch_forward_s + fwd_share * (in_layer + host_wait)) / s.vpp,
        backward_s=(est.micro_batch_backward_s + accum + (1 - fwd_share) * (in_layer + host_wait)) / s.vpp,
        send_s=est.pp_comm_time_s / m / (2 * s.vpp) if s.pp > 1 else 0.0,
        pp_crosses_nodes=lay.pp_crosses_nodes, dp_reduce_s=dp_reduce,
        dp_crosses_nodes=lay.dp < s.grad_group, dp_tail_s=est.dp_comm_time_s if zero3 else 0.0,
        grad_bytes=grad_bytes, optimizer_s=est.optimizer_time_s, analytic_step_time_s=est.step_time_s,
        bucket_bytes=bucket_bytes(grad_bytes, st.layers, eff))  # the estimator's buckets (step_terms.num_buckets)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageStats:
    stage: int
    compute_s: float
    send_s: float  # blocked sending activations or gradients
    idle_s: float  # bubble and waiting for inputs
    slowdown: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSimResult:
    step_time_s: float
    pipeline_time_s: float  # the last forward/backward/send ends
    dp_exposed_s: float  # gradient reduction after the pipeline drains
    optimizer_time_s: float
    analytic_step_time_s: float
    schedule: str
    pp: int
    vpp: int
    num_micro_batches: int
    stages: tuple[StageStats, ...]
    num_events: int
    wall_s: float

    @property
    def bubble_fraction(self) -> float:
        busy = sum(st.compute_s for st in self.stages) / len(self.stages)
        return 1.0 - busy / self.pipeline_time_s if self.pipeline_time_s else 0.0

    @property
    def error_vs_analytic(self) -> float:
        return self.step_time_s / self.analytic_step_time_s - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "step", "step_time_s": self.step_time_s, "pipeline_time_s": self.pipeline_time_s,
                "dp_exposed_s": self.dp_exposed_s, "optimizer_time_s": self.optimizer_time_s,
                "analytic_step_time_s": self.analytic_step_time_s, "error_vs_analytic": self.error_vs_analytic,
                "bubble_fraction": self.bubble_fraction, "schedule": self.schedule, "pp": self.pp,
                "vpp": self.vpp, "num_micro_batches": self.num_micro_batches, "num_events": self.num_events,
                "sim_wall_s": self.wall_s, "stages": [dataclasses.asdict(st) for st in self.stages]}


class _Pipeline:
    """Devices run their schedule's ops in order; an op starts when its input has arrived."""

    def __init__(self, c: StepCosts, opts: StepOptions, trace: Trace | None) -> None:
        self.c, self.eng = c, Engine(trace)
        p, v, m = c.pp, c.vpp, c.num_micro_batches
        self.V, self.m = p * v, m
        self.ops = build_schedule(c.schedule, p, v, m)
        self.ptr, self.busy = [0] * p, [False] * p
        self.slow = [opts.stragglers.get(d, 1.0) for d in range(p)]
        self.arrived: set[tuple[bool, int, int]] = set()  # (is_backward, micro-batch, virtual stage)
        self.compute_s, self.send_s = [0.0] * p, [0.0] * p
        self.end_s = 0.0
        self.nic = [SharedLink(self.eng, f"link/stage{d}.nic", 1.0) for d in range(p)]
        self.nvl = [SharedLink(self.eng, f"link/stage{d}.nvlink", 1.0) for d in range(p)]
        self.inter = opts.inter_node_slowdown
        self.dp_left = [0] * p
        self.dp_done_s = [0.0] * p
        chunk = c.grad_bytes / c.vpp
        bucket = opts.bucket_mb * units.MB if opts.bucket_mb else (c.bucket_bytes or chunk)
        if not opts.bucket_mb:  # the profile's buckets, merged where they would be too many events
            bucket = max(bucket, chunk / MAX_BUCKETS)
        self.num_buckets = max(1, math.ceil(chunk / bucket))
        if self.num_buckets > MAX_BUCKETS:  # each bucket is an event per stage: keep the simulation bounded
            least_mb = c.grad_bytes / c.vpp / MAX_BUCKETS / units.MB
            raise ConfigError("step.bucket_mb", opts.bucket_mb,
                              f"gives {self.num_buckets:,} gradient buckets per model chunk; at most "
                              f"{MAX_BUCKETS:,} (use >= {least_mb:.3g} MB)")
        self.last_b = [self._last_backwards(d) for d in range(p)]

    def _last_backwards(self, d: int) -> set[int]:
        seen: set[int] = set()
        last: set[int] = set()
        for i in range(len(self.ops[d]) - 1, -1, -1):
            bwd, _, chunk = self.ops[d][i]
            if bwd and chunk not in seen:
                seen.add(chunk)
                last.add(i)
        return last

    def _link(self, d: int, crosses: bool) -> tuple[SharedLink, float]:
        return (self.nic[d], self.inter) if crosses else (self.nvl[d], 1.0)

    def try_run(self, d: int) -> None:
        if self.busy[d] or self.ptr[d] >= len(self.ops[d]):
            return
        bwd, mb, chunk = self.ops[d][self.ptr[d]]
        v = chunk * self.c.pp + d
        if (v != self.V - 1 if bwd else v != 0) and (bwd, mb, v) not in self.arrived:
            return
        self.busy[d] = True
        dur = (self.c.backward_s if bwd else self.c.forward_s) * self.slow[d]
        now = self.eng.now_s
        self.compute_s[d] += dur
        if self.eng.trace is not None:
            self.eng.trace.span(f"stage/{d}", f"{'B' if bwd else 'F'} mb{mb} c{chunk}", now, now + dur,
                                "backward" if bwd else "forward")
        if self.ptr[d] in self.last_b[d] and self.c.dp_reduce_s > 0:
            k = self.num_buckets
            self.dp_left[d] += k
            for i in range(k):
                self.eng.at(now + dur * (i + 1) / k, self._bucket, d)
        self.eng.at(now + dur, self._op_done, d)

    def _op_done(self, d: int) -> None:
        bwd, mb, chunk = self.ops[d][self.ptr[d]]
        v = chunk * self.c.pp + d
        nxt = v - 1 if bwd else v + 1
        if 0 <= nxt < self.V and self.c.send_s > 0:
            link, factor = self._link(d, self.c.pp_crosses_nodes)
            dur = self.c.send_s * factor
            self.send_s[d] += dur  # uncontended; contention shows in the step time
            link.send(dur, self._sent, (d, bwd, mb, nxt), label=f"{'grad' if bwd else 'act'} mb{mb}")
        else:
            if 0 <= nxt < self.V:
                self.arrived.add((bwd, mb, nxt))
                self.try_run(nxt % self.c.pp)
            self._advance(d)

    def _sent(self, arg: tuple[int, bool, int, int]) -> None:
        d, bwd, mb, nxt = arg
        self.arrived.add((bwd, mb, nxt))
        self._advance(d)
        self.try_run(nxt % self.c.pp)

    def _advance(self, d: int) -> None:
        self.busy[d] = False
        self.ptr[d] += 1
        self.end_s = max(self.end_s, self.eng.now_s)
        self.try_run(d)

    def _bucket(self, d: int) -> None:
        link, factor = self._link(d, self.c.dp_crosses_nodes)
        dur = self.c.dp_reduce_s / (self.c.vpp * self.num_buckets) * factor
        link.send(dur, self._bucket_done, d, label="dp bucket")

    def _bucket_done(self, d: int) -> None:
        self.dp_left[d] -= 1
        if self.dp_left[d] == 0:
            self.dp_done_s[d] = self.eng.now_s

    def run(self) -> float:
        for d in range(self.c.pp):
            self.try_run(d)
        self.eng.run()
        stuck = [d for d in range(self.c.pp) if self.ptr[d] < len(self.ops[d])]
        assert not stuck, f"pipeline deadlock on stages {stuck}"
        return max(self.end_s, *self.dp_done_s)


def simulate_step(sc: Scenario, options: StepOptions | None = None, *, trace: Trace | None = None,
                  eff: Efficiency | None = None) -> StepSimResult:
    """One training step of ``sc`` (which must carry a strategy), event by event."""
    return simulate_costs(step_costs(sc, eff), options, trace=trace)


def simulate_costs(c: StepCosts, options: StepOptions | None = None, *,
                   trace: Trace | None = None) -> StepSimResult:
    """Run the pipeline of ``c`` event by event."""
    opts = options or StepOptions()
    for stage in opts.stragglers:
        require(0 <= stage < c.pp, "step.stragglers", stage, f"stage must be in [0, {c.pp - 1}] (pp={c.pp})")
    t0 = time.perf_counter()
    pipe = _Pipeline(c, opts, trace)
    done = pipe.run()
    step = done + c.dp_tail_s + c.optimizer_s
    stages = tuple(StageStats(stage=d, compute_s=pipe.compute_s[d], send_s=pipe.send_s[d],
                              idle_s=max(0.0, pipe.end_s - pipe.compute_s[d] - pipe.send_s[d]),
                              slowdown=pipe.slow[d]) for d in range(c.pp))
    return StepSimResult(step_time_s=step, pipeline_time_s=pipe.end_s, dp_exposed_s=done - pipe.end_s + c.dp_tail_s,
                         optimizer_time_s=c.optimizer_s, analytic_step_time_s=c.analytic_step_time_s,
                         schedule="interleaved" if c.vpp > 1 else c.schedule, pp=c.pp, vpp=c.vpp,
                         num_micro_batches=c.num_micro_batches, stages=stages, num_events=pipe.eng.num_events,
                         wall_s=time.perf_counter() - t0)
