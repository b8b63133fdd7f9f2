"""A pool stopped by a signal leaves nothing behind in the process: the next run's workers start (the stopping
flag of an interrupted run_pool once outlived it, and every later variant in that process, a notebook's or a
test's, came back "killed" at once without a worker being started)."""

from __future__ import annotations

import sys
import threading

import pytest

from greentrain.experiment.executors import Slot, run_pool, run_worker, stopping


def test_an_interrupted_pool_does_not_stop_the_next_run() -> None:
    started = threading.Barrier(2)

    def run(item: int, slot: Slot, wait: bool) -> object:
        if item == 0:
            started.wait(timeout=60)
            raise KeyboardInterrupt  # Ctrl-C reaching the pool while the other variant runs
        started.wait(timeout=60)
        return run_worker([sys.executable, "-c", "import time; time.sleep(60)"], {})  # stopped by the pool

    with pytest.raises(KeyboardInterrupt):
        run_pool([0, 1], [Slot(index=0), Slot(index=1)], run)
    assert not stopping()
    code, _ = run_worker([sys.executable, "-c", "raise SystemExit(3)"], {})
    assert code == 3  # a worker really ran (a stopped pool's flag made it -15 without starting)
