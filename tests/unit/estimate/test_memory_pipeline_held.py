"""The memory rule's in-flight micro-batches against the schedules' own op orders (parallel/schedules.py).

A stage holds a chunk's activations from its forward to its backward, so the most a device holds is the peak
of forwards run minus backwards run in the order the schedule executes (and the event simulator replays)."""

from __future__ import annotations

import pytest

from greentrain.estimate.memory import held_micro_batches
from greentrain.parallel.schedules import PIPELINE_SCHEDULES, schedule_code


def _peak_in_flight(ops: list[tuple[bool, int, int]]) -> int:
    now = peak = 0
    for backward, _, _ in ops:
        now += -1 if backward else 1
        peak = max(peak, now)
    return peak


CASES = [(2, 1, 4), (4, 1, 8), (8, 1, 3), (4, 2, 4), (4, 2, 8), (8, 4, 24), (4, 3, 12), (16, 8, 16), (16, 8, 32),
         (2, 2, 2)]


# every (schedule, layout) the schedule runs: an interleaved one takes vpp > 1 only, and its micro-batch rule
RUN = [(name, pp, vpp, m) for name in ("1f1b", "interleaved", "gpipe") for pp, vpp, m in CASES
       if PIPELINE_SCHEDULES[name].interleaved == (vpp > 1) and PIPELINE_SCHEDULES[name].micro_batches_fit(m, pp)]


@pytest.mark.parametrize(("name", "pp", "vpp", "m"), RUN)
def test_held_is_the_peak_of_the_order(name: str, pp: int, vpp: int, m: int) -> None:
    record = PIPELINE_SCHEDULES[name]
    order = record.order(pp, vpp, m)
    for stage, rank in ((0, 0), (1, 1), (2, pp - 1)):
        held = held_micro_batches(stage, pp=pp, vpp=vpp, num_micro=m, schedule=schedule_code(name))
        assert held == pytest.approx(_peak_in_flight(order[rank]) / vpp), (stage, rank)


def test_interleaved_second_stage_holds_two_chunks_fewer_than_the_first() -> None:
    """Llama 3 405B's layout (pp 16, vpp 8, 32 micro-batches): 143 one-layer chunks in flight on the first rank
    (Korthikanti et al. 2022 §4.2.3's 16 x (1 + 15 / 128) stages), 141 on the second, 113 on the last; with 16
    micro-batches (= pp) the warm-up covers every forward of the first ranks: 128 chunks, 16 stages."""
    code = schedule_code("interleaved")

    def held(stage: int, m: int) -> float:
        return float(held_micro_batches(stage, pp=16, vpp=8, num_micro=m, schedule=code))

    assert [held(s, 32) * 8 for s in (0, 1, 2)] == [143, 141, 113]
    assert held(0, 32) == pytest.approx(16 * (1 + 15 / 128))
    assert [held(s, 16) for s in (0, 1)] == [16, 16]
