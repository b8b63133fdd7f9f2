"""A rank that raises under torchrun while the others are still training (2 gloo ranks on CPU).

The failing rank must not join a gather (its peers are inside DDP's all-reduce: the collectives would
mismatch or hang until the process-group timeout); it closes its own record and re-raises, torchrun stops
the job, and ``greentrain track --summarize DIR`` merges what both ranks recorded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from torchrun_launch import torchrun_two_ranks

from greentrain.cli.main import main
from greentrain.measure.records import read_jsonl

pytestmark = pytest.mark.distributed

MEASURE_TESTS = Path(__file__).resolve().parents[1] / "unit" / "measure"  # tiny_gpt.py
LAUNCH_TIMEOUT_S = 150
GROUP_TIMEOUT_S = 90  # a hang in a collective would only end here: the test asserts the job ends well before
FAIL_AT_STEP = 3

SCRIPT = r'''
import datetime, sys, time
from pathlib import Path
import torch, torch.distributed as dist
from torch import nn
sys.path.insert(0, sys.argv[2])
from tiny_gpt import GPT, train_step
from greentrain.measure.tracker import Tracker

out, fail_at, group_timeout_s = Path(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=group_timeout_s))
rank = dist.get_rank()
torch.manual_seed(0)
model = GPT(vocab=128, d=32, layers=1, heads=2, seq=16)
ddp = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
with Tracker(model, grid_g_per_kwh=100.0, out_dir=out, print_summary=False, interval_s=0.1) as t:
    for step in range(1000):
        if rank == 1 and step == fail_at:
            time.sleep(0.5)  # rank 0's sampler flushes its first steps meanwhile
            raise RuntimeError("rank 1 ran out of data")
        train_step(ddp, opt, torch.randint(0, 128, (2, 16)))
        t.step()
'''


@pytest.fixture(scope="module")
def failed_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, float]:
    out = tmp_path_factory.mktemp("rank_error")
    script = out.parent / f"{out.name}_train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    t0 = time.monotonic()
    code, log = torchrun_two_ranks(script, [str(out), str(MEASURE_TESTS), str(FAIL_AT_STEP), str(GROUP_TIMEOUT_S)],
                                   LAUNCH_TIMEOUT_S)
    assert code != 0, log[-3000:]  # torchrun reports the failed rank
    return out, log, time.monotonic() - t0


def test_failing_rank_skips_the_gather_and_the_job_ends(failed_job: tuple[Path, str, float]) -> None:
    out, log, wall_s = failed_job
    assert "rank 1 ran out of data" in log
    assert f"merge the ranks' records with: greentrain track --summarize {out}" in log
    assert wall_s < GROUP_TIMEOUT_S, f"the job ended only after {wall_s:.0f} s (a collective timed out?)"
    # nothing aggregated was written: rank 0 never reached its gather
    assert not (out / "measurement.json").exists()
    failed = read_jsonl(out / "greentrain.rank1.jsonl")
    assert failed[-1]["type"] == "end" and failed[-1]["status"] == "error"
    assert "RuntimeError: rank 1 ran out of data" in failed[-1]["error"]
    assert sum(r["type"] == "step" for r in failed) == FAIL_AT_STEP


def test_summarize_merges_the_ranks_records(failed_job: tuple[Path, str, float],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out, _, _ = failed_job
    assert main(["track", "--summarize", str(out), "--grid-g-per-kwh", "100", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["world_size"] == 2 and [r["rank"] for r in m["ranks"]] == [0, 1]
    # rank 0 either saw the peer go (gloo raises in its all-reduce: "error") or was killed ("incomplete")
    assert "error" in m["status"]
    rank0_steps = sum(r["type"] == "step" for r in read_jsonl(out / "greentrain.rank0.jsonl"))
    assert rank0_steps >= FAIL_AT_STEP - 1  # what rank 0 flushed before torchrun stopped it
    assert m["tokens"] == (rank0_steps + FAIL_AT_STEP) * 2 * 16
    assert m["it_energy_j"] > 0 and m["emissions_kg_co2e"] > 0
    assert {p.name for p in out.iterdir()} >= {"measurement.json", "emissions.csv", "model_card_co2.yaml"}


@pytest.mark.parametrize(("files", "rule"), [
    ([], "holds no greentrain.jsonl"),
    (["greentrain.rank0.jsonl", "greentrain.rank2.jsonl"], "lacks the record of rank(s) [1]"),
])
def test_summarize_bad_directory(tmp_path: Path, files: list[str], rule: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    for name in files:
        (tmp_path / name).write_text('{"type": "start", "rank": 0, "world_size": 3}\n')
    assert main(["track", "--summarize", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--summarize" in err and rule in err and "Traceback" not in err
    assert not (tmp_path / "measurement.json").exists()
