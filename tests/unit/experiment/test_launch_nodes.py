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
from greentrain.experiment.cluster import node_task
from greentrain.experiment.executors import THREADS_ENV
from greentrain.experiment.job import parse_job
from greentrain.experiment.launch import Rendezvous
from greentrain.experiment.runner import RunOptions, check_devices
from greentrain.experiment.slurm import slurm_parameters, slurm_resources
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


def test_submitit_s_local_cluster_refuses_several_nodes(tmp_path: Path, make_experiment: Any) -> None:
    pytest.importorskip("submitit")
    from types import SimpleNamespace

    from greentrain.experiment.cluster import run_on_cluster

    exp = experiment_from_dict(make_experiment(runtime={"num_threads": 1, "nodes": 2}), "t.yaml")
    opts = SimpleNamespace(executor="slurm", slurm=(("cluster", "local"),), out_dir=tmp_path, isolation="process",
                           max_retries=0)
    with pytest.raises(ConfigError) as e:
        run_on_cluster(exp, list(exp.variants), opts, None)
    assert str(e.value) == ("runtime.nodes=2: needs a Slurm cluster (slurm cluster=local runs the jobs on this one "
                            "machine)")
    assert not (tmp_path / "slurm").exists()  # nothing submitted


def test_nodes_are_refused_where_they_cannot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    variants: Any = [type("V", (), {"job": parse_job({"runtime": {"nodes": 2}})})()]
    assert variants[0].job.world_size == 2
    with pytest.raises(ConfigError) as e:
        check_devices(variants, RunOptions(out_dir=tmp_path))
    assert str(e.value).startswith("runtime.nodes=2: needs executor ray or slurm") and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"runtime\.nodes=2: needs process isolation"):
        check_devices(variants, RunOptions(out_dir=tmp_path, executor="ray", isolation="inline"))
    check_devices(variants, RunOptions(out_dir=tmp_path, executor="slurm"))
    # a worker started without a scheduler's rendezvous (by hand, or by the local executor) refuses too
    for k in (launch.NNODES_ENV, "TORCHELASTIC_RUN_ID", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    refused = ranks.launch(tmp_path / "v.json", {"runtime": {"nodes": 2}})
    assert refused.startswith("runtime.nodes=2: a multi-node variant runs under --executor ray or slurm")
    monkeypatch.setenv(ranks.TRIAL_ENV, "1")
    refused = ranks.launch(tmp_path / "v.json", {"runtime": {"nodes": 2}})
    assert refused.startswith("runtime.nodes=2: a pruned search's trials train on one device")


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
    assert launch.done_path(tmp_path, f"test-{tmp_path.name}").read_text() == "launched\n"


@pytest.mark.slow  # imports torch (node 0's task hosts the store) and starts a torchrun agent: ~3-5 s loaded
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
    monkeypatch.setattr(launch, "NODE_GRACE_S", 3600.0)  # the grace of a launched run: not given here
    monkeypatch.setattr(launch, "NODE_POLL_S", 0.2)
    r, _ = _two_nodes(tmp_path, exp)
    assert r is not None and r.status == "ok" and r.wall_s == 0.0  # the old result, nothing run
    assert launch.done_path(tmp_path, f"test-{tmp_path.name}").read_text() == "not launched\n"


class _Ref:
    def __init__(self, fn: Any, options: dict[str, Any], args: tuple[Any, ...]) -> None:
        self.fn, self.options, self.args = fn, options, args


class _FakeRay:
    """Ray's driver API as the multi-node path calls it; records each task's options and arguments."""

    def __init__(self, alive: int, result: Any) -> None:
        self.alive, self.result = alive, result
        self.refs: list[_Ref] = []
        self.groups: list[tuple[list[dict[str, int]], str]] = []
        self.cancelled: list[_Ref] = []
        self.removed = 0

    def remote(self, fn: Any) -> Any:
        fake = self

        class Task:
            def options(self, **options: Any) -> Any:
                class Bound:
                    def remote(self, *args: Any) -> _Ref:
                        ref = _Ref(fn, options, args)
                        fake.refs.append(ref)
                        return ref
                return Bound()
        return Task()

    def get(self, ref: _Ref) -> Any:
        if ref.fn.__name__ == "free_endpoint":
            return "10.0.0.7:4321"
        return self.result if ref.args[-1].node_rank == 0 else None

    def placement_group(self, bundles: list[dict[str, int]], strategy: str) -> Any:
        self.groups.append((bundles, strategy))
        return type("PG", (), {"ready": lambda _: "ready", "id": "pg"})()

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import importlib

        ray = pytest.importorskip("ray")
        pg = importlib.import_module("ray.util.placement_group")  # the module (ray.util's name is its function)
        for name, value in (("is_initialized", lambda: True), ("cluster_resources", lambda: {"CPU": 8.0}),
                            ("nodes", lambda: [{"Alive": True}] * self.alive), ("remote", self.remote),
                            ("get", self.get), ("wait", lambda refs, **_: (list(refs), [])),
                            ("cancel", lambda ref, force: self.cancelled.append(ref))):
            monkeypatch.setattr(ray, name, value)
        monkeypatch.setattr(pg, "placement_group", self.placement_group)
        monkeypatch.setattr(pg, "remove_placement_group", lambda _: setattr(self, "removed", self.removed + 1))


def test_ray_places_one_bundle_per_node_and_meets_at_bundle_0(tmp_path: Path, make_experiment: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    from types import SimpleNamespace

    from greentrain.experiment.cluster import run_on_cluster
    from greentrain.experiment.results import VariantResult

    exp = experiment_from_dict(make_experiment(runtime={"num_threads": 1, "devices": 2, "nodes": 3}), "t.yaml")
    v = exp.variants[0]
    ok = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, seed=v.seed, status="ok")
    fake = _FakeRay(alive=3, result=ok)
    fake.patch(monkeypatch)
    opts = SimpleNamespace(executor="ray", ray_address="", out_dir=tmp_path, isolation="process", max_retries=0)
    assert run_on_cluster(exp, [v], opts, None) == [ok]
    assert fake.groups == [([{"CPU": 2}] * 3, "STRICT_SPREAD")] and fake.removed == 1
    endpoint, *nodes = fake.refs
    assert endpoint.options["num_cpus"] == 0
    assert endpoint.options["scheduling_strategy"].placement_group_bundle_index == 0
    assert [n.options["scheduling_strategy"].placement_group_bundle_index for n in nodes] == [0, 1, 2]
    assert all((n.options["num_cpus"], n.options["num_gpus"]) == (2, 0) for n in nodes)  # a bundle each
    meets = [n.args[-1] for n in nodes]
    assert [m.node_rank for m in meets] == [0, 1, 2] and {m.endpoint for m in meets} == {"10.0.0.7:4321"}
    assert len({m.run_id for m in meets}) == 1 and all(m.nnodes == 3 for m in meets)
    assert fake.cancelled == nodes[1:]  # agents past their grace are stopped (a finished one: no-op)
    # a cluster of fewer nodes than a variant asks: one line before anything is placed
    few = _FakeRay(alive=2, result=ok)
    few.patch(monkeypatch)
    with pytest.raises(ConfigError) as e:
        run_on_cluster(exp, [v], opts, None)
    assert str(e.value).startswith("runtime.nodes=3: exceeds the 2 node(s) of the Ray cluster") and not few.groups


def test_the_prediction_is_for_every_rank_of_every_node(make_experiment: Any) -> None:
    from greentrain.experiment.predict import _scenario, hf_config, predict, vocab_size

    data = make_experiment(data={"train_size": 64, "eval_size": 8, "test_size": 8},
                           site={"chip": "h100-sxm", "grid_g_co2e_per_kwh": 300.0})
    one = predict(parse_job({k: v for k, v in data.items() if k != "name"}))
    data["runtime"] = {"devices": 2, "nodes": 2}
    job = parse_job({k: v for k, v in data.items() if k != "name"})
    four = predict(job)
    assert four.flop_per_step == pytest.approx(4 * one.flop_per_step, rel=1e-12)
    assert four.tokens_per_step == 4 * one.tokens_per_step and four.memory_bytes == one.memory_bytes
    cluster = _scenario(job, hf_config(job, vocab_size(job)), "h100-sxm").cluster
    assert (cluster.num_chips, cluster.chips_per_node) == (4, 2)  # 2 nodes of 2: DDP's all-reduce crosses nodes


def test_ray_places_the_group_again_when_a_node_is_lost(tmp_path: Path, make_experiment: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray")
    from types import SimpleNamespace

    from greentrain.experiment.cluster import run_on_cluster
    from greentrain.experiment.results import VariantResult

    exp = experiment_from_dict(make_experiment(runtime={"num_threads": 1, "nodes": 2}), "t.yaml")
    v = exp.variants[0]
    ok = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, seed=v.seed, status="ok")
    fake = _FakeRay(alive=2, result=ok)
    lost = [ray.exceptions.NodeDiedError("node 1 died")]
    get = fake.get

    def get_once_lost(ref: _Ref) -> Any:
        if ref.fn.__name__ == "ray_node_task" and lost:
            raise lost.pop()
        return get(ref)

    fake.get = get_once_lost  # type: ignore[method-assign]
    fake.patch(monkeypatch)
    opts = SimpleNamespace(executor="ray", ray_address="", out_dir=tmp_path, isolation="process", max_retries=1)
    assert run_on_cluster(exp, [v], opts, None) == [ok]
    assert len(fake.groups) == 2 and fake.removed == 2  # placed, lost, removed; placed again
    runs = {ref.args[-1].run_id for ref in fake.refs if ref.fn.__name__ == "ray_node_task"}
    assert len(runs) == 2  # each launch its own rendezvous


class _FakeSubmitit:
    """submitit's AutoExecutor as ``--executor slurm`` calls it: records the parameters of each array."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.arrays: list[tuple[dict[str, Any], str, int]] = []
        self.params: dict[str, Any] = {}

    def executor(self, folder: str, cluster: str | None) -> Any:
        fake = self

        class Job:
            job_id = "77"

            def results(self) -> list[Any]:
                return [fake.result, None]  # task 0's (node 0), then the other node's

        class Executor:
            def update_parameters(self, **params: Any) -> None:
                fake.params = params

            def map_array(self, fn: Any, *args: list[Any]) -> list[Any]:
                fake.arrays.append((dict(fake.params), fn.__name__, len(args)))
                return [Job() for _ in args[0]]

        return Executor()


def test_slurm_submits_a_job_of_nodes_running_the_node_task(tmp_path: Path, make_experiment: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    submitit = pytest.importorskip("submitit")
    from types import SimpleNamespace

    from greentrain.experiment.cluster import run_on_cluster
    from greentrain.experiment.results import VariantResult

    exp = experiment_from_dict(make_experiment(runtime={"num_threads": 2, "devices": 4, "nodes": 2}), "t.yaml")
    v = exp.variants[0]
    ok = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, seed=v.seed, status="ok")
    fake = _FakeSubmitit(ok)
    monkeypatch.setattr(submitit, "AutoExecutor", fake.executor)
    opts = SimpleNamespace(executor="slurm", slurm=(("cluster", "slurm"), ("partition", "gpu"),
                                                    ("gpus_per_node", "8")),  # this host has no sbatch
                           out_dir=tmp_path, isolation="process", max_retries=0)
    assert run_on_cluster(exp, [v], opts, None) == [ok]
    assert fake.arrays == [({"slurm_partition": "gpu", "gpus_per_node": 8, "tasks_per_node": 1, "nodes": 2},
                            "slurm_node_task", 4)]
