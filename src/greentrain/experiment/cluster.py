"""``experiment run --executor ray|slurm``: the variants as Ray tasks or as a Slurm job array (submitit).

Each task runs ``runner.run_in_folder`` for one variant in the same output folder as a local run (which must be
on a file system every node sees), so its folder, claim, result, attempts, status, resume and report are the
same whatever the executor. A task checks the measured budget of the folder before its variant starts.

* ``ray`` (``pip install 'greentrain[ray]'``): ``ray.init(address=--ray-address)``, or a local cluster; one task
  per variant asking ``num_cpus`` = the variant's ``runtime.num_threads`` (1 when unset) x ``runtime.devices``
  and ``runtime.devices`` GPUs when the cluster has GPUs (Ray's CUDA_VISIBLE_DEVICES then holds them);
  Ray runs a task again when its worker or node dies (``--max-retries``); the attempt it left is moved
  aside and counted as waste by the retry, as a local rerun does.
* ``slurm`` (``pip install 'greentrain[slurm]'``): one submitit job array (``AutoExecutor`` in
  ``DIR/slurm/``), parameters from ``--slurm KEY=VALUE`` (``partition``, ``gpus_per_node``, ``timeout_min``,
  ``cpus_per_task``, ``mem_gb``, ...; ``cluster=local`` runs the array as local processes, for tests); a job
  that fails (preempted, timed out) is submitted again up to ``--max-retries`` times. One array per
  ``runtime.devices``: each job is one task (``tasks_per_node=1``: torchrun starts the variant's processes)
  asking ``gpus_per_node`` >= the variant's devices when ``--slurm gpus_per_node`` names a GPU cluster, else
  ``cpus_per_task`` >= devices x ``runtime.num_threads`` (1 when unset).
* ``runtime.nodes: M`` > 1 (experiment/launch.py): on Ray a STRICT_SPREAD placement group of M such bundles and
  one ``ray_node_task`` in each; on Slurm one job of ``nodes=M`` (one task per node) running ``slurm_node_task``.
  Ray tasks take their torch threads from the CPUs Ray assigned them (``ray_task_env``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError, GreentrainError
from greentrain.experiment import launch
from greentrain.experiment.attempts import variant_dir
from greentrain.experiment.executors import THREADS_ENV
from greentrain.experiment.extras import import_submitit
from greentrain.experiment.launch import Rendezvous
from greentrain.experiment.results import VariantResult, read_result
from greentrain.experiment.slurm import arrays, slurm_executor, slurm_resources
from greentrain.experiment.spec import Experiment, Variant

RAY_REACH_S = 5.0  # ray: --ray-address must accept a TCP connection within this
PLACEMENT_WAIT_S = 600.0  # ray: a multi-node variant's placement group not placed by then fails the variant



def check_ray_address(address: str) -> str:
    """``--ray-address`` as ray.init takes it: "" (a local cluster), ``auto``, ``local``, ``ray://HOST:PORT`` or
    ``HOST:PORT``, the host a name or an IP address, the port 1-65535. A malformed address is refused here, in
    one line: ray.init retries an address it cannot reach for minutes."""
    if address in ("", "auto", "local"):
        return address
    rest = address.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    rule = ""
    if not colon or not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        rule = "must be auto, local, HOST:PORT or ray://HOST:PORT with a port 1-65535"
    elif not _is_host(host):
        rule = "its host must be a name or an IP address"
    if rule:
        raise ConfigError("executor.ray_address", address, rule)
    return address


def reach_ray_address(address: str, timeout_s: float = RAY_REACH_S) -> None:
    """Refuse, in one line, a ``HOST:PORT`` or ``ray://HOST:PORT`` where nothing accepts a TCP connection within
    ``timeout_s``: ray.init would retry it for minutes (Ray 2.60 logs "Failed to connect to GCS" every 5 s). ""
    (a local cluster), ``auto`` and ``local`` are Ray's to resolve."""
    import socket

    if address in ("", "auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except TimeoutError:
        why = f"nothing answered within {timeout_s:g} s"
    except OSError as e:
        why = e.strerror or type(e).__name__
    raise ConfigError("executor.ray_address", address, f"cannot be reached ({why}): start the cluster there "
                      "(ray start, on its head node), or give no address to run a local one")


def _is_host(host: str) -> bool:
    """An IP address, or a DNS name (RFC 1123 labels; a name of digits only must be an IPv4 address)."""
    import ipaddress

    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    ok = bool(host) and len(host) <= 253 and all(
        0 < len(x) <= 63 and x.isascii() and x.replace("-", "").isalnum() and not x.startswith("-")
        and not x.endswith("-") for x in labels)
    return ok and not all(x.isdigit() for x in labels)


def variant_task(out: str, exp: Experiment, variant_id: str, isolation: str, max_retries: int,
                 env: Sequence[tuple[str, str]] = ()) -> VariantResult:
    """One variant, on whichever node the scheduler chose (module level: Ray and submitit pickle it); ``env``
    goes to its worker."""
    from greentrain.experiment import runner

    folder = Path(out)
    v = next(x for x in exp.variants if x.variant_id == variant_id)
    results = [read_result(runner.variant_dir(folder, x.variant_id) / "result.json") for x in exp.variants]
    spent = runner.budget_spent(exp, folder, [r for r in results if r is not None and r.status != "pending"])
    r = runner.run_in_folder(folder, v, isolation, runner.NoProgress(), spent, env=env, max_retries=max_retries)
    assert r is not None  # waited for the claim
    return r


def node_task(out: str, exp: Experiment, variant_id: str, isolation: str, rendezvous: Rendezvous,
              env: Sequence[tuple[str, str]] = ()) -> VariantResult | None:
    """One node of a multi-node variant (experiment/launch.py): node 0 runs the variant as ``variant_task`` does,
    as node 0 of ``rendezvous``, and leaves its done file; another node runs torchrun's agent (None)."""
    if rendezvous.node_rank == 0:
        spec = variant_dir(Path(out), variant_id) / "variant.json"
        before = spec.stat().st_mtime_ns if spec.exists() else None
        with launch.hosted_store(rendezvous, launch.NODE_GRACE_S):  # open until the other nodes' agents exit
            try:
                return variant_task(out, exp, variant_id, isolation, 0, (*env, *rendezvous.env()))
            finally:  # a new variant.json: the runner launched the worker (runner._run_one writes it first)
                after = spec.stat().st_mtime_ns if spec.exists() else None
                launch.mark_done(Path(out), rendezvous.run_id, after is not None and after != before)
    from greentrain.experiment.ranks import process_threads

    v = next(x for x in exp.variants if x.variant_id == variant_id)
    threads = process_threads(v.job.num_threads, v.job.devices, {**os.environ, **dict(env)}) or 1
    launch.run_agent(Path(out), variant_dir(Path(out), variant_id) / "variant.json", v.job.devices, threads,
                     rendezvous, env, grace_s=launch.NODE_GRACE_S, poll_s=launch.NODE_POLL_S)
    return None


def ray_task_env() -> tuple[tuple[str, str], ...]:
    """In a Ray task: the torch threads of its processes from the CPUs Ray gave it. Ray's ``num_cpus`` only
    schedules (the task's process sees every core of its node), so without this a variant's ranks would each
    take every core: THREADS_ENV is divided among its ranks as a local pool worker's share is (ranks.py)."""
    import ray

    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0)
    if cpus < 1:
        return ()
    n = str(int(cpus))
    return ((THREADS_ENV, n), ("OMP_NUM_THREADS", n))


def ray_variant_task(out: str, exp: Experiment, variant_id: str, isolation: str,
                     max_retries: int) -> VariantResult:
    """``variant_task`` as a Ray task, its threads from the CPUs Ray gave it. A Ray worker runs greentrain's
    tasks only, one after another: its variants may freeze the imports (ranks.own_process)."""
    from greentrain.experiment import ranks

    ranks.own_process()
    return variant_task(out, exp, variant_id, isolation, max_retries, ray_task_env())


def ray_node_task(out: str, exp: Experiment, variant_id: str, isolation: str,
                  rendezvous: Rendezvous) -> VariantResult | None:
    """``node_task`` as a Ray task in its bundle of the variant's placement group."""
    return node_task(out, exp, variant_id, isolation, rendezvous, ray_task_env())


def free_endpoint() -> str:
    """``ip:port`` of a free port on this Ray node (bundle 0's: the rendezvous of a multi-node variant)."""
    import socket

    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return f"{ray.util.get_node_ip_address()}:{port}"


def slurm_node_task(out: str, exp: Experiment, variant_id: str, isolation: str) -> VariantResult | None:
    """``node_task`` in one task of a Slurm job of several nodes (one task per node): its rendezvous from the
    job's environment and node list (submitit's JobEnvironment expands SLURM_JOB_NODELIST)."""
    submitit = import_submitit()
    rendezvous = launch.slurm_rendezvous(os.environ, list(submitit.JobEnvironment().hostnames))
    return node_task(out, exp, variant_id, isolation, rendezvous)


def _failed(v: Variant, reason: str) -> VariantResult:
    return VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, axis_values=v.axis_values,
                         seed=v.seed, status="failed", reason=reason[:500])


def run_on_cluster(exp: Experiment, chosen: list[Variant], opts: Any,
                   after_variant: Callable[[Path], None] | None) -> list[VariantResult]:
    """The chosen variants on Ray or Slurm; their results in the experiment's order."""
    run = _ray if opts.executor == "ray" else _slurm
    done = run(exp, chosen, opts, after_variant)
    return [done[v.variant_id] for v in chosen]


def _ray(exp: Experiment, chosen: list[Variant], opts: Any,
         after_variant: Callable[[Path], None] | None) -> dict[str, VariantResult]:
    import ray

    most = max((v.job.nodes for v in chosen), default=1)
    local = not (opts.ray_address or os.environ.get("RAY_ADDRESS")) and not ray.is_initialized()
    if most > 1 and local:  # before the 30 s of starting a local cluster
        raise ConfigError("runtime.nodes", most, "needs a Ray cluster of as many nodes (its address): a local one "
                          "started here has this one node")
    if not ray.is_initialized():
        try:
            ray.init(address=opts.ray_address or None, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise ConfigError("executor.ray_address", opts.ray_address or "(local)", f"cannot connect: {e}") from None
    gpus = ray.cluster_resources().get("GPU", 0) > 0
    alive = sum(1 for n in ray.nodes() if n.get("Alive"))
    most = max((v.job.nodes for v in chosen), default=1)
    if most > alive:
        raise ConfigError("runtime.nodes", most, f"exceeds the {alive} node(s) of the Ray cluster (a multi-node "
                          "variant takes one bundle on each of runtime.nodes nodes: STRICT_SPREAD)")
    task = ray.remote(ray_variant_task)
    refs = {task.options(**ray_resources(v.job.devices, v.job.num_threads, gpus), max_retries=opts.max_retries,
                         retry_exceptions=False).remote(str(opts.out_dir), exp, v.variant_id, opts.isolation,
                                                        opts.max_retries): v for v in chosen if v.job.nodes == 1}
    done: dict[str, VariantResult] = {}
    groups = [v for v in chosen if v.job.nodes > 1]
    with ThreadPoolExecutor(max_workers=max(1, len(groups)), thread_name_prefix="greentrain-nodes") as pool:
        futures = [(v, pool.submit(_ray_nodes, exp, v, opts, gpus)) for v in groups]
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            v = refs[ready[0]]
            done[v.variant_id] = _ray_result(v, ready[0])
            if after_variant is not None:
                after_variant(opts.out_dir)
        for v, fut in futures:
            done[v.variant_id] = fut.result()
            if after_variant is not None:
                after_variant(opts.out_dir)
    return done


def _ray_result(v: Variant, ref: Any) -> VariantResult:
    """A Ray task's result; a refusal raised again; a task that failed or was lost as a failed variant."""
    import ray

    try:
        r = ray.get(ref)
        assert isinstance(r, VariantResult)
        return r
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, GreentrainError):
            raise e.cause from None
        return _failed(v, f"ray task failed: {type(e.cause).__name__}: {e.cause}")
    except ray.exceptions.RayError as e:  # worker or node lost after its retries
        return _failed(v, f"ray: {type(e).__name__}: {str(e).splitlines()[0]}")


def _ray_nodes(exp: Experiment, v: Variant, opts: Any, gpus: bool) -> VariantResult:
    """A multi-node variant on Ray: a STRICT_SPREAD placement group of ``runtime.nodes`` bundles (one node each,
    a variant task's resources each), the rendezvous at a free port of bundle 0's node, one ``ray_node_task`` per
    bundle; node 0's result. A node lost: the whole group placed and run again, up to ``--max-retries`` times."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    res = ray_resources(v.job.devices, v.job.num_threads, gpus)
    bundle = {"CPU": res["num_cpus"], **({"GPU": res["num_gpus"]} if res["num_gpus"] else {})}
    for attempt in range(opts.max_retries + 1):
        pg = placement_group([bundle] * v.job.nodes, strategy="STRICT_SPREAD")
        try:
            if not ray.wait([pg.ready()], timeout=PLACEMENT_WAIT_S)[0]:
                return _failed(v, f"ray: {v.job.nodes} nodes of {bundle} each not placed in {PLACEMENT_WAIT_S:.0f} s")
            r = _ray_group(exp, v, opts, res, pg)
        finally:
            remove_placement_group(pg)
        lost = r.status == "failed" and r.reason.startswith("ray: ")  # a node or worker lost, not the variant
        if not lost or attempt == opts.max_retries:
            return r
    raise AssertionError("unreachable: the last attempt returns")


def _ray_group(exp: Experiment, v: Variant, opts: Any, res: dict[str, int], pg: Any) -> VariantResult:
    """One launch of a multi-node variant in its placed group: node 0's result; the other nodes' agents given
    their grace (experiment/launch.py), then cancelled."""
    import uuid

    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    def on(i: int) -> PlacementGroupSchedulingStrategy:
        return PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)

    endpoint = ray.get(ray.remote(free_endpoint).options(num_cpus=0, scheduling_strategy=on(0)).remote())
    run_id = f"ray-{uuid.uuid4().hex[:12]}"
    task = ray.remote(ray_node_task)
    refs = [task.options(**res, scheduling_strategy=on(i), max_retries=0).remote(
        str(opts.out_dir), exp, v.variant_id, opts.isolation,
        Rendezvous(nnodes=v.job.nodes, node_rank=i, endpoint=endpoint, run_id=run_id)) for i in range(v.job.nodes)]
    r = _ray_result(v, refs[0])
    ray.wait(refs[1:], num_returns=len(refs) - 1, timeout=launch.NODE_GRACE_S + 30)
    for ref in refs[1:]:
        ray.cancel(ref, force=True)  # an agent past its grace (its node 0 is done); a finished one: no-op
    return r


def ray_resources(devices: int, num_threads: int | None, gpus: bool) -> dict[str, int]:
    """One variant's Ray task: a CPU per torch thread of each of its processes, and a GPU per device when the
    cluster has GPUs (runtime.devices; the processes are torchrun's)."""
    return {"num_cpus": (num_threads or 1) * devices, "num_gpus": devices if gpus else 0}


def _slurm(exp: Experiment, chosen: list[Variant], opts: Any,
           after_variant: Callable[[Path], None] | None) -> dict[str, VariantResult]:
    executor, params = slurm_executor(chosen, opts, opts.out_dir / "slurm")
    done: dict[str, VariantResult] = {}
    todo = list(chosen)
    for attempt in range(opts.max_retries + 1):
        jobs: list[tuple[Variant, Any]] = []
        for key, group in arrays(todo).items():
            executor.update_parameters(**slurm_resources(params, *key))
            n = len(group)
            args: list[list[Any]] = [[str(opts.out_dir)] * n, [exp] * n, [v.variant_id for v in group],
                                     [opts.isolation] * n]
            # several nodes: every task of the job runs slurm_node_task (node 0's returns the result)
            submitted = (executor.map_array(slurm_node_task, *args) if key[2] > 1 else
                         executor.map_array(variant_task, *args, [0] * n))
            jobs += zip(group, submitted, strict=True)
        again = []
        for v, job in jobs:
            try:
                done[v.variant_id] = job.results()[0]  # task 0's: node 0 of a job of several nodes
            except GreentrainError:
                raise
            except Exception as e:  # submitit's FailedJobError, UncompletedJobError (preempted, timed out)
                if attempt < opts.max_retries:
                    again.append(v)
                else:
                    done[v.variant_id] = _failed(v, f"slurm job {job.job_id}: {type(e).__name__}: "
                                                    f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
            if after_variant is not None:
                after_variant(opts.out_dir)
        todo = again
        if not todo:
            break
    return done
