"""Counting mode (emulate/counting.py): a 64-rank tp x pp x dp mesh counted in this process on PyTorch's fake
process group; every rank's FLOPs, messages and bytes against the closed form of the program
(emulate/mesh3d.py), PyTorch's own CommDebugMode against the recorder, and the CLI's one-line refusals."""

from __future__ import annotations

import dataclasses
import json

import pytest

from greentrain.cli.main import main
from greentrain.emulate.cases import MeshStepCase
from greentrain.emulate.predict import predict
from greentrain.estimate.comm import Collective, ring_bytes_per_rank

pytest.importorskip("torch")

CASE = MeshStepCase(tp=4, pp=4, dp=4, micro_batches=3, tokens=8, d_model=16, d_ff=32)
FP32 = 4


@pytest.mark.slow
def test_every_rank_counted_as_the_program_says() -> None:
    from greentrain.emulate.counting import count
    from greentrain.emulate.mesh3d import coords

    res = count(CASE)
    assert res.world_size == 64 and [r.rank for r in res.ranks] == list(range(64))
    r, act = CASE.micro_batches, CASE.tokens * CASE.d_model * FP32  # one activation / its gradient
    shard = (CASE.d_model * CASE.d_ff // CASE.tp * 2 + CASE.d_ff // CASE.tp + CASE.d_model) * FP32  # w1 w2 b1 b2
    for rank in res.ranks:
        _, p, _ = coords(CASE, rank.rank)
        ops = [c.op for c in rank.collectives]
        sends = r * ((p < CASE.pp - 1) + (p > 0))  # forward activations out, gradients back
        assert ops.count(Collective.ALL_REDUCE.value) == 2 * r + 4  # tp fwd + bwd per micro-batch; 4 dp grads
        assert ops.count(Collective.SEND_RECV.value) == 2 * sends  # each send and each receive
        # six matmuls per micro-batch of (tokens x d_model x d_ff/tp): 2 forward, 4 backward
        assert rank.stats.flops == r * 6 * 2 * CASE.tokens * CASE.d_model * CASE.d_ff // CASE.tp
        tp_ring = 2 * r * ring_bytes_per_rank(Collective.ALL_REDUCE, CASE.tp, act)
        dp_ring = ring_bytes_per_rank(Collective.ALL_REDUCE, CASE.dp, shard)  # one per tensor: sums to the shard
        assert rank.stats.ring_bytes == pytest.approx(tp_ring + dp_ring + sends * act, rel=1e-12)
        assert rank.stats.wire_bytes == sends * act
        inputs = r * ((p == 0) + (p == CASE.pp - 1))
        assert rank.stats.h2d_messages == 4 + inputs
        assert rank.stats.h2d_bytes == shard + inputs * act
    assert res.total == dataclasses.replace(predict(CASE), wire_bytes=res.total.wire_bytes)  # wire: counted only


@pytest.mark.slow
def test_commdebugmode_sees_the_recorded_collectives() -> None:
    """PyTorch's CommDebugMode, wrapped around one rank of the counting mode, counts the same all-reduces."""
    pytest.importorskip("torch.distributed.tensor.debug")
    from torch.distributed.tensor.debug import CommDebugMode

    from greentrain.emulate.counting import count_rank

    mode = CommDebugMode()
    with mode:
        rank = count_rank(CASE, 21)  # a middle stage: sends and receives both ways
    seen = {str(k).split(".")[-1]: v for k, v in mode.get_comm_counts().items()}
    ops = [c.op for c in rank.collectives]
    assert seen.get("allreduce_") == ops.count(Collective.ALL_REDUCE.value)
    assert set(seen) == {"allreduce_"}  # CommDebugMode does not track point-to-point sends; the recorder does


def test_cli_count_only(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["emulate", "mesh", "--tp", "2", "--pp", "2", "--dp", "2", "--micro-batches", "2", "--tokens", "4",
            "--d-model", "8", "--d-ff", "8", "--count-only"]
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["world_size"] == 8 and doc["backend"] == "fake (counted)" and len(doc["per_rank"]) == 8
    assert main([*args, "--backend", "nccl"]) == 2
    assert "--backend='nccl'" in capsys.readouterr().err
    assert main([*args[:-1], "--dp", "100000", "--count-only"]) == 2
    assert "at most 65,536" in capsys.readouterr().err


def test_count_only_is_a_command_line_option(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    cases = tmp_path / "cases.txt"
    cases.write_text("mesh --tp 2 --count-only\n")
    assert main(["emulate", "cases", str(cases)]) == 2
    assert "--count-only" in capsys.readouterr().err
