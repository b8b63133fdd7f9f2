"""Several devices per variant (runtime.devices): the field, the launch, the placement, and a real 2-rank run on CPU
(gloo) against the same variant on one process."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment import ranks
from greentrain.experiment.cluster import ray_resources
from greentrain.experiment.executors import THREADS_ENV, Slot, check_device_groups, local_slots
from greentrain.experiment.job import parse_job
from greentrain.experiment.runner import RunOptions, check_devices
from greentrain.experiment.slurm import slurm_resources
from greentrain.experiment.spec import config_hash, experiment_from_dict

TORCHRUN = {"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "1", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}


def test_devices_is_bounded_and_one_device_hashes_as_before() -> None:
    plain = parse_job({})
    assert plain.devices == 1 and "devices" not in plain.resolved["runtime"]
    one = parse_job({"runtime": {"devices": 1, "nodes": 1}})
    assert one.resolved == plain.resolved and config_hash(one.resolved, 0) == config_hash(plain.resolved, 0)
    two = parse_job({"runtime": {"devices": 2}})
    assert two.devices == 2 and config_hash(two.resolved, 0) != config_hash(plain.resolved, 0)
    assert parse_job(two.resolved).devices == 2  # the worker parses the resolved job again
    for runtime, message in (({"devices": 0}, "runtime.devices=0: must be >= 1"),
                             ({"devices": 65}, "runtime.devices=65: must be <= 64"),
                             ({"devices": "two"}, "runtime.devices='two': must be an integer"),
                             ({"nodes": 0}, "runtime.nodes=0: must be >= 1"),
                             ({"nodes": 1025}, "runtime.nodes=1025: must be <= 1024")):
        with pytest.raises(ConfigError) as e:
            parse_job({"runtime": runtime})
        assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_the_local_executor_refuses_several_nodes_in_one_line(tmp_path: Path, make_experiment: Any,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from greentrain.cli.main import main

    f = make_experiment(tmp_path / "e.yaml", runtime={"nodes": 2})
    assert parse_job({"runtime": {"nodes": 2}}).resolved["runtime"]["nodes"] == 2  # another hash than one node
    assert main(["experiment", "run", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "runtime.nodes=2" in err and "needs executor ray or slurm" in err, err
    assert not (tmp_path / "out").exists()  # nothing written


def test_ranks_records_threads_and_shares() -> None:
    assert ranks.rank_world({}) == (0, 1, 1) and ranks.rank_world(TORCHRUN) == (1, 2, 2)
    assert ranks.jsonl_name("train", {}) == "train.jsonl"
    assert ranks.jsonl_name("train", TORCHRUN) == "train.rank1.jsonl"
    assert ranks.jsonl_name("train", {**TORCHRUN, "RANK": "0"}) == "train.jsonl"
    # cores // (jobs x devices): a pool of 2 jobs on 16 cores gives each worker 8 threads, each of 4 ranks 2
    assert ranks.process_threads(None, 4, {THREADS_ENV: "8"}, cores=16) == 2
    assert ranks.process_threads(None, 2, {}, cores=16) == 8 and ranks.process_threads(None, 3, {}, cores=2) == 1
    assert ranks.process_threads(None, 1, {}, cores=16) is None  # one process, no pool: torch's default
    assert ranks.process_threads(3, 4, {THREADS_ENV: "8"}, cores=16) == 3  # runtime.num_threads: per rank
    items = list(range(7))
    shares = [list(ranks.share(items, r, 3)) for r in range(3)]
    assert shares == [[0, 1, 2], [3, 4], [5, 6]]
    cmd = ranks.torchrun_command(Path("v.json"), 4, python="py")
    assert cmd == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", "-m",
                   "greentrain.experiment.worker", "v.json"]


TORCHRUN_REPORT = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
greentrain.experiment.worker FAILED
-------------------------------------------------------
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 10753)  (SIGTERM)
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 10754)
=======================================================
"""


def test_a_rank_killed_by_a_signal_is_told_from_a_rank_that_raised() -> None:
    assert ranks.rank_killed(TORCHRUN_REPORT.format(code="-9 (SIGKILL)"))  # torchrun 2.13's report, trimmed
    assert not ranks.rank_killed(TORCHRUN_REPORT.format(code="1"))  # the others were then sent SIGTERM
    assert not ranks.rank_killed("greentrain experiment: variant base failed: ValueError: x")


def test_the_launcher_becomes_torchrun_only_where_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    from greentrain.experiment.pruning import TRIAL_ENV

    monkeypatch.delenv(TRIAL_ENV, raising=False)
    assert ranks.launch(Path("v.json"), {"runtime": {"num_threads": 1}}) == ""  # one device: the worker itself
    for key, value in TORCHRUN.items():
        monkeypatch.setenv(key, value)
    assert ranks.launch(Path("v.json"), {"runtime": {"devices": 2}}) == ""  # a rank: trains
    for key in TORCHRUN:
        monkeypatch.delenv(key)
    monkeypatch.setenv(TRIAL_ENV, "{}")
    assert ranks.launch(Path("v.json"), {"runtime": {"devices": 2}}).startswith(
        "runtime.devices=2: a pruned search's trials train on one device")


def test_the_local_pool_gives_a_variant_its_devices() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    slots = local_slots(2, env)
    check_device_groups(slots, 2, 2, env)
    with pytest.raises(ConfigError) as e:
        check_device_groups(slots, 3, 2, env)
    assert str(e.value) == ("runtime.devices=3: exceeds the 2 GPU(s) of each worker's device group (4 GPU(s) here "
                            "over 2 jobs): run fewer jobs at once or lower runtime.devices")
    check_device_groups([Slot(0)], 4, 1, env)  # --jobs 1: every visible GPU
    with pytest.raises(ConfigError):
        check_device_groups([Slot(0)], 5, 1, env)
    cpu = {"CUDA_VISIBLE_DEVICES": ""}
    check_device_groups(local_slots(2, cpu, cores=2), 8, 2, cpu)  # a CPU box: any number of gloo ranks


def test_several_devices_need_process_isolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a CPU box (torch is not asked)
    variants: Any = [SimpleNamespace(job=parse_job({"runtime": {"devices": d}})) for d in (1, 2)]
    check_devices(variants, RunOptions(out_dir=tmp_path))
    check_devices(variants[:1], RunOptions(out_dir=tmp_path, isolation="inline"))
    with pytest.raises(ConfigError) as e:
        check_devices(variants, RunOptions(out_dir=tmp_path, isolation="inline"))
    assert str(e.value).startswith("runtime.devices=2: needs process isolation")


def test_ray_and_slurm_ask_for_the_devices() -> None:
    assert ray_resources(4, None, gpus=True) == {"num_cpus": 4, "num_gpus": 4}
    assert ray_resources(2, 3, gpus=False) == {"num_cpus": 6, "num_gpus": 0}
    assert ray_resources(1, None, gpus=True) == {"num_cpus": 1, "num_gpus": 1}
    assert slurm_resources({"gpus_per_node": 1, "partition": "p"}, 4, None) == {
        "gpus_per_node": 4, "partition": "p", "tasks_per_node": 1}
    assert slurm_resources({"gpus_per_node": 8}, 2, None)["gpus_per_node"] == 8  # whole nodes asked: kept
    assert slurm_resources({}, 2, 4) == {"cpus_per_task": 8, "tasks_per_node": 1}
    assert slurm_resources({"cpus_per_task": 3}, 1, 8) == {"cpus_per_task": 3, "tasks_per_node": 1}  # unchanged


def test_the_prediction_is_for_every_device(make_experiment: Any) -> None:
    from greentrain.experiment.predict import predict

    data = make_experiment(data={"train_size": 64, "eval_size": 8, "test_size": 8},
                           site={"chip": "h100-sxm", "grid_g_co2e_per_kwh": 300.0})
    one = predict(parse_job({k: v for k, v in data.items() if k != "name"}))
    data["runtime"] = {"devices": 2}
    two = predict(parse_job({k: v for k, v in data.items() if k != "name"}))
    assert two.flop_per_step == pytest.approx(2 * one.flop_per_step, rel=1e-12)
    assert two.tokens_per_step == 2 * one.tokens_per_step and two.memory_bytes == one.memory_bytes
    assert two.energy_j is not None and one.energy_j is not None and two.energy_j > 1.9 * one.energy_j


TINY = {"data": {"train_size": 32, "eval_size": 8, "test_size": 8, "max_source_tokens": 16, "max_target_tokens": 8},
        "train": {"max_steps": 2, "per_device_train_batch_size": 4, "learning_rate": 3.0e-3},
        "eval": {"max_new_tokens": 4, "batch_size": 8}, "runtime": {"num_threads": 1, "devices": 2}}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory, make_experiment: Any) -> tuple[Path, Any]:
    """The tiny variant on 2 CPU ranks (torchrun, gloo), run by the runner as any variant (its worker process)."""
    return _run_tiny(tmp_path_factory.mktemp("devices"), make_experiment, (("CUDA_VISIBLE_DEVICES", ""),))


def _run_tiny(out: Path, make_experiment: Any, env: tuple[tuple[str, str], ...]) -> tuple[Path, Any]:
    pytest.importorskip("transformers")
    pytest.importorskip("rouge_score")
    from greentrain.experiment.runner import NoProgress, run_in_folder

    v = experiment_from_dict(make_experiment(**TINY), "tiny.yaml").variants[0]
    run_in_folder(out, v, "process", NoProgress(), env=env)
    return out, v


def _records(folder: Path, phase: str, rank: int) -> Any:
    from greentrain.measure.records import last_run, read_jsonl
    from greentrain.measure.summary import summarize

    return summarize(last_run(read_jsonl(folder / (f"{phase}.jsonl" if rank == 0 else f"{phase}.rank{rank}.jsonl"))))


@pytest.mark.slow
def test_two_ranks_train_one_variant_and_rank0_gathers_them(two_ranks: tuple[Path, Any]) -> None:
    from greentrain.experiment.data import load_splits
    from greentrain.experiment.predict import vocab_size
    from greentrain.experiment.results import PHASES, read_result
    from greentrain.experiment.runner import variant_dir

    out, v = two_ranks
    two_dir = variant_dir(out, v.variant_id)
    two = read_result(two_dir / "result.json")
    assert two is not None and two.status == "ok", two
    assert (two.world_size, two.global_batch_size, two.num_steps) == (2, 8, 2)  # 2 ranks x 4 examples
    assert two.samples == 2 * 8 and two.tokens_source == 2 * 8 * 16 and two.tokens_target == 2 * 8 * 8
    # both ranks' FLOPs, as the planner predicts for 2 devices (test_the_prediction_is_for_every_device: twice
    # one device's)
    assert two.predicted_flop_per_step == pytest.approx(two.flop_per_step, rel=1e-9)
    # every rank's records, rank 0's result: the energy of both processes, phase by phase
    for phase in PHASES:
        ranks = [_records(two_dir, phase, r) for r in (0, 1)]
        per_rank = [x.it_energy_j for x in ranks]
        # torchrun: local rank 0 meters the node's CPU and RAM over both ranks, rank 1 its GPU alone (none here)
        assert per_rank[0] > 0 and ranks[1].cpu_energy_j == 0 and ranks[1].ram_energy_j == 0
        assert getattr(two, f"{phase}_energy_j") == pytest.approx(sum(per_rank), rel=1e-9)
    assert two.energy_j == pytest.approx(sum(getattr(two, f"{p}_energy_j") for p in PHASES), rel=1e-12)
    # generation shared over the ranks, gathered in order, scored once on rank 0
    d = v.job.data
    *_, test = load_splits(d.source, d.path, d.source_column, d.target_column,
                           (d.train_size, d.eval_size, d.test_size), 0)
    refs = [json.loads(x)["reference"] for x in (two_dir / "predictions.jsonl").read_text().splitlines()]
    assert refs == list(test.targets) and len(refs) == 8
    assert two.rouge1 is not None and two.eval_loss is not None and two.perplexity is None
    # 2 steps from a random init: about ln(vocabulary) per token, not world_size x it (transformers#35078)
    assert 0.5 * math.log(vocab_size(v.job)) < two.eval_loss < 1.3 * math.log(vocab_size(v.job))


@pytest.mark.slow
def test_two_gpus_train_one_variant_with_nccl(tmp_path: Path, make_experiment: Any) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    from greentrain.experiment.results import read_result
    from greentrain.experiment.runner import variant_dir

    out, v = _run_tiny(tmp_path, make_experiment, ())
    r = read_result(variant_dir(out, v.variant_id) / "result.json")
    assert r is not None and r.status == "ok" and r.device != "cpu", r
    assert (r.world_size, r.global_batch_size, r.memory_source) == (2, 8, "cuda-peak")
    assert r.predicted_flop_per_step == pytest.approx(r.flop_per_step, rel=1e-9)
