"""Pipeline schedules: every stage runs each micro-batch forward then backward, 1F1B bounds in-flight work."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from greentrain.emulate.cases import Schedule
from greentrain.emulate.pipeline import schedule


@pytest.mark.parametrize("kind", list(Schedule))
@pytest.mark.parametrize(("stages", "micro_batches"), [(4, 8), (4, 1), (4, 3), (2, 5), (1, 4)])
def test_every_micro_batch_forward_then_backward(kind, stages, micro_batches):
    for stage in range(stages):
        actions = schedule(kind, stage, stages, micro_batches)
        assert sorted(actions) == sorted([("F", j) for j in range(micro_batches)] +
                                         [("B", j) for j in range(micro_batches)])
        for j in range(micro_batches):
            assert actions.index(("F", j)) < actions.index(("B", j))


def test_1f1b_keeps_at_most_stages_minus_rank_micro_batches_in_flight():
    # PipeDream-Flush (Narayanan et al. 2021, §2): stage i holds at most S - i activations; GPipe holds R
    stages, micro_batches = 4, 8
    for stage in range(stages):
        in_flight = peak = 0
        for kind, _ in schedule(Schedule.ONE_F_ONE_B, stage, stages, micro_batches):
            in_flight += 1 if kind == "F" else -1
            peak = max(peak, in_flight)
        assert peak == min(stages - stage, micro_batches)
    assert schedule(Schedule.GPIPE, 0, stages, micro_batches)[:micro_batches] == [("F", j) for j in range(8)]
