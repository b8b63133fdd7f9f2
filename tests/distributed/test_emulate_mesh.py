"""A tp x pp x dp training step on 16 real gloo ranks: its numbers against one process's float32 autograd, and
every rank's counts (FLOPs, host and device messages and bytes, every collective's group and sizes) equal
to the counting mode's (emulate/counting.py: the same program on PyTorch's fake process group)."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.emulate.cases import MeshStepCase
from greentrain.emulate.counting import count
from greentrain.emulate.launcher import LaunchOptions, emulate

pytestmark = pytest.mark.distributed


def _untimed(rank):  # type: ignore[no-untyped-def]
    return (rank.rank, rank.stats, tuple(dataclasses.replace(c, time_s=0.0) for c in rank.collectives))


@pytest.mark.slow
def test_sixteen_real_ranks_count_what_the_fake_group_counts() -> None:
    case = MeshStepCase(tp=2, pp=2, dp=4, micro_batches=3, tokens=8, d_model=16, d_ff=32)
    [real] = emulate([case], LaunchOptions(timeout_s=120))
    assert real.ok and real.max_rel_error < 1e-5, real.max_rel_error
    counted = count(case)
    assert [_untimed(r) for r in real.ranks] == [_untimed(r) for r in counted.ranks]
    assert real.total == counted.total
