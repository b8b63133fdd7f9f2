"""Issue 24: the event loop ends on every input: a shared link finishes flows smaller than the clock's resolution,
and a loop that cannot advance the clock is stopped with one EventError, not run forever."""

from __future__ import annotations

import pytest

from greentrain.sim import engine as engine_module
from greentrain.sim.engine import Engine, EventError, SharedLink


def test_flows_below_the_clock_resolution_end_instead_of_looping() -> None:
    e = Engine()
    link = SharedLink(e, "x", 1e12)
    done: list[str] = []
    t0 = 6.048313895595e8  # simulate step --straggler 0=1e8 reached this time, where one ulp is 1.2e-7 s
    e.at(t0, lambda _: (link.send(1e3, done.append, "a"), link.send(1.7e3, done.append, "b")))
    e.at(t0 + 1e-9, lambda _: link.send(0.3, done.append, "c"))  # looped forever before the fix
    e.run(until_s=7e8)
    assert sorted(done) == ["a", "b", "c"]
    assert e.num_events < 20


def test_a_loop_at_one_instant_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "MAX_EVENTS_AT_ONE_TIME", 1000)
    e = Engine()

    def again(_: object) -> None:
        e.after(0.0, again)

    e.at(1.0, again)
    with pytest.raises(EventError, match=r"more than 1,000 events at t=1\.0 s without the clock moving"):
        e.run()
