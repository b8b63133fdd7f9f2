"""Seed 000's heterogeneous swarm, event by event.

Each device is a state machine NONE -> INGRESS -> COMPUTE -> EGRESS -> NONE (seed 000's Simulation Guide):
a free device takes a task, receives its inputs (bytes / ingress bandwidth + latency), computes
(FLOPs x slowdown / FLOP/s), sends its result (bytes / egress bandwidth + latency) and takes the next.
A round ends when every task is done; rounds run back to back. The tasks come from sim/tasks.py.

Schedulers (who takes which task):
- ``greedy``: the seed's loop. Tasks in model order; a device that becomes free takes the next one; at equal
  times devices go in file order; idle devices are woken in file order.
- ``fastest``: largest task first, fastest free device first (LPT list scheduling, Graham 1969, SIAM J.
  Appl. Math. 17(2): makespan within 4/3 - 1/(3m) of optimal on identical machines).
- ``bandwidth``: earliest estimated completion time. Each task, in model order, goes to the device that
  would finish it first given the work already planned on it, counting its ingress, compute and egress
  (the EFT rule of HEFT, Topcuoglu et al. 2002, IEEE TPDS 13(3) §4.1); each device then works its own queue,
  and a device whose queue runs dry steals the last task of the device planned to finish last when it would
  finish it sooner.

Unreliable devices: with ``failure_probability`` a task attempt ends in a dropout at a uniformly random point
of its duration; the work is lost, the task goes back to the front of the queue (``bandwidth``: re-planned
on the live devices), and the device is out for ``rejoin_s`` (default: the rest of the round). Stragglers
(``slowdown`` > 1) compute slower; with ``backup_tasks`` an idle device launches a backup copy of the
in-flight task expected to finish last when it would finish it sooner, the first copy to finish wins and the
other is cancelled (backup tasks, Dean & Ghemawat 2004, "MapReduce", OSDI §3.6). Randomness comes from one
``random.Random(seed)``: a seed gives the same run every time.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from greentrain.config import BOUNDS, require
from greentrain.errors import InfeasibleError, did_you_mean
from greentrain.sim.devices import Device
from greentrain.sim.engine import Engine
from greentrain.sim.planner import EftPlanner
from greentrain.sim.results import DeviceRound, RoundResult
from greentrain.sim.tasks import TaskSet
from greentrain.sim.trace import Trace

SCHEDULERS = ("greedy", "fastest", "bandwidth")
_PHASES = ("ingress", "compute", "egress")
_INF = math.inf
ProgressFn = Callable[[int, int], None]  # (round index, tasks done in it)


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmOptions:
    scheduler: str = "greedy"
    seed: int = 0
    backup_tasks: bool = False

    def __post_init__(self) -> None:
        require(self.scheduler in SCHEDULERS, "scheduler", self.scheduler,
                "unknown scheduler" + did_you_mean(self.scheduler, SCHEDULERS))


class SwarmRound:
    """The state of one round. Callbacks take ``(device, generation)``: a stale generation is ignored."""

    def __init__(self, devices: Sequence[Device], tasks: TaskSet, opts: SwarmOptions, rng: random.Random,
                 index: int, start_s: float, trace: Trace | None, progress: ProgressFn | None) -> None:
        self.devices, self.tasks, self.opts, self.rng, self.index = devices, tasks, opts, rng, index
        self.eng = Engine(trace)
        self.eng.now_s = start_s
        self.start_s, self.progress = start_s, progress
        n = len(devices)
        self.spf = [d.slowdown / d.flop_per_s for d in devices]  # seconds per FLOP
        self.inv_in = [1.0 / d.ingress_bytes_per_s for d in devices]
        self.inv_out = [1.0 / d.egress_bytes_per_s for d in devices]
        self.lat = [d.latency_s for d in devices]
        self.pfail = [d.failure_probability for d in devices]
        self.tf, self.tin, self.tout = tasks.flop.tolist(), tasks.in_bytes.tolist(), tasks.out_bytes.tolist()
        fastest_first = sorted(range(n), key=lambda i: (-devices[i].effective_flop_per_s, i))
        self.rank = [0] * n
        for r, i in enumerate(fastest_first if opts.scheduler == "fastest" else range(n)):
            self.rank[i] = r
        self.cur = [-1] * n
        self.gen = [0] * n
        self.phase = [0] * n
        self.phase_start = [start_s] * n
        self.fail_at = [_INF] * n
        self.out = [False] * n
        self.acc = [[0.0] * n for _ in range(3)]
        self.done_count, self.fail_count, self.cancel_count = [0] * n, [0] * n, [0] * n
        self.flop_done = [0.0] * n
        self.done = bytearray(tasks.num_tasks)
        self.remaining = tasks.num_tasks
        self.bytes_moved = 0.0
        self.requeued = self.backups = 0
        self.end_s = start_s
        self.idle: list[tuple[int, int]] = []
        self.copies: dict[int, list[int]] = {}
        self.inflight: list[tuple[float, int, int, int]] = []
        self.queue: deque[int] = deque()
        self.local: list[deque[int]] = [deque() for _ in range(n)]
        self.planner = EftPlanner(self) if opts.scheduler == "bandwidth" else None

    def dur(self, d: int, t: int) -> float:
        return (self.tin[t] * self.inv_in[d] + self.tf[t] * self.spf[d] + self.tout[t] * self.inv_out[d]
                + 2.0 * self.lat[d])

    # ---- the state machine -------------------------------------------------------------------------
    def start(self, d: int, t: int) -> None:
        now = self.eng.now_s
        self.cur[d] = t
        self.phase[d] = 0
        self.phase_start[d] = now
        p = self.pfail[d]
        self.fail_at[d] = now + self.rng.random() * self.dur(d, t) if p and self.rng.random() < p else _INF
        if self.opts.backup_tasks:
            heapq.heappush(self.inflight, (-(now + self.dur(d, t)), t, d, self.gen[d]))
        self._next(d, now + self.tin[t] * self.inv_in[d] + self.lat[d], self._ingress_done)

    def _next(self, d: int, end: float, callback: Callable[[tuple[int, int]], None]) -> None:
        if end > self.fail_at[d]:
            self.eng.at(self.fail_at[d], self._fail, (d, self.gen[d]), self.rank[d])
        else:
            self.eng.at(end, callback, (d, self.gen[d]), self.rank[d])

    def _close_phase(self, d: int) -> float:
        now = self.eng.now_s
        ph = self.phase[d]
        self.acc[ph][d] += now - self.phase_start[d]
        trace = self.eng.trace
        if trace is not None:
            name, label = self.devices[d].name, self.tasks.label(self.cur[d])
            trace.span(f"device/{name}", label, self.phase_start[d], now, _PHASES[ph])
            if ph != 1:
                trace.span(f"link/{name}.{_PHASES[ph]}", label, self.phase_start[d], now, _PHASES[ph])
        self.phase_start[d] = now
        return now

    def _ingress_done(self, arg: tuple[int, int]) -> None:
        d, g = arg
        if self.gen[d] != g:
            return
        now = self._close_phase(d)
        t = self.cur[d]
        self.bytes_moved += self.tin[t]
        self.phase[d] = 1
        self._next(d, now + self.tf[t] * self.spf[d], self._compute_done)

    def _compute_done(self, arg: tuple[int, int]) -> None:
        d, g = arg
        if self.gen[d] != g:
            return
        now = self._close_phase(d)
        self.phase[d] = 2
        t = self.cur[d]
        self._next(d, now + self.tout[t] * self.inv_out[d] + self.lat[d], self._egress_done)

    def _egress_done(self, arg: tuple[int, int]) -> None:
        d, g = arg
        if self.gen[d] != g:
            return
        now = self._close_phase(d)
        t = self.cur[d]
        self.bytes_moved += self.tout[t]
        self.gen[d] += 1
        self.cur[d] = -1
        self.done[t] = 1
        self.done_count[d] += 1
        self.flop_done[d] += self.tf[t]
        self.remaining -= 1
        if self.remaining == 0:
            self.end_s = now
        if self.progress is not None and self.remaining % 10_000 == 0:
            self.progress(self.index, self.tasks.num_tasks - self.remaining)
        others = self.copies.pop(t, None)
        if others:
            for b in others:
                if b != d and self.cur[b] == t:
                    self._cancel(b)
        self.free(d)

    def _cancel(self, b: int) -> None:
        self._close_phase(b)
        self.gen[b] += 1
        self.cur[b] = -1
        self.cancel_count[b] += 1
        self.free(b)

    def _fail(self, arg: tuple[int, int]) -> None:
        d, g = arg
        if self.gen[d] != g:
            return
        self._close_phase(d)
        t = self.cur[d]
        self.gen[d] += 1
        self.cur[d] = -1
        self.fail_count[d] += 1
        self.out[d] = True
        rejoin = self.devices[d].rejoin_s
        if rejoin != _INF:
            self.eng.at(self.eng.now_s + rejoin, self._rejoin, (d, self.gen[d]), self.rank[d])
        copies = self.copies.get(t)
        if copies is not None and any(b != d and self.cur[b] == t for b in copies):
            self.copies[t] = [b for b in copies if b != d]
            return  # another copy still runs
        self.copies.pop(t, None)
        self.requeued += 1
        if self.planner is not None:
            self.planner.drop(d, t)
        else:
            self.queue.appendleft(t)
            if self.idle:
                self.start(heapq.heappop(self.idle)[1], self.queue.popleft())

    def _rejoin(self, arg: tuple[int, int]) -> None:
        d, g = arg
        if self.gen[d] != g or self.remaining == 0:
            return
        self.out[d] = False
        self.phase_start[d] = self.eng.now_s
        if self.planner is not None:
            self.planner.rejoin(d)
        self.free(d)

    # ---- scheduling --------------------------------------------------------------------------------
    def free(self, d: int) -> None:
        """Device ``d`` has nothing in hand: give it a task, a backup copy, or let it idle."""
        q = self.local[d] if self.planner is not None else self.queue
        if q:
            self.start(d, q.popleft())
        elif self.planner is not None and self.remaining and self.planner.steal(d):
            return
        elif not (self.opts.backup_tasks and self.remaining and self._backup(d)):
            heapq.heappush(self.idle, (self.rank[d], d))

    def _backup(self, d: int) -> bool:
        now = self.eng.now_s
        while self.inflight:
            neg_end, t, r, g = self.inflight[0]
            if self.gen[r] != g or self.done[t] or t in self.copies:
                heapq.heappop(self.inflight)
                continue
            if now + self.dur(d, t) >= -neg_end:
                return False
            heapq.heappop(self.inflight)
            self.copies[t] = [r, d]
            self.backups += 1
            self.start(d, t)
            return True
        return False

    def run(self) -> RoundResult:
        order = sorted(range(len(self.devices)), key=lambda i: self.rank[i])
        if self.planner is not None:
            self.planner.plan_all(order)
        else:
            ids = range(self.tasks.num_tasks)
            if self.opts.scheduler == "fastest":  # LPT: largest task first (stable: model order at ties)
                ids = sorted(ids, key=lambda t: -self.tf[t])  # type: ignore[assignment]
            self.queue.extend(ids)
        for d in order:
            self.free(d)
        self.eng.run()
        if self.remaining:
            raise InfeasibleError(
                f"round {self.index}: every device dropped out with {self.remaining} of "
                f"{self.tasks.num_tasks} tasks left; give devices rejoin_s or a lower failure_probability")
        return self._result()

    def _result(self) -> RoundResult:
        span = self.end_s - self.start_s
        a_in, a_comp, a_out = self.acc
        devs = tuple(
            DeviceRound(name=dev.name, group=dev.group, ingress_s=a_in[i], compute_s=a_comp[i],
                        egress_s=a_out[i],
                        idle_s=max(span - a_in[i] - a_comp[i] - a_out[i], 0.0),
                        tasks_done=self.done_count[i], failures=self.fail_count[i],
                        cancelled=self.cancel_count[i], flop_done=self.flop_done[i])
            for i, dev in enumerate(self.devices))
        return RoundResult(index=self.index, start_s=self.start_s, time_s=span, bytes_moved=self.bytes_moved,
                           flop=float(sum(self.flop_done)), requeued=self.requeued, backups=self.backups,
                           swarm_flop_per_s=sum(d.flop_per_s for d in self.devices), devices=devs)


MAX_TASK_RUNS = 10**9  # tasks simulated in one call, all rounds together (each is a few events)


def simulate_swarm(devices: Sequence[Device], tasks: TaskSet, *, rounds: int = 1,
                   options: SwarmOptions | None = None, trace: Trace | None = None,
                   progress: ProgressFn | None = None) -> tuple[tuple[RoundResult, ...], int, float]:
    """Run ``rounds`` rounds back to back; returns the rounds, the number of events and the host seconds."""
    opts = options or SwarmOptions()
    BOUNDS["rounds"].check_int(rounds, "rounds")
    require(tasks.num_tasks * rounds <= MAX_TASK_RUNS, "rounds", rounds,
            f"gives {tasks.num_tasks * rounds:,} tasks (tasks per round x rounds), more than {MAX_TASK_RUNS:.0e}: "
            "about an hour of host time at a few microseconds per task")
    require(len(devices) >= 1, "devices", len(devices), "need at least one device")
    rng = random.Random(opts.seed)
    out: list[RoundResult] = []
    t0, start, events = time.perf_counter(), 0.0, 0
    for i in range(rounds):
        rnd = SwarmRound(devices, tasks, opts, rng, i, start, trace, progress)
        res = rnd.run()
        events += rnd.eng.num_events
        out.append(res)
        start = res.finish_s
    return tuple(out), events, time.perf_counter() - t0
