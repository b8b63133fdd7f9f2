"""The runner's first worker (experiment/warm.py): it checks every variant before the runner writes anything,
refuses a bad one in one line, and then runs the first variant itself (one torch + transformers import fewer per
run: 6.4 s of CPU on the 2-core machine)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("rouge_score")

from greentrain.errors import GreentrainError
from greentrain.experiment import runner
from greentrain.experiment.ranks import PARENT_ENV
from greentrain.experiment.runner import RunOptions, run_experiment, variant_dir
from greentrain.experiment.spec import experiment_from_dict, load_experiment
from greentrain.experiment.warm import WarmWorker

SMALL: dict[str, Any] = {
    "model": {"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}},
    "data": {"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 32, "max_target_tokens": 8},
    "train": {"max_steps": 3, "per_device_train_batch_size": 8}}


def test_a_refused_variant_is_one_line_and_the_worker_is_gone(make_experiment: Any) -> None:
    """Refused by the job schema: every job is parsed before torch is imported, so this costs a process start."""
    good, other = experiment_from_dict(make_experiment(**SMALL, axes={"train.learning_rate": [1e-3]})).variants
    bad = other.to_dict()
    bad["job"]["train"]["no_such_argument"] = 0.1
    with WarmWorker(runner_pid_env=PARENT_ENV) as warm:
        with pytest.raises(GreentrainError) as e:
            warm.check([good.to_dict(), bad])
        assert warm.take(()) is None  # closed: nothing waits to run a variant
    message = str(e.value)
    assert message.startswith(f"variant {other.variant_id}: train.no_such_argument=0.1") and "\n" not in message


def test_the_runner_checks_before_it_writes(tmp_path: Path, make_experiment: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The first worker's refusal (here, of the installed transformers) stops the run before DIR exists."""
    exp = load_experiment(make_experiment(tmp_path / "e.yaml", **SMALL))
    checked: list[list[str]] = []

    def refuse(self: WarmWorker, variants: list[dict[str, Any]]) -> None:
        checked.append([v["variant_id"] for v in variants])
        raise GreentrainError("variant base: train.x=1: not a training argument of the installed transformers")

    monkeypatch.setattr(WarmWorker, "check", refuse)
    with pytest.raises(GreentrainError, match="not a training argument"):
        run_experiment(exp, RunOptions(out_dir=tmp_path / "out"))
    assert checked == [["base"]] and not (tmp_path / "out").exists()


@pytest.mark.slow  # the worker imports torch and transformers: ~5 s of CPU
def test_the_checked_worker_runs_the_first_variant(tmp_path: Path, make_experiment: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Process isolation: the worker that checked the variant runs it (no other worker process is started) and
    exits. fp16: on CPU the worker records it not applicable without training (on a GPU it trains 3 steps)."""
    train = {**SMALL["train"], "precision": "fp16"}
    exp = load_experiment(make_experiment(tmp_path / "e.yaml", **{**SMALL, "train": train}))
    started: list[list[str]] = []

    def no_second_worker(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
        started.append(cmd)
        raise AssertionError(f"a second worker process was started: {cmd}")

    monkeypatch.setattr(runner, "run_worker", no_second_worker)
    before = children()
    (r,) = run_experiment(exp, RunOptions(out_dir=tmp_path / "out"))
    assert not started and r.status in ("ok", "not_applicable") and r.variant_id == "base"
    written = json.loads((variant_dir(tmp_path / "out", "base") / "result.json").read_text())
    assert written["status"] == r.status and written["config_hash"] == r.config_hash  # the worker wrote it
    assert children() <= before  # the worker exited and was reaped


def children() -> set[int]:
    """This process's children (Linux /proc; empty elsewhere)."""
    import os

    path = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    return {int(x) for x in path.read_text().split()} if path.is_file() else set()
