"""Earliest-finish-time planning for the swarm's ``bandwidth`` scheduler (HEFT's EFT rule, Topcuoglu et al.
2002, IEEE TPDS 13(3) §4.1), with work stealing when a device's queue runs dry: see sim/swarm.py."""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from greentrain.sim.devices import Device
from greentrain.sim.engine import Engine
from greentrain.sim.tasks import TaskSet


class RoundState(Protocol):
    """What the planner reads of a swarm round (sim/swarm.py's SwarmRound) and the two calls it makes.

    Read-only members: the planner mutates the queues and the idle heap in place, never rebinds them."""

    @property
    def devices(self) -> Sequence[Device]: ...
    @property
    def tasks(self) -> TaskSet: ...
    @property
    def start_s(self) -> float: ...
    @property
    def spf(self) -> Sequence[float]: ...  # seconds per FLOP of each device
    @property
    def lat(self) -> Sequence[float]: ...  # latency of each device, s
    @property
    def eng(self) -> Engine: ...  # its now_s is the simulated time
    @property
    def local(self) -> Sequence[deque[int]]: ...  # each device's planned tasks
    @property
    def queue(self) -> deque[int]: ...  # tasks waiting for any device (every device out)
    @property
    def cur(self) -> Sequence[int]: ...  # each device's running task, -1: none
    @property
    def out(self) -> Sequence[bool]: ...  # dropped out
    @property
    def idle(self) -> list[tuple[int, int]]: ...  # heap of (rank, device)
    @property
    def rank(self) -> Sequence[int]: ...

    def dur(self, d: int, t: int) -> float:
        """Uncontended time of task ``t`` on device ``d``, s."""

    def start(self, d: int, t: int) -> None:
        """Device ``d`` starts task ``t`` now."""


class EftPlanner:
    """Earliest-finish-time planning (HEFT's EFT rule) over device classes with identical parameters.

    Per class, a heap of (planned_end_s, device, version) gives the device of that class that frees first;
    a task goes to the class whose first-free device would finish it earliest. O(classes + log n) a task.
    """

    def __init__(self, rnd: RoundState) -> None:
        self.r = rnd
        keys: dict[tuple[float, ...], int] = {}
        self.cls: list[int] = []
        self.rep: list[int] = []
        for i, dev in enumerate(rnd.devices):
            key = (dev.flop_per_s, dev.slowdown, dev.ingress_bytes_per_s, dev.egress_bytes_per_s,
                   dev.latency_s)
            if key not in keys:
                keys[key] = len(keys)
                self.rep.append(i)
            self.cls.append(keys[key])
        self.heaps: list[list[tuple[float, int, int]]] = [[] for _ in keys]
        self.end = [rnd.start_s] * len(rnd.devices)
        self.ver = [0] * len(rnd.devices)
        self.latest: list[tuple[float, int, int]] | None = None  # max-heap of planned ends, built on 1st steal
        t = rnd.tasks  # per class, every task's uncontended time (array('d'): fast scalar reads)
        self.durs = [array("d", (t.in_bytes / rnd.devices[i].ingress_bytes_per_s + t.flop * rnd.spf[i]
                                 + t.out_bytes / rnd.devices[i].egress_bytes_per_s + 2 * rnd.lat[i]).tolist())
                     for i in self.rep]

    def _push(self, d: int) -> None:
        self.ver[d] += 1
        heapq.heappush(self.heaps[self.cls[d]], (self.end[d], d, self.ver[d]))
        if self.latest is not None:
            heapq.heappush(self.latest, (-self.end[d], d, self.ver[d]))

    def steal(self, d: int) -> bool:
        """Idle ``d`` takes the last queued task of the device planned to finish last, if it finishes it
        sooner (work stealing, Blumofe & Leiserson 1999): keeps the plan good after dropouts."""
        r = self.r
        if self.latest is None:
            self.latest = [(-self.end[v], v, self.ver[v]) for v in range(len(r.devices)) if r.local[v]]
            heapq.heapify(self.latest)
        latest = self.latest
        while latest and (latest[0][2] != self.ver[latest[0][1]] or not r.local[latest[0][1]]):
            heapq.heappop(latest)
        if not latest:
            return False
        neg_end, v, _ = latest[0]
        t = r.local[v][-1]
        mine = r.eng.now_s + r.dur(d, t)
        if v == d or mine >= -neg_end:
            return False
        r.local[v].pop()
        self.end[v] = -neg_end - r.dur(v, t)
        self._push(v)
        self.end[d] = mine
        self._push(d)
        r.start(d, t)
        return True

    def plan(self, t: int) -> int:
        """Append task ``t`` to the queue of the device that would finish it first; return that device."""
        now, best, best_end, best_c, ver = self.r.eng.now_s, -1, math.inf, -1, self.ver
        for c, heap in enumerate(self.heaps):
            while heap and heap[0][2] != ver[heap[0][1]]:
                heapq.heappop(heap)
            if heap:
                top = heap[0][0]
                end = (top if top > now else now) + self.durs[c][t]
                if end < best_end:
                    best, best_end, best_c = heap[0][1], end, c
        if best < 0:
            self.r.queue.append(t)  # every device is out: waits for a rejoin
            return -1
        self.end[best] = best_end
        if self.latest is None:  # the common case: move the device down its class heap in one operation
            ver[best] += 1
            heapq.heapreplace(self.heaps[best_c], (best_end, best, ver[best]))
        else:
            self._push(best)
        self.r.local[best].append(t)
        return best

    def plan_all(self, order: list[int]) -> None:
        for d in order:
            self._push(d)
        for t in range(self.r.tasks.num_tasks):
            self.plan(t)

    def drop(self, d: int, t: int) -> None:
        """Device ``d`` dropped out holding ``t``: re-plan ``t`` and d's queue on the live devices."""
        self.ver[d] += 1  # leaves the heaps
        todo = [t, *self.r.local[d]]
        self.r.local[d].clear()
        for task in todo:
            dev = self.plan(task)
            if dev >= 0 and self.r.cur[dev] < 0 and not self.r.out[dev]:
                self._kick(dev)

    def _kick(self, dev: int) -> None:
        idle = self.r.idle
        if (self.r.rank[dev], dev) in idle:
            idle.remove((self.r.rank[dev], dev))
            heapq.heapify(idle)
        self.r.start(dev, self.r.local[dev].popleft())

    def rejoin(self, d: int) -> None:
        self.end[d] = self.r.eng.now_s
        self._push(d)
        while self.r.queue:
            self.plan(self.r.queue.popleft())
