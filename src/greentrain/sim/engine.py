"""The discrete-event core: a heap of (time_s, priority, sequence id, callback, arg), and its resources.

Design after SimPy 4 (``simpy/core.py``: ``Environment.schedule`` pushes ``(time, priority, eid, event)``;
equal-time events keep a fixed order through the priority and a monotonically increasing id). Unlike SimPy
there are no generator processes and no Event objects: an event is a plain tuple holding a callback and
one argument, so the hot loop is a ``heappop`` and a call. The run is deterministic: ties break on
priority, then on the order in which the events were scheduled; any randomness lives in the callers'
seeded generators.

Failures are never dropped: an exception raised by a callback stops the run and propagates as an
``EventError`` naming the callback, its argument and the simulated time (the original is its ``__cause__``).

Resources:
- ``Stream``: a FIFO that does one thing at a time (a compute stream, a DMA engine). ``submit`` returns when
  the work finishes: start = max(now, free_at), end = start + duration.
- ``Link``: a point-to-point wire, FIFO, ``bytes / bandwidth`` on the wire plus ``latency`` in flight
  (the alpha-beta model: Hockney 1994, T = alpha + n / beta).
- ``SharedLink``: a wire shared by concurrent transfers with a fair share of its bandwidth each (processor
  sharing; Kleinrock 1967). Finish times are recomputed whenever a transfer starts or ends, with a virtual
  clock (bytes served to every active flow so far) so that each start or end costs O(log n).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

from greentrain.sim.trace import Trace

Callback = Callable[[Any], object]

# The guard of Engine.run: a swarm's 10,000 devices start together with a few events each; 1,000x that at one
# instant is a loop that cannot advance the clock (a float time too coarse for the durations), not a simulation.
MAX_EVENTS_AT_ONE_TIME = 10**7


class EventError(RuntimeError):
    """A callback failed: the message names the event (callback, argument, simulated time)."""


def _describe(callback: Callback) -> str:
    return getattr(callback, "__qualname__", None) or repr(callback)


class Engine:
    """Event loop. ``at``/``after`` schedule ``callback(arg)``; ``run`` processes events in time order."""

    __slots__ = ("_heap", "_seq", "now_s", "num_events", "trace")

    def __init__(self, trace: Trace | None = None) -> None:
        self._heap: list[tuple[float, int, int, Callback, Any]] = []
        self._seq = itertools.count()
        self.now_s = 0.0
        self.num_events = 0
        self.trace = trace

    def at(self, time_s: float, callback: Callback, arg: Any = None, priority: int = 0) -> None:
        """Schedule ``callback(arg)`` at absolute ``time_s`` (never in the past). The one door onto the heap
        (SimPy's ``Environment.schedule``): ``after`` and the resources come through here."""
        if not time_s >= self.now_s:  # also refuses NaN, which would corrupt the heap order
            raise EventError(f"{_describe(callback)}({arg!r}) scheduled at t={time_s!r} s, "
                             f"before now={self.now_s!r} s")
        heapq.heappush(self._heap, (time_s, priority, next(self._seq), callback, arg))

    def after(self, delay_s: float, callback: Callback, arg: Any = None, priority: int = 0) -> None:
        """Schedule ``callback(arg)`` ``delay_s`` >= 0 from now (SimPy: "Negative delay")."""
        if not delay_s >= 0:
            raise EventError(f"{_describe(callback)}({arg!r}) scheduled after delay_s={delay_s!r}: "
                             "must be >= 0 (an event never runs in the past)")
        self.at(self.now_s + delay_s, callback, arg, priority)

    @property
    def pending(self) -> int:
        return len(self._heap)

    def peek_s(self) -> float:
        """Time of the next event (inf when none is scheduled)."""
        return self._heap[0][0] if self._heap else math.inf

    def run(self, until_s: float = math.inf) -> float:
        """Process events until the heap is empty or the next one lies after ``until_s``; return now.
        Time never runs backward: ``until_s`` before now is refused (SimPy: "until must be > now")."""
        if not until_s >= self.now_s:
            raise EventError(f"run(until_s={until_s!r}) is before now={self.now_s!r} s: time never runs backward")
        heap, pop = self._heap, heapq.heappop
        n = stalled = 0  # stalled: events in a row at one instant (a loop that cannot advance the clock)
        event: tuple[float, int, int, Callback, Any] | None = None
        try:
            while heap and heap[0][0] <= until_s:
                event = pop(heap)
                if event[0] == self.now_s:
                    stalled += 1
                    if stalled > MAX_EVENTS_AT_ONE_TIME:
                        raise EventError(f"more than {MAX_EVENTS_AT_ONE_TIME:,} events at t={self.now_s!r} s without "
                                         f"the clock moving (last: {_describe(event[3])}): the simulation cannot "
                                         "advance at this time resolution")
                else:
                    stalled = 0
                    self.now_s = event[0]
                event[3](event[4])
                n += 1
            if until_s != math.inf:
                self.now_s = until_s
        except EventError:
            raise
        except Exception as e:
            assert event is not None
            raise EventError(f"event {_describe(event[3])}({event[4]!r}) at t={event[0]!r} s "
                             f"(seq {event[2]}) failed: {type(e).__name__}: {e}") from e
        finally:
            self.num_events += n
        return self.now_s


class Stream:
    """One thing at a time, first come first served (a compute stream, a copy engine)."""

    __slots__ = ("busy_s", "engine", "free_at_s", "name")

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine, self.name = engine, name
        self.free_at_s = 0.0
        self.busy_s = 0.0

    def submit(self, duration_s: float, callback: Callback, arg: Any = None, label: str = "",
               priority: int = 0) -> float:
        """Queue ``duration_s`` of work; ``callback(arg)`` runs when it ends. Returns the end time."""
        if not duration_s >= 0:
            raise ValueError(f"{self.name}: duration_s={duration_s!r} must be >= 0")
        eng = self.engine
        now = eng.now_s
        start = now if now > self.free_at_s else self.free_at_s
        end = start + duration_s
        self.free_at_s = end
        self.busy_s += duration_s
        if eng.trace is not None:
            eng.trace.span(self.name, label, start, end)
        eng.at(end, callback, arg, priority)
        return end


def _check_link(name: str, bytes_per_s: float, latency_s: float) -> None:
    if not (bytes_per_s > 0 and math.isfinite(bytes_per_s)):
        raise ValueError(f"link {name}: bytes_per_s={bytes_per_s!r} must be a finite number > 0")
    if not (latency_s >= 0 and math.isfinite(latency_s)):
        raise ValueError(f"link {name}: latency_s={latency_s!r} must be a finite number >= 0")


class Link(Stream):
    """A point-to-point wire: FIFO, ``nbytes / bandwidth`` on the wire, then ``latency_s`` in flight."""

    __slots__ = ("bytes_moved", "bytes_per_s", "latency_s")

    def __init__(self, engine: Engine, name: str, bytes_per_s: float, latency_s: float = 0.0) -> None:
        super().__init__(engine, name)
        _check_link(name, bytes_per_s, latency_s)
        self.bytes_per_s, self.latency_s = bytes_per_s, latency_s
        self.bytes_moved = 0.0

    def send(self, nbytes: float, callback: Callback, arg: Any = None, label: str = "",
             priority: int = 0) -> float:
        """Send ``nbytes``; ``callback(arg)`` runs on arrival. Returns the arrival time (Hockney 1994)."""
        if not nbytes >= 0:
            raise ValueError(f"{self.name}: nbytes={nbytes!r} must be >= 0")
        eng = self.engine
        start = eng.now_s if eng.now_s > self.free_at_s else self.free_at_s
        wire = nbytes / self.bytes_per_s
        end = start + wire
        self.free_at_s = end
        self.busy_s += wire
        self.bytes_moved += nbytes
        if eng.trace is not None:
            eng.trace.span(self.name, label, start, end, "link")
        eng.at(end + self.latency_s, callback, arg, priority)
        return end + self.latency_s


class SharedLink:
    """A wire shared fairly by concurrent transfers (processor sharing, Kleinrock 1967).

    With n active flows each gets ``bytes_per_s / n``. A virtual clock ``v`` counts the bytes every active
    flow has received; a flow of ``nbytes`` started at virtual time v0 ends when v reaches v0 + nbytes, so
    one heap of end-virtual-times orders all flows and a start or an end only moves the next completion.
    """

    __slots__ = ("_flows", "_last_s", "_seq", "_v", "_version", "busy_s", "bytes_moved", "bytes_per_s",
                 "engine", "latency_s", "max_concurrent", "name")

    def __init__(self, engine: Engine, name: str, bytes_per_s: float, latency_s: float = 0.0) -> None:
        _check_link(name, bytes_per_s, latency_s)
        self.engine, self.name = engine, name
        self.bytes_per_s, self.latency_s = bytes_per_s, latency_s
        self._flows: list[tuple[float, int, float, Callback, Any, str]] = []
        self._seq = itertools.count()
        self._v = 0.0
        self._last_s = 0.0
        self._version = 0
        self.busy_s = 0.0
        self.bytes_moved = 0.0
        self.max_concurrent = 0

    @property
    def active(self) -> int:
        return len(self._flows)

    def _advance(self) -> None:
        now = self.engine.now_s
        n = len(self._flows)
        if n:
            dt = now - self._last_s
            self._v += dt * self.bytes_per_s / n
            self.busy_s += dt
        self._last_s = now

    def _reschedule(self) -> None:
        self._version += 1
        if self._flows:
            end_v = self._flows[0][0]
            dt = max(end_v - self._v, 0.0) * len(self._flows) / self.bytes_per_s
            self.engine.at(self.engine.now_s + dt, self._on_flow_end, self._version)

    def send(self, nbytes: float, callback: Callback, arg: Any = None, label: str = "") -> None:
        """Start a transfer now; ``callback(arg)`` runs when its last byte arrives (+ latency)."""
        if not nbytes >= 0:
            raise ValueError(f"{self.name}: nbytes={nbytes!r} must be >= 0")
        self._advance()
        flow = (self._v + nbytes, next(self._seq), self.engine.now_s, callback, arg, label)
        heapq.heappush(self._flows, flow)
        self.bytes_moved += nbytes
        self.max_concurrent = max(self.max_concurrent, len(self._flows))
        self._reschedule()

    def _on_flow_end(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later start or end
        self._advance()
        eng, flows = self.engine, self._flows
        # bytes a flow gets in a few ulps of the clock also end now: at t = 6e8 s one ulp is 1.2e-7 s, and a
        # flow with less left than that would be rescheduled at this same time forever (the clock cannot move)
        tol = max(1e-9 * max(abs(self._v), 1.0), 4 * math.ulp(eng.now_s) * self.bytes_per_s)
        while flows and flows[0][0] <= self._v + tol:
            _, _, start, callback, arg, label = heapq.heappop(flows)
            if eng.trace is not None:
                eng.trace.span(self.name, label, start, eng.now_s, "link")
            eng.at(eng.now_s + self.latency_s, callback, arg)
        self._reschedule()
