"""Resume after a kill (one worker process per variant): finished variants stay, the killed one re-runs with its
attempt counted as waste, then the rest; a changed value re-runs only its variant; a locked folder is refused.
The kill needs worker processes; the first variant and the resumed runs are inline (the same claim and attempt
bookkeeping, without importing torch again in a new process per variant)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("rouge_score")

from greentrain.cli.main import main
from greentrain.experiment.report import build_report
from greentrain.experiment.runner import locked, variant_dir

pytestmark = pytest.mark.slow

# long enough to be killed mid-run: the kill comes within ~0.5 s (a flush) of its 2nd step, ~20 steps
V2_STEPS = 80
V2 = f"train.max_steps={V2_STEPS}"


def experiment(make: Any, path: Path, lr3: float) -> Path:
    return make(path, model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                                                       "num_heads": 4}},
                data={"train_size": 128, "eval_size": 8, "test_size": 8, "max_source_tokens": 32,
                      "max_target_tokens": 8},
                train={"max_steps": 10, "per_device_train_batch_size": 8},
                axes={"train.max_steps": [V2_STEPS], "train.learning_rate": [lr3]})


def steps_in(path: Path) -> int:
    return path.read_text(encoding="utf-8").count('"type":"step"') if path.is_file() else 0


def test_kill_then_resume_reruns_only_the_killed_variant(tmp_path: Path, make_experiment: Any,
                                                         wait_for: Any) -> None:
    exp = experiment(make_experiment, tmp_path / "e.yaml", 1e-3)
    out = tmp_path / "out"
    # base finishes first, inline here (a worker process of its own would only import torch again)
    assert main(["experiment", "run", str(exp), "--out", str(out), "--no-plot", "--isolation", "inline",
                 "--only", "base"]) == 0
    base_result = variant_dir(out, "base") / "result.json"
    mtime = base_result.stat().st_mtime_ns
    runner = subprocess.Popen([sys.executable, "-m", "greentrain.cli.main", "experiment", "run", str(exp), "--out",
                               str(out), "--no-plot"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    train2 = variant_dir(out, V2) / "train.jsonl"
    try:
        wait_for(lambda: steps_in(train2) >= 2, 240, "variant 2 to train")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    start = json.loads(train2.read_text().splitlines()[0])
    worker_pid = int(start["pid"])
    wait_for(lambda: not Path(f"/proc/{worker_pid}").exists() or
             Path(f"/proc/{worker_pid}/stat").read_text().split()[2] == "Z", 30, "the worker to die with its parent")
    assert base_result.stat().st_mtime_ns == mtime  # finished: not run again by the killed runner either
    assert not (variant_dir(out, V2) / "result.json").exists()

    assert main(["experiment", "run", str(exp), "--out", str(out), "--no-plot", "--isolation", "inline"]) == 0
    assert base_result.stat().st_mtime_ns == mtime  # finished: not run again
    r2 = json.loads((variant_dir(out, V2) / "result.json").read_text())
    assert r2["status"] == "ok" and r2["attempts"] == 2 and r2["wasted_energy_j"] > 0 and r2["num_steps"] == V2_STEPS
    with (out / "attempts.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["variant_id"], r["status"]) for r in rows] == [(V2, "killed")]
    assert float(rows[0]["energy_j"]) == pytest.approx(r2["wasted_energy_j"])
    assert any(f.kind == "F7" for f in build_report(out, []).findings)
    third = variant_dir(out, "train.learning_rate=0.001") / "result.json"
    assert json.loads(third.read_text())["status"] == "ok"

    # a changed value re-runs only its own variant (a new id here, the old one no longer in the experiment)
    mtimes = {p: p.stat().st_mtime_ns for p in (base_result, variant_dir(out, V2) / "result.json")}
    exp2 = experiment(make_experiment, tmp_path / "e.yaml", 2e-3)
    assert main(["experiment", "run", str(exp2), "--out", str(out), "--no-plot", "--isolation", "inline"]) == 0
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes
    assert json.loads((variant_dir(out, "train.learning_rate=0.002") / "result.json").read_text())["status"] == "ok"


def test_a_second_runner_on_the_folder_is_refused(tmp_path: Path, make_experiment: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    exp = experiment(make_experiment, tmp_path / "e.yaml", 1e-3)
    out = tmp_path / "out"
    with locked(out):
        # inline: the first worker process (its check imports transformers) is not what is checked here
        rc = main(["experiment", "run", str(exp), "--out", str(out), "--isolation", "inline"])
    err = capsys.readouterr().err
    assert rc == 2 and "locked by another experiment runner" in err and str(os.getpid()) in err
    assert len(err.strip().splitlines()) == 1
    assert not (out / "variants").exists()
