"""Slurm through submitit (experiment/cluster.py runs the variants): ``--slurm KEY=VALUE`` as submitit's
parameters, the resources each array of variants asks, and the executor with every array's parameters checked;
no torch and no runner here, so ``runner.start`` checks the parameters before a worker loads torch."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.experiment.extras import import_submitit
from greentrain.experiment.spec import Variant

SLURM_PREFIXED = ("partition", "account", "qos", "constraint", "exclude", "array_parallelism")


def slurm_resources(params: dict[str, Any], devices: int, num_threads: int | None,
                    nodes: int = 1) -> dict[str, Any]:
    """submitit parameters of the array of variants of ``devices`` devices on ``nodes`` nodes: one task per node
    (torchrun starts the processes), ``gpus_per_node`` raised to the devices on a GPU cluster (one the user named
    gpus_per_node for), else ``cpus_per_task`` raised to a CPU per thread of each process."""
    out = {**params, "tasks_per_node": 1, **({"nodes": nodes} if nodes > 1 else {})}
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
        params[name] = int(value) if value.isdigit() else float(value) if key == "mem_gb" else value
    return cluster, params


def arrays(variants: list[Variant]) -> dict[tuple[int, int | None, int], list[Variant]]:
    """The variants by the resources their Slurm jobs ask (devices, threads, nodes), in order."""
    out: dict[tuple[int, int | None, int], list[Variant]] = {}
    for v in variants:
        out.setdefault((v.job.devices, v.job.num_threads, v.job.nodes), []).append(v)
    return out


def slurm_executor(chosen: list[Variant], opts: Any, folder: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """submitit's executor in ``folder`` and its parameters, every array's checked; no folder: checks alone."""
    if folder is None:
        with tempfile.TemporaryDirectory() as tmp:
            return slurm_executor(chosen, opts, Path(tmp))
    submitit = import_submitit()
    cluster, params = slurm_parameters(opts.slurm)
    most = max((v.job.nodes for v in chosen), default=1)
    # no cluster= given: submitit's own choice (local without sbatch), which refused several nodes only at submit
    if most > 1 and (cluster or submitit.AutoExecutor.which()) in ("local", "debug"):
        cluster = cluster or submitit.AutoExecutor.which()
        raise ConfigError("runtime.nodes", most, f"needs a Slurm cluster (slurm cluster={cluster} runs the jobs "
                          "on this one machine)")
    try:
        executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
        for key in arrays(chosen):  # every array's parameters checked before any is submitted
            executor.update_parameters(**slurm_resources(params, *key))
    except (ValueError, TypeError, RuntimeError, NameError, AssertionError) as e:  # submitit's parameter checks
        raise ConfigError("slurm", " ".join(f"{k}={v}" for k, v in opts.slurm), str(e).splitlines()[0]) from None
    return executor, params
