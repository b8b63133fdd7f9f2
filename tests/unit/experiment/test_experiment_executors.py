"""Executors (issue 27 item 1), fast parts: the local pool's slots and scheduling, per-variant claims, several
runners on one folder, the merged report of several folders, and the refusals (bad flags, missing extras)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.experiment.executors import THREADS_ENV, Slot, claim, joined, local_slots, run_pool
from greentrain.experiment.report import build_report
from greentrain.experiment.runner import fresh_start, variant_dir


def test_cpu_slots_share_the_cores_and_gpu_slots_split_the_devices() -> None:
    assert local_slots(1, {}, cores=8) == [Slot(0)]  # --jobs 1: the worker's environment untouched
    cpu = local_slots(2, {"CUDA_VISIBLE_DEVICES": ""}, cores=8)
    assert [dict(s.env) for s in cpu] == [{THREADS_ENV: "4", "OMP_NUM_THREADS": "4"}] * 2
    assert dict(local_slots(3, {"CUDA_VISIBLE_DEVICES": ""}, cores=2)[2].env)[THREADS_ENV] == "1"
    gpu = local_slots(2, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert [dict(s.env) for s in gpu] == [{"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "2,3"}]
    with pytest.raises(ConfigError, match=r"jobs=5: exceeds the 4 GPU\(s\) here"):
        local_slots(5, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    with pytest.raises(ConfigError, match="jobs=0: must be at least 1"):
        local_slots(0)


def test_the_pool_runs_jobs_at_once_and_comes_back_to_claimed_items() -> None:
    both = threading.Barrier(2, timeout=30)  # fails unless two items run at the same time
    calls: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def run(x: str, slot: Slot, wait: bool) -> object | None:
        with lock:
            calls.append((x, wait))
        if x in ("a", "b"):
            both.wait()
        return None if x == "c" and not wait else x  # c: claimed by another runner the first time

    run_pool(["a", "b", "c", "d"], local_slots(2, {"CUDA_VISIBLE_DEVICES": ""}, cores=2), run)
    assert sorted(calls) == [("a", False), ("b", False), ("c", False), ("c", True), ("d", False)]
    seq: list[tuple[str, bool]] = []

    def once(x: str, slot: Slot, wait: bool) -> object | None:
        seq.append((x, wait))
        return None if x == "c" and not wait else x

    run_pool(["a", "c", "d"], [Slot(0)], once)
    assert seq == [("a", False), ("c", False), ("d", False), ("c", True)]  # one slot: in order, c at the end


def test_a_claim_is_held_once_and_released_when_its_holder_dies(tmp_path: Path) -> None:
    with claim(tmp_path, "v=1", wait=False) as first:
        with claim(tmp_path, "v=1", wait=False) as second:
            assert first and not second
        with claim(tmp_path, "other", wait=False) as other:
            assert other
    assert (tmp_path / "claims" / "v=1.lock").read_text().split()[1] == str(os.getpid())
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from greentrain.experiment.executors import claim\n"
                               f"with claim(Path({str(tmp_path)!r}), 'v=1', wait=False) as c:\n"
                               "    print(c, flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
    with claim(tmp_path, "v=1", wait=False) as taken:
        assert not taken
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with claim(tmp_path, "v=1", wait=False) as taken:
        assert taken  # the kernel dropped the dead runner's lock: no stale claim


def test_runners_of_one_experiment_share_a_folder_others_are_refused(tmp_path: Path) -> None:
    mine = {"name": "tiny", "spec_hash": "abc", "variants": []}
    with joined(tmp_path, mine, False, fresh_start):
        assert json.loads((tmp_path / "experiment.json").read_text())["spec_hash"] == "abc"
        with joined(tmp_path, mine, False, fresh_start):
            pass  # the same experiment joins
        other = joined(tmp_path, {"name": "other", "spec_hash": "def"}, False, fresh_start)
        with pytest.raises(ConfigError, match=r"another runner \(pid \d+\) is running a different experiment "
                                              r"\(tiny\) in the folder"), other:
            pass
        with pytest.raises(ConfigError, match=r"fresh=.*another runner is at work in the folder"), \
                joined(tmp_path, mine, True, fresh_start):
            pass
    with joined(tmp_path, {"name": "other", "spec_hash": "def", "variants": []}, True, fresh_start):
        pass  # alone: any experiment, afresh


def test_report_merges_folders_of_one_experiment(tmp_path: Path, make_folder: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    make_folder(a)
    make_folder(b)
    # b finished "later" (pending in a) and failed "fast" (ok in a)
    from greentrain.experiment.results import VariantResult, write_result

    variant_dir(b, "later").mkdir(parents=True)
    write_result(variant_dir(b, "later") / "result.json",
                 VariantResult(variant_id="later", config_hash="h3", status="ok", rouge1=30.0))
    write_result(variant_dir(b, "fast") / "result.json",
                 VariantResult(variant_id="fast", config_hash="h2", status="failed", reason="x"))
    rep = build_report([a, b], [])
    assert [(r.variant_id, r.status) for r in rep.results] == [("base", "ok"), ("fast", "ok"), ("later", "ok"),
                                                               ("stale", "pending")]
    assert main(["experiment", "report", str(a), str(b), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [v["variant_id"] for v in got["variants"]] == ["base", "fast", "later", "stale"]
    man = json.loads((b / "experiment.json").read_text())
    man["variants"][1]["config_hash"] = "changed"
    (b / "experiment.json").write_text(json.dumps(man))
    assert main(["experiment", "report", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "only folders of the same experiment" in err and str(b) in err


@pytest.mark.parametrize(("flags", "match"), [
    (["--jobs", "0"], "--jobs=0: must be at least 1"),
    (["--max-retries", "-1"], "--max-retries=-1: must be at least 0"),
    (["--executor", "ray", "--jobs", "2"], "--jobs=2: applies to the local executor"),
    (["--executor", "slurm", "--slurm", "partition"], "--slurm='partition': must be KEY=VALUE"),
    (["--jobs", "2", "--isolation", "inline"], "--jobs=2: needs process isolation"),
    (["--storage", "sqlite:///x.db"], "--storage='sqlite:///x.db': applies to a search"),
    # session 11: an empty value ran with submitit's defaults; an unknown parameter was a NameError traceback
    (["--executor", "slurm", "--slurm", "partition="], "--slurm='partition=': must be KEY=VALUE, both given"),
    (["--executor", "slurm", "--slurm", "partition=a\nb"], "--slurm='partition=a\\nb': must be KEY=VALUE"),
    (["--executor", "slurm", "--slurm", "bogus_param=1"], "--slurm='bogus_param=1': Unknown executor 'bogus'"),
    (["--executor", "slurm", "--slurm", "timeout_min=nan"], "--slurm timeout_min='nan': must be an integer"),
    (["--executor", "slurm", "--slurm", "gpus_per_node=1e9"], "--slurm gpus_per_node='1e9': must be in [0, 64]"),
    (["--slurm", "partition=gpu"], "--slurm='partition=gpu': applies to --executor slurm"),  # was ignored
    (["--executor", "slurm", "--slurm", "qos=a", "--slurm", "qos=b"], "sets qos again"),  # the last one won
    (["--jobs", "1000000"], "--jobs=1000000: must be at most 4,096 worker processes"),  # hung starting them
    (["--max-retries", "1000000"], "--max-retries=1000000: must be at most 100"),
])
def test_bad_executor_flags_are_one_line(tmp_path: Path, make_experiment: Any, flags: list[str], match: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    exp = make_experiment(tmp_path / "e.yaml")
    assert main(["experiment", "run", str(exp), "--out", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err
    assert not (tmp_path / "o" / "variants").exists()


@pytest.mark.parametrize(("executor", "module", "extra"), [("ray", "ray", "ray"), ("slurm", "submitit", "slurm")])
def test_a_missing_executor_extra_is_named(tmp_path: Path, make_experiment: Any, monkeypatch: pytest.MonkeyPatch,
                                           executor: str, module: str, extra: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    exp = make_experiment(tmp_path / "e.yaml")
    assert main(["experiment", "run", str(exp), "--out", str(tmp_path / "o"), "--executor", executor]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"pip install 'greentrain[{extra}]'" in err and module in err
    assert not (tmp_path / "o").exists()


def test_a_signal_to_the_pool_stops_its_running_workers() -> None:
    """SIGTERM or Ctrl-C in run_pool's thread stops the workers the other threads wait on (a --jobs 2 runner
    waited 12-27 s for two tiny variants to finish; a real one would wait out its training) and starts none."""
    import time

    from greentrain.experiment.executors import run_worker

    codes: list[int] = []

    def run(x: int, slot: Slot, wait: bool) -> object:
        codes.append(run_worker([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ))[0])
        return x

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_pool([1, 2, 3], [Slot(0), Slot(1)], run)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t0 < 30  # not the workers' 60 s
    # the two running ones stopped; the third never started a process (cancelled, or refused while stopping)
    assert len(codes) >= 2 and set(codes) == {-signal.SIGTERM}


def test_submitit_is_imported_without_shutting_down_the_program_s_logging_handlers() -> None:
    """submitit's logger module runs logging.config.dictConfig at import, which shuts down every handler already
    installed (a FileHandler's stream closed): in a test session that closed pytest's own capture of every later
    test of the worker (session 11's CI). A fresh interpreter, so that submitit is not imported yet."""
    pytest.importorskip("submitit")
    code = ("import logging, os; h = logging.FileHandler(os.devnull); logging.getLogger().addHandler(h); "
            "from greentrain.experiment.extras import import_submitit; s = import_submitit(); "
            "print(h.stream is not None, 'SUBMITIT_LOG_LEVEL' in os.environ, s.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "SUBMITIT_LOG_LEVEL"}).stdout.split()
    assert out == ["True", "False", "submitit"]
