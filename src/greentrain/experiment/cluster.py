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
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError, GreentrainError
from greentrain.experiment.results import VariantResult, read_result
from greentrain.experiment.spec import Experiment, Variant

SLURM_PREFIXED = ("partition", "account", "qos", "constraint", "exclude", "array_parallelism")


def variant_task(out: str, exp: Experiment, variant_id: str, isolation: str, max_retries: int) -> VariantResult:
    """One variant, on whichever node the scheduler chose (module level: Ray and submitit pickle it)."""
    from greentrain.experiment import runner

    folder = Path(out)
    v = next(x for x in exp.variants if x.variant_id == variant_id)
    results = [read_result(runner.variant_dir(folder, x.variant_id) / "result.json") for x in exp.variants]
    spent = runner.budget_spent(exp, folder, [r for r in results if r is not None and r.status != "pending"])
    r = runner.run_in_folder(folder, v, isolation, runner.NoProgress(), spent, max_retries=max_retries)
    assert r is not None  # waited for the claim
    return r


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

    if not ray.is_initialized():
        try:
            ray.init(address=opts.ray_address or None, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        except (ConnectionError, ValueError, RuntimeError) as e:
            raise ConfigError("executor.ray_address", opts.ray_address or "(local)", f"cannot connect: {e}") from None
    gpus = ray.cluster_resources().get("GPU", 0) > 0
    task = ray.remote(variant_task)
    refs = {task.options(**ray_resources(v.job.devices, v.job.num_threads, gpus), max_retries=opts.max_retries,
                         retry_exceptions=False).remote(str(opts.out_dir), exp, v.variant_id, opts.isolation,
                                                        opts.max_retries): v for v in chosen}
    done: dict[str, VariantResult] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        v = refs[ready[0]]
        try:
            done[v.variant_id] = ray.get(ready[0])
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, GreentrainError):
                raise e.cause from None
            done[v.variant_id] = _failed(v, f"ray task failed: {type(e.cause).__name__}: {e.cause}")
        except ray.exceptions.RayError as e:  # worker or node lost after its retries
            done[v.variant_id] = _failed(v, f"ray: {type(e).__name__}: {str(e).splitlines()[0]}")
        if after_variant is not None:
            after_variant(opts.out_dir)
    return done


def ray_resources(devices: int, num_threads: int | None, gpus: bool) -> dict[str, int]:
    """One variant's Ray task: a CPU per torch thread of each of its processes, and a GPU per device when the
    cluster has GPUs (runtime.devices; the processes are torchrun's)."""
    return {"num_cpus": (num_threads or 1) * devices, "num_gpus": devices if gpus else 0}


def slurm_resources(params: dict[str, Any], devices: int, num_threads: int | None) -> dict[str, Any]:
    """submitit parameters of the array of variants of ``devices`` devices: one task per job (torchrun starts the
    processes), ``gpus_per_node`` raised to the devices on a GPU cluster (one the user named gpus_per_node for),
    else ``cpus_per_task`` raised to a CPU per thread of each process."""
    out = {**params, "tasks_per_node": 1}
    if "gpus_per_node" in params:
        out["gpus_per_node"] = max(int(params["gpus_per_node"]), devices)
    elif devices > 1:
        out["cpus_per_task"] = max(int(params.get("cpus_per_task", 1)), devices * (num_threads or 1))
    return out


def slurm_parameters(pairs: tuple[tuple[str, str], ...]) -> tuple[str | None, dict[str, Any]]:
    """``--slurm KEY=VALUE`` pairs as submitit's cluster and AutoExecutor parameters (numbers as ints)."""
    cluster = None
    params: dict[str, Any] = {}
    for key, value in pairs:
        if key == "cluster":
            cluster = value
            continue
        name = f"slurm_{key}" if key in SLURM_PREFIXED else key
        params[name] = int(value) if value.isdigit() else value
    return cluster, params


def _arrays(variants: list[Variant]) -> dict[tuple[int, int | None], list[Variant]]:
    """The variants by the resources their Slurm jobs ask (devices, threads), in order."""
    out: dict[tuple[int, int | None], list[Variant]] = {}
    for v in variants:
        out.setdefault((v.job.devices, v.job.num_threads), []).append(v)
    return out


def _slurm(exp: Experiment, chosen: list[Variant], opts: Any,
           after_variant: Callable[[Path], None] | None) -> dict[str, VariantResult]:
    import submitit

    cluster, params = slurm_parameters(opts.slurm)
    try:
        executor = submitit.AutoExecutor(folder=str(opts.out_dir / "slurm"), cluster=cluster)
        for devices, threads in _arrays(chosen):  # every array's parameters checked before any is submitted
            executor.update_parameters(**slurm_resources(params, devices, threads))
    except (ValueError, TypeError, RuntimeError) as e:
        raise ConfigError("slurm", " ".join(f"{k}={v}" for k, v in opts.slurm), str(e).splitlines()[0]) from None
    done: dict[str, VariantResult] = {}
    todo = list(chosen)
    for attempt in range(opts.max_retries + 1):
        jobs: list[tuple[Variant, Any]] = []
        for (devices, threads), group in _arrays(todo).items():
            executor.update_parameters(**slurm_resources(params, devices, threads))
            n = len(group)
            jobs += zip(group, executor.map_array(variant_task, [str(opts.out_dir)] * n, [exp] * n,
                                                  [v.variant_id for v in group], [opts.isolation] * n, [0] * n),
                        strict=True)
        again = []
        for v, job in jobs:
            try:
                done[v.variant_id] = job.result()
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
