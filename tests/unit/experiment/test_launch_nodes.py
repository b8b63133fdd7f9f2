"""Multi-node variants (runtime.nodes): the rendezvous each scheduler gives its tasks, torchrun's command, the
refusals, Ray's CPU share, and a real run of the tiny variant as 2 "nodes" on this host (two torchrun agents, a
c10d rendezvous on 127.0.0.1, gloo, one rank each)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment import launch, ranks
from greentrain.experiment.cluster import node_task, slurm_parameters, slurm_resources
from greentrain.experiment.executors import THREADS_ENV
from greentrain.experiment.job import parse_job
from greentrain.experiment.launch import Rendezvous
from greentrain.experiment.runner import RunOptions, check_devices
from greentrain.experiment.spec import experiment_from_dict

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": "2", "SLURM_NODEID": "1",
         "SLURM_JOB_NODELIST": "gpu[07-08]", "SUBMITIT_EXECUTOR": "slurm"}


def test_slurm_tasks_meet_on_the_first_host_at_a_port_from_the_job_id(monkeypatch: pytest.MonkeyPatch) -> None:
    submitit = pytest.importorskip("submitit")
    for k, v in SLURM.items():
        monkeypatch.setenv(k, v)
    hosts = list(submitit.JobEnvironment().hostnames)  # SLURM_JOB_NODELIST expanded as scontrol would
    assert hosts == ["gpu07", "gpu08"]
    r = launch.slurm_rendezvous(SLURM, hosts)
    assert r == Rendezvous(nnodes=2, node_rank=1, endpoint="gpu07:24242", run_id="slurm-4242")
    cmd = launch.torchrun_command(Path("v.json"), 4, r, python="py")
    assert cmd == ["py", "-m", "torch.distributed.run", "--nnodes", "2", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", "gpu07:24242", "--rdzv-id", "slurm-4242", "--rdzv-conf", "is_host=false",
                   "--nproc-per-node", "4", "-m", "greentrain.experiment.worker", "v.json"]
    node0 = launch.slurm_rendezvous({**SLURM, "SLURM_NODEID": "0"}, hosts)
    assert node0.torchrun_args() == r.torchrun_args() and node0.node_rank == 0  # node 0's task hosts the store
    assert launch.rendezvous_from_env(dict(r.env())) == r and launch.rendezvous_from_env({}) is None
    with pytest.raises(RuntimeError, match="not a Slurm job task"):
        launch.slurm_rendezvous({}, hosts)


def test_slurm_asks_nodes_with_one_task_each() -> None:
    _, params = slurm_parameters((("partition", "gpu"), ("gpus_per_node", "1")))
    assert slurm_resources(params, 4, None, 2) == {"slurm_partition": "gpu", "gpus_per_node": 4,
                                                   "tasks_per_node": 1, "nodes": 2}
    assert slurm_resources({}, 2, 3, 4) == {"cpus_per_task": 6, "tasks_per_node": 1, "nodes": 4}
    assert "nodes" not in slurm_resources({}, 2, 3, 1)


def test_nodes_are_refused_where_they_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    variants: Any = [type("V", (), {"job": parse_job({"runtime": {"nodes": 2}})})()]
    assert variants[0].job.world_size == 2
    with pytest.raises(ConfigError) as e:
        check_devices(variants, RunOptions(out_dir=tmp_path))
    assert str(e.value).startswith("runtime.nodes=2: needs --executor ray or slurm") and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"runtime\.nodes=2: needs process isolation"):
        check_devices(variants, RunOptions(out_dir=tmp_path, executor="ray", isolation="inline"))
    check_devices(variants, RunOptions(out_dir=tmp_path, executor="slurm"))
    # a worker started without a scheduler's rendezvous (by hand, or by the local executor) refuses too
    for k in (launch.NNODES_ENV, "TORCHELASTIC_RUN_ID", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    refused = ranks.launch(tmp_path / "v.json", {"runtime": {"nodes": 2}})
    assert refused.startswith("runtime.nodes=2: a multi-node variant runs under --executor ray or slurm")


def test_a_ray_task_s_ranks_share_the_cpus_ray_gave_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's num_cpus only schedules: the task's threads come from it, divided among the variant's ranks."""
    ray = pytest.importorskip("ray")
    from greentrain.experiment.cluster import ray_task_env

    class Context:
        def get_assigned_resources(self) -> dict[str, float]:
            return {"CPU": 4.0}

    monkeypatch.setattr(ray, "get_runtime_context", lambda: Context())
    env = dict(ray_task_env())
    assert env == {THREADS_ENV: "4", "OMP_NUM_THREADS": "4"}
    assert ranks.process_threads(None, 2, env, cores=64) == 2  # 2 ranks of a 4-CPU task, on a 64-core node
    assert ranks.process_threads(None, 1, env, cores=64) == 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TINY = {"data": {"train_size": 32, "eval_size": 8, "test_size": 8, "max_source_tokens": 16, "max_target_tokens": 8},
        "train": {"max_steps": 2, "per_device_train_batch_size": 4, "learning_rate": 3.0e-3},
        "eval": {"max_new_tokens": 4, "batch_size": 8}, "runtime": {"num_threads": 1, "nodes": 2}}


def _two_nodes(out: Path, exp: Any, grace_s: float | None = None) -> tuple[Any, list[int]]:
    """Both nodes' tasks of one launch, as two threads of this process (each starts its own torchrun agent)."""
    endpoint, run_id = f"127.0.0.1:{_free_port()}", f"test-{out.name}"
    v = exp.variants[0]
    got: dict[int, Any] = {}
    env = (("CUDA_VISIBLE_DEVICES", ""),)

    def node(rank: int) -> None:
        got[rank] = node_task(str(out), exp, v.variant_id, "process",
                              Rendezvous(nnodes=2, node_rank=rank, endpoint=endpoint, run_id=run_id), env)

    other = threading.Thread(target=node, args=(1,))
    other.start()
    node(0)
    other.join(timeout=300)
    assert not other.is_alive() and got[1] is None
    return got[0], [0, 1]


@pytest.mark.slow
def test_two_nodes_train_one_variant_and_rank0_writes_it_once(tmp_path: Path, make_experiment: Any) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("rouge_score")
    from greentrain.experiment.runner import variant_dir
    from greentrain.measure.records import last_run, read_jsonl
    from greentrain.measure.summary import summarize

    exp = experiment_from_dict(make_experiment(**TINY), "tiny.yaml")
    r, _ = _two_nodes(tmp_path, exp)
    assert r is not None and r.status == "ok", r
    assert (r.world_size, r.global_batch_size, r.num_steps) == (2, 8, 2)  # 2 nodes x 1 rank x 4 examples
    folder = variant_dir(tmp_path, exp.variants[0].variant_id)
    assert sorted(p.name for p in folder.glob("result*.json")) == ["result.json"]
    assert len((folder / "predictions.jsonl").read_text().splitlines()) == 8  # both ranks' shares, once
    # every rank's record names its node (torchrun's group rank) and the world of both nodes; each node's local
    # rank 0 meters its node's CPU and RAM (one host here: both meter it), rank 0 sums them
    nodes = set()
    for name in ("train.jsonl", "train.rank1.jsonl"):
        records = read_jsonl(folder / name)
        tr = next(x for x in records if x.get("type") == "start")["scheduler"]["torchrun"]
        assert (tr["world_size"], tr["local_world_size"]) == (2, 1)
        nodes.add(tr["group_rank"])
        assert summarize(last_run(records)).cpu_energy_j > 0
    assert nodes == {0, 1}
    assert json.loads((folder / "variant.json").read_text())["job"]["runtime"]["nodes"] == 2
    assert launch.done_path(tmp_path, f"test-{tmp_path.name}").exists()


def test_a_node_whose_node_0_does_not_run_the_variant_stops(tmp_path: Path, make_experiment: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 0 finds the variant done (a resume): it launches nothing, and node 1's agent, waiting at the
    rendezvous, is stopped once node 0's done file is there (no rendezvous timeout waited out)."""
    from greentrain.experiment.results import VariantResult, write_result
    from greentrain.experiment.runner import variant_dir

    exp = experiment_from_dict(make_experiment(**TINY), "tiny.yaml")
    v = exp.variants[0]
    folder = variant_dir(tmp_path, v.variant_id)
    folder.mkdir(parents=True)
    write_result(folder / "result.json", VariantResult(variant_id=v.variant_id, config_hash=v.config_hash,
                                                       axis_values=v.axis_values, seed=v.seed, status="ok"))
    monkeypatch.setattr(launch, "NODE_GRACE_S", 0.0)
    monkeypatch.setattr(launch, "NODE_POLL_S", 0.2)
    r, _ = _two_nodes(tmp_path, exp)
    assert r is not None and r.status == "ok" and r.wall_s == 0.0  # the old result, nothing run
