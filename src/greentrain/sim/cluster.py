"""`greentrain simulate step`: one training step of a scenario, event by event.

Costs come from the analytical model (estimate/step.estimate_micro_batch, its MicroBatchTiming record), so both
price the same ops: per micro-batch, the forward and backward (+ recomputation) time of a stage with its exposed
TP/CP/EP collectives split between the passes as the estimator counts them, the activation send between stages,
the DP gradient reduction, its bytes and the framework's buckets; this module only cuts them into model chunks.
Every stage costs what estimate/step.py's slowest stage costs (uniform devices); one DP replica's pipeline
is simulated, the others run the same schedule in lockstep.

What the events add: the schedule itself (its record's event order, parallel/schedules.py: GPipe, 1F1B,
interleaved 1F1B) with each micro-batch's dependencies instead of the record's closed-form bubble; sends that
block the sender (Megatron-LM's non-overlapped p2p) on links shared by concurrent transfers (sim/engine.py
SharedLink: the node's NIC for traffic between nodes, NVLink within one); DP gradient buckets reduced as they
become ready during each model chunk's last backward (PyTorch DDP buckets, Li et al. 2020, VLDB, §3.2.3),
sharing the link with the sends; stragglers (a stage computing slower) and slow inter-node links.
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
from greentrain.parallel.schedules import build_order
from greentrain.scenario import Scenario
from greentrain.sim.engine import Engine, SharedLink
from greentrain.sim.trace import Trace

if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Efficiency
    from greentrain.estimate.step import MicroBatchTiming

MAX_BUCKETS = 10_000  # per model chunk (DDP's default 25 MB: 5,600 for all of a 70B model's bf16 gradients)
MAX_OPS = 2_000_000  # forwards and backwards of a step, every stage: each is events (64 stages x 8,192 micro-batches)


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
    """Per-chunk costs of one micro-batch on one device: the estimator's MicroBatchTiming cut into the vpp model
    chunks and 2 vpp sends the events run (``from_timing``), or given by hand."""

    pp: int
    vpp: int
    num_micro_batches: int
    schedule: str  # a parallel/schedules.py name, agreeing with vpp
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

    @classmethod
    def from_timing(cls, t: MicroBatchTiming) -> StepCosts:
        """The estimator's micro-batch, per model chunk and per send."""
        return cls(pp=t.pp, vpp=t.vpp, num_micro_batches=t.num_micro_batches, schedule=t.schedule,
                   forward_s=t.forward_s / t.vpp, backward_s=t.backward_s / t.vpp,
                   send_s=t.pp_send_s / (2 * t.vpp) if t.pp > 1 else 0.0, pp_crosses_nodes=t.pp_crosses_nodes,
                   dp_reduce_s=t.dp_reduce_s, dp_crosses_nodes=t.dp_crosses_nodes, dp_tail_s=t.dp_tail_s,
                   grad_bytes=t.grad_bytes, optimizer_s=t.optimizer_s, analytic_step_time_s=t.step_s,
                   bucket_bytes=t.bucket_bytes)


def step_costs(sc: Scenario, eff: Efficiency | None = None) -> StepCosts:
    """The analytical model's per-micro-batch costs (estimate/step.estimate_micro_batch), split into chunks."""
    from greentrain.estimate.step import estimate_micro_batch

    if sc.strategy is None:
        raise ConfigError("strategy", None, "simulate step needs a strategy")
    return StepCosts.from_timing(estimate_micro_batch(sc, sc.strategy, eff=eff))


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
        if 2 * p * v * m > MAX_OPS:  # keep the simulation bounded: `greentrain plan` answers at any size
            raise ConfigError("step.num_micro_batches", m, f"x {p * v} virtual stages: at most {MAX_OPS // 2:,} "
                              "to simulate (a smaller global batch, a larger micro-batch, or `greentrain plan`)")
        self.V, self.m = p * v, m
        self.ops = build_order(c.schedule, p, v, m)
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
                         schedule=c.schedule, pp=c.pp, vpp=c.vpp,
                         num_micro_batches=c.num_micro_batches, stages=stages, num_events=pipe.eng.num_events,
                         wall_s=time.perf_counter() - t0)
