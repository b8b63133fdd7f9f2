"""The event engine and its resources: order, failures, FIFO streams and links, fair-share links, traces."""

from __future__ import annotations

import json

import pytest

from greentrain.report.trace import write_chrome
from greentrain.sim.engine import Engine, EventError, Link, SharedLink, Stream
from greentrain.sim.trace import Trace


def test_equal_times_break_on_priority_then_schedule_order() -> None:
    eng, seen = Engine(), []
    eng.at(1.0, seen.append, "b", priority=1)
    eng.at(1.0, seen.append, "c", priority=1)
    eng.at(1.0, seen.append, "a", priority=0)
    eng.at(0.5, seen.append, "first")
    assert eng.run() == 1.0
    assert seen == ["first", "a", "b", "c"]
    assert eng.num_events == 4


def test_a_failing_callback_is_named_and_keeps_its_cause() -> None:
    eng = Engine()

    def explode(arg: object) -> None:
        raise ZeroDivisionError("boom")

    eng.at(2.5, explode, 7)
    with pytest.raises(EventError, match=r"explode\(7\) at t=2.5 s .*ZeroDivisionError: boom") as info:
        eng.run()
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_scheduling_in_the_past_is_an_error() -> None:
    eng = Engine()
    eng.at(1.0, lambda _: eng.at(0.5, print))
    with pytest.raises(EventError, match="before now"):
        eng.run()


def test_run_until_stops_before_later_events() -> None:
    eng, seen = Engine(), []
    for t in (1.0, 2.0, 3.0):
        eng.at(t, seen.append, t)
    assert eng.run(until_s=2.0) == 2.0
    assert seen == [1.0, 2.0] and eng.pending == 1
    eng.run()
    assert seen == [1.0, 2.0, 3.0]


def test_stream_is_fifo() -> None:
    eng, ends = Engine(), []
    s = Stream(eng, "gpu0")
    s.submit(1.0, lambda _: ends.append(eng.now_s))
    s.submit(2.0, lambda _: ends.append(eng.now_s))
    eng.run()
    assert ends == [1.0, 3.0] and s.busy_s == 3.0


def test_link_is_alpha_beta_and_queues_on_the_wire() -> None:
    eng, arrivals = Engine(), []
    link = Link(eng, "l", bytes_per_s=100.0, latency_s=0.5)
    link.send(100.0, lambda _: arrivals.append(eng.now_s))
    link.send(50.0, lambda _: arrivals.append(eng.now_s))
    eng.run()
    # first: 1 s on the wire + 0.5 s; second waits for the wire (1 s), 0.5 s on it, + 0.5 s
    assert arrivals == pytest.approx([1.5, 2.0])
    assert link.bytes_moved == 150.0


def test_shared_link_gives_fair_shares_and_recomputes_finish_times() -> None:
    eng, done = Engine(), {}
    link = SharedLink(eng, "shared", bytes_per_s=100.0, latency_s=0.1)
    link.send(100.0, lambda k: done.__setitem__(k, eng.now_s), "big")
    eng.at(0.5, lambda _: link.send(25.0, lambda k: done.__setitem__(k, eng.now_s), "small"))
    eng.run()
    # 0-0.5 s: big alone (50 B). 0.5-1.0 s: 50 B/s each, small gets its 25 B -> ends 1.0 (+0.1).
    # big has 25 B left alone at 100 B/s -> ends 1.25 (+0.1).
    assert done["small"] == pytest.approx(1.1)
    assert done["big"] == pytest.approx(1.35)
    assert link.max_concurrent == 2 and link.busy_s == pytest.approx(1.25)


def test_equal_flows_on_a_shared_link_finish_together() -> None:
    eng, ends = Engine(), []
    link = SharedLink(eng, "s", bytes_per_s=10.0)
    for _ in range(4):
        link.send(10.0, lambda _: ends.append(eng.now_s))
    eng.run()
    assert ends == pytest.approx([4.0] * 4)


def test_trace_exports_one_track_per_device_and_link(tmp_path) -> None:
    trace = Trace()
    eng = Engine(trace)
    Stream(eng, "device/gpu0").submit(1e-3, lambda _: None, label="fwd")
    Link(eng, "link/gpu0.egress", bytes_per_s=1e3).send(1.0, lambda _: None, label="act")
    eng.run()
    path = tmp_path / "t.json"
    write_chrome(trace, path)
    doc = json.loads(path.read_text())
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    procs = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert threads == {"gpu0", "gpu0.egress"} and procs == {"device", "link"}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in spans] == [("fwd", 0.0, 1000.0), ("act", 0.0, 1000.0)]


def test_a_negative_or_nan_delay_is_refused() -> None:
    """Issue 16 item 13 (SimPy: "Negative delay"): after(-3) used to run an event at t = -2."""
    eng = Engine()
    eng.at(1.0, lambda _: None)
    eng.run()
    for delay in (-3.0, float("nan")):
        with pytest.raises(EventError, match="must be >= 0"):
            eng.after(delay, lambda _: None)
    with pytest.raises(EventError, match="before now"):
        eng.at(float("nan"), lambda _: None)
    assert eng.pending == 0


def test_run_until_never_moves_the_clock_back() -> None:
    eng = Engine()
    eng.at(5.0, lambda _: None)
    assert eng.run() == 5.0
    with pytest.raises(EventError, match="time never runs backward"):
        eng.run(until_s=1.0)
    assert eng.now_s == 5.0 and eng.run(until_s=5.0) == 5.0


def test_streams_and_links_schedule_through_the_engine() -> None:
    eng = Engine()
    seen: list[float] = []
    Stream(eng, "s").submit(2.0, lambda _: seen.append(eng.now_s))
    with pytest.raises(ValueError, match="latency_s"):
        Link(eng, "l", 1e9, latency_s=-1.0)
    with pytest.raises(ValueError, match="nbytes"):
        SharedLink(eng, "w", 1e9).send(-5.0, lambda _: None)
    with pytest.raises(ValueError, match="duration_s"):
        Stream(eng, "t").submit(float("nan"), lambda _: None)
    eng.run()
    assert seen == [2.0]
