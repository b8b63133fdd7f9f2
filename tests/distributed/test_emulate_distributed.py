"""`greentrain.emulate` on real gloo ranks (CPU processes): numbers against a float32 reference, statistics
against estimate.comm's prediction, and a crashing or hanging rank failing the run without orphans."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.emulate.cases import FaultCase, FfnCase, MatMulCase, MlpCase, PipelineCase, Schedule
from greentrain.emulate.launcher import EmulationError, LaunchOptions, emulate
from greentrain.emulate.predict import predict
from greentrain.emulate.sharding import Mesh2D, TensorSharding

pytestmark = pytest.mark.distributed

MESH = Mesh2D(x_size=2, y_size=4)
SEED_MATMULS = [  # seed-systems.md §3.8, at small sizes
    ("1x1,1x1", "1x1,1x1", "unsharded"), ("1x1,1x4", "1x4,1x1", "matched_inner"),
    ("1x1,2x1", "2x1,1x1", "matched_inner"), ("1x1,2x4", "2x4,1x1", "matched_inner"),
    ("1x1,1x4", "2x1,1x1", "unmatched_inner"), ("2x1,1x4", "2x1,1x1", "outer"), ("2x1,1x4", "2x1,1x4", "full"),
    ("1x1,1x2", "1x2,1x1", "matched_inner"),  # a group that is half a mesh row: its own new_group
]


def ts(text: str) -> TensorSharding:
    return TensorSharding.parse(text, "t")


def eight_rank_cases() -> list:
    cases: list = [MatMulCase(mesh=MESH, m=64, k=128, n=96, a=ts(a), b=ts(b), c=ts("1x1,1x1"))
                   for a, b, _ in SEED_MATMULS]
    cases += [FfnCase(mesh=MESH, batch=4, seq=8, d_model=64, d_ff=128, gspmd=g) for g in (True, False)]
    cases.append(MlpCase(tp=8, tokens=16, d_model=32, d_ff=64))
    return cases


@pytest.mark.parametrize("collectives", ["native", "ring"])
def test_eight_ranks_match_reference_and_prediction(collectives):
    cases = eight_rank_cases()
    results = emulate(cases, LaunchOptions(collectives=collectives, timeout_s=120))
    policies = [p for _, _, p in SEED_MATMULS] + ["gspmd", "unsharded", "megatron"]
    for case, result, policy in zip(cases, results, policies, strict=True):
        assert result.policy == policy
        assert result.ok, (result.label, result.max_rel_error)  # 1e-5 relative to max |reference|
        counted = result.total
        assert dataclasses.replace(counted, wire_bytes=0) == predict(case), result.label
        if collectives == "ring":  # bytes really sent by the explicit rings == estimate.comm's ring formula
            assert counted.wire_bytes == counted.ring_bytes, result.label
            for rank in result.ranks:
                assert rank.stats.wire_bytes == rank.stats.ring_bytes
        else:
            assert counted.wire_bytes == 0
    by_label = {r.label: r for r in results}
    assert by_label["matmul matched_inner a=1x1,1x4 b=1x4,1x1 c=1x1,1x1"].total.d2d_messages == 24  # seed §3.8


@pytest.mark.parametrize(("units", "micro_batches"), [((16, 32, 64, 32, 16), 8), ((16, 32, 64, 32, 16), 1),
                                                      ((16, 32, 64, 32, 16), 3), ((24, 8, 24), 5)])
def test_pipeline_gpipe_and_1f1b_any_micro_batches(units, micro_batches):
    cases = [PipelineCase(units=units, micro_batches=micro_batches, batch=4 * micro_batches, schedule=s)
             for s in Schedule]
    results = emulate(cases, LaunchOptions(timeout_s=120))
    for case, result in zip(cases, results, strict=True):
        assert result.ok, (result.label, result.max_rel_error)  # gradients, updated weights, dx, loss
        assert dataclasses.replace(result.total, wire_bytes=0) == predict(case)
        assert result.total.d2d_messages == 2 * micro_batches * (len(units) - 2)


def _ranks_alive() -> list[int]:
    """Processes forked by this process (the ranks, on Linux with gloo) or by its forkserver (elsewhere) that
    still exist and are not zombies."""
    from multiprocessing import forkserver

    parents = {str(os.getpid()), str(getattr(forkserver._forkserver, "_forkserver_pid", None))}
    alive = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() in parents and not fields.get("State", "").startswith("Z"):
            alive.append(int(status.parent.name))
    return alive


def _assert_no_rank_survives() -> None:
    assert multiprocessing.active_children() == []
    deadline = time.monotonic() + 5
    while _ranks_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ranks_alive() == []


def test_a_rank_that_raises_fails_the_run():
    start = time.monotonic()
    with pytest.raises(EmulationError, match=r"rank 2 failed: RuntimeError: injected fault on rank 2"):
        emulate([FaultCase(world_size=4, rank=2, kind="raise")], LaunchOptions(timeout_s=60))
    assert time.monotonic() - start < 30
    _assert_no_rank_survives()


def test_a_rank_that_hangs_times_out():
    start = time.monotonic()
    with pytest.raises(EmulationError, match=r"rank\(s\) .* did not finish within 5 s"):
        emulate([FaultCase(world_size=4, rank=1, kind="hang")], LaunchOptions(timeout_s=5))
    assert 5 <= time.monotonic() - start < 20
    _assert_no_rank_survives()


def test_cli_json(capsys):
    argv = ["emulate", "matmul", "--mesh", "2x2", "--m", "32", "--k", "64", "--n", "32", "--a", "1x1,2x2",
            "--b", "2x2,1x1", "--policy", "matched_inner", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("flops", "h2d_messages", "h2d_bytes", "d2d_messages", "d2d_bytes", "ring_bytes", "policy",
                "max_abs_error", "time_s"):
        assert key in out
    assert out["policy"] == "matched_inner" and out["ok"]
    assert out["d2d_messages"] == 4 * 3  # one all-reduce over a group of 4: g (g - 1)
    assert out["flops"] == 4 * 2 * 32 * 16 * 32


class _Phases:
    """A Progress that records what the launcher says, and when it asks for quiet (before forking)."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def phase(self, text: str) -> None:
        self.events.append(text)

    def quiet(self) -> None:
        self.events.append("<quiet>")


def test_progress_per_phase_and_quiet_before_the_ranks_start():
    """Issue 16 item 14: the launcher names each phase (the CLI shows them in a spinner) and stops the
    display's thread before it forks the ranks."""
    cases = [MatMulCase(mesh=Mesh2D(x_size=1, y_size=2), m=8, k=8, n=8, a=ts(a), b=ts(b), c=ts("1x1,1x1"))
             for a, b in (("1x1,1x1", "1x1,1x1"), ("1x1,1x2", "1x2,1x1"))]
    phases = _Phases()
    emulate(cases, LaunchOptions(timeout_s=60), progress=phases)
    assert phases.events[:2] == ["starting 2 ranks", "<quiet>"]
    assert [e for e in phases.events if e.startswith("case")] == [f"case {i}/2: {c.label}"
                                                                  for i, c in enumerate(cases, 1)]
    assert phases.events[-1] == "stopping 2 ranks"


def test_cases_sharing_inputs_in_one_launch_give_what_each_gives_alone():
    """The seed's MatMul policies share A, B and the reference within a launch, the FFN cases their inputs
    (and the unsharded layer's reference): each result equals the one of the case launched alone."""
    cases: list = [MatMulCase(mesh=Mesh2D(x_size=2, y_size=2), m=32, k=64, n=48, a=ts(a), b=ts(b),
                              c=ts("1x1,1x1"), seed=seed)
                   for a, b, seed in (("1x1,1x2", "1x2,1x1", 0), ("1x1,2x1", "2x1,1x1", 0), ("1x1,1x1", "1x1,1x1", 5))]
    cases += [FfnCase(mesh=Mesh2D(x_size=2, y_size=2), batch=4, seq=8, d_model=32, d_ff=64, gspmd=g)
              for g in (False, True, False)]  # the unsharded layer's reference: rank 0's, shared
    together = emulate(cases, LaunchOptions(timeout_s=60))
    for case, got in zip(cases, together, strict=True):
        (alone,) = emulate([case], LaunchOptions(timeout_s=60))
        assert (got.max_abs_error, got.max_rel_error, got.total) == (alone.max_abs_error, alone.max_rel_error,
                                                                     alone.total)
        assert got.max_rel_error < got.tolerance


def test_cli_cases_file(tmp_path, capsys):
    """`emulate cases FILE`: every line's result, in the file's order, from one launch per world size."""
    path = tmp_path / "cases.txt"
    path.write_text("matmul --mesh 1x2 --m 16 --k 16 --n 16 --a 1x1,1x2 --b 1x2,1x1\n"
                    "mlp --tp 4 --tokens 8 --d-model 16 --d-ff 32   # 4 ranks: a second launch\n"
                    "matmul --mesh 1x2 --m 16 --k 16 --n 16\n")
    assert main(["emulate", "cases", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["policy"], r["world_size"]) for r in out] == [("matched_inner", 2), ("megatron", 4),
                                                             ("unsharded", 2)]
    assert all(r["ok"] for r in out)


def test_the_cli_process_flushes_its_output_before_its_quick_exit():
    """`greentrain emulate` leaves without the interpreter's finalization: its JSON still arrives whole
    through a pipe (block-buffered), with the exit status of the result."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "greentrain.cli.main", "emulate", "matmul", "--mesh", "1x2",
                        "--m", "8", "--k", "8", "--n", "8", "--a", "1x1,1x2", "--b", "1x2,1x1", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["policy"] == "matched_inner"


def test_ranks_from_a_forkserver_as_with_nccl_or_off_linux(monkeypatch):
    """The start method used with NCCL and on other systems: ranks from a forkserver (nothing inherited from
    this process, the store's port through the queue) give what forked ranks give."""
    import torch.multiprocessing as mp

    from greentrain.emulate import launcher

    def forkserver(_backend: str):
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(["greentrain.emulate.launcher"])
        return context

    case = MatMulCase(mesh=Mesh2D(x_size=1, y_size=2), m=16, k=32, n=16, a=ts("1x1,1x2"), b=ts("1x2,1x1"),
                      c=ts("1x1,1x1"))
    (forked,) = emulate([case], LaunchOptions(timeout_s=60))
    monkeypatch.setattr(launcher, "_context", forkserver)
    (served,) = emulate([case], LaunchOptions(timeout_s=60))
    assert (served.max_abs_error, served.total) == (forked.max_abs_error, forked.total) and served.ok
