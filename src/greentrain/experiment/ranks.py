"""Several devices per variant (``runtime.devices: N``): the variant's N processes under torchrun.

The runner starts ``python -m greentrain.experiment.ranks VARIANT.json`` (a light launcher: no torch imported
twice), which replaces itself (``exec``, same pid, its parent-death signal kept) by torchrun (so does a worker
started on such a variant by hand): ``python -m torch.distributed.run --standalone
--nproc-per-node N -m greentrain.experiment.worker VARIANT.json``, one process per device, a rendezvous on a free
local port. Each process is a worker again: the HF Trainer sees torchrun's environment and trains data parallel
(DDP: NCCL on GPUs, gloo on CPU through accelerate's MULTI_CPU state with ``use_cpu``); the global batch is
N x per_device_train_batch_size x gradient_accumulation_steps. With ``runtime.nodes: M`` (ray or slurm) torchrun
runs as one node of M (``--nnodes M`` and a c10d rendezvous on node 0, experiment/launch.py): M x N ranks.

* Records: every rank runs each phase's Tracker, rank 0 into ``<phase>.jsonl``, rank r into
  ``<phase>.rank<r>.jsonl``; at a phase's end rank 0 gathers the ranks' summaries (measure/distributed.py:
  energy, FLOPs and tokens summed over the ranks, times the slowest rank's, memory the largest device's).
* Generation (summarization): each rank decodes its contiguous share of the test split; rank 0 gathers the
  shares in order and scores ROUGE alone. Rank 0 alone writes result.json and predictions.jsonl.
* Threads: on CPU each rank takes its share of the worker's cores (``cores // (jobs x N)`` in a local pool of
  ``--jobs``); ``runtime.num_threads``, when given, is per rank.
* Lifetimes: a rank is killed when torchrun's agent dies, the agent (the worker's pid) when the runner dies
  (PR_SET_PDEATHSIG), so a killed runner leaves no rank behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from greentrain.experiment.executors import THREADS_ENV
from greentrain.experiment.launch import PARENT_ENV, Rendezvous, rendezvous_from_env
from greentrain.experiment.launch import torchrun_command as _torchrun_command
from greentrain.experiment.pruning import TRIAL_ENV

T = TypeVar("T")


PROCESS: dict[str, bool] = {"owned": False, "frozen": False}  # own_process; worker._freeze_imports


def own_process() -> None:
    """Say that this process runs greentrain's experiment and nothing else (`experiment run`, a Ray worker): a
    variant run in it may then freeze the imports (worker._freeze_imports). A caller's own process (the Python
    API, submitit's debug cluster) is left as it is: frozen objects are never collected. A submitit job runs one
    variant: nothing to gain."""
    PROCESS["owned"] = True


def under_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a rank torchrun started (its agent sets TORCHELASTIC_RUN_ID and LOCAL_RANK)."""
    env = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in env and "LOCAL_RANK" in env


def rank_world(environ: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """(rank, world size, local world size) from torchrun's environment; (0, 1, 1) outside torchrun."""
    env = os.environ if environ is None else environ
    if not under_torchrun(env):
        return 0, 1, 1
    world = int(env.get("WORLD_SIZE", "1"))
    return int(env.get("RANK", "0")), world, int(env.get("LOCAL_WORLD_SIZE", str(world)))


def jsonl_name(phase: str, environ: Mapping[str, str] | None = None) -> str:
    """The record file of one phase in this process: rank 0 (or a single process) ``<phase>.jsonl``, rank r
    ``<phase>.rank<r>.jsonl``."""
    rank, _, _ = rank_world(environ)
    return f"{phase}.jsonl" if rank == 0 else f"{phase}.rank{rank}.jsonl"


def phase_tracker(out_dir: Path, phase: str) -> Any:
    """The Tracker of one phase in this process (its record: ``jsonl_name``; rank 0 gathers the ranks')."""
    from greentrain.measure.tracker import Tracker

    return Tracker(None, out_dir=out_dir, jsonl_name=jsonl_name(phase), write_outputs=False, print_summary=False,
                   count_flops=False)


def process_threads(num_threads: int | None, local_ranks: int, environ: Mapping[str, str] | None = None,
                    cores: int | None = None) -> int | None:
    """Torch threads of each of ``local_ranks`` processes: ``runtime.num_threads`` when given; else the pool's
    share of the cores (THREADS_ENV) divided among them; else the cores divided among them; None: torch's default
    (one process, no pool)."""
    env = os.environ if environ is None else environ
    if num_threads is not None:
        return num_threads
    local = max(1, local_ranks)
    given = env.get(THREADS_ENV, "")
    if given.isdigit():
        return max(1, int(given) // local)
    if local > 1:
        n = cores if cores is not None else len(os.sched_getaffinity(0))
        return max(1, n // local)
    return None


def torchrun_command(spec_path: Path, devices: int, python: str | None = None,
                     rendezvous: Rendezvous | None = None) -> list[str]:
    """torchrun over the worker module for one variant: ``devices`` processes on this node, alone, or as one
    node of a multi-node launch (experiment/launch.py)."""
    return _torchrun_command(spec_path, devices, rendezvous, python)


def launch(spec_path: Path, job: Mapping[str, Any], parent_env: str = PARENT_ENV) -> str:
    """A worker whose job asks several devices or nodes, outside torchrun: replaced by torchrun (no return); a
    refusal (field=value: rule) when it cannot be; "" for a one-device job or a rank."""
    runtime = job.get("runtime") or {}
    devices = int(runtime.get("devices", 1))
    nodes = int(runtime.get("nodes", 1))
    if (devices == 1 and nodes == 1) or under_torchrun():
        return ""
    if os.environ.get(TRIAL_ENV):
        field = f"runtime.nodes={nodes}" if nodes > 1 else f"runtime.devices={devices}"
        return (f"{field}: a pruned search's trials train on one device (each rank would decide to prune on its "
                "own)")
    here = rendezvous_from_env()
    if nodes > 1 and (here is None or here.nnodes != nodes):
        return (f"runtime.nodes={nodes}: a multi-node variant runs under --executor ray or slurm, which start one "
                "task per node and give each its rendezvous")
    exec_torchrun(spec_path, devices, parent_env, runtime.get("num_threads"), here if nodes > 1 else None)
    return ""  # not reached: exec replaced this process


def exec_torchrun(spec_path: Path, devices: int, parent_env: str, num_threads: int | None,
                  rendezvous: Rendezvous | None = None) -> None:
    """Replace this worker by torchrun (never returns): the ranks' parent is this pid (``parent_env`` tells them),
    each with its share of the threads (OMP_NUM_THREADS, which torchrun would otherwise set to 1 with a warning)."""
    env = dict(os.environ)
    env[parent_env] = str(os.getpid())
    env["OMP_NUM_THREADS"] = str(process_threads(num_threads, devices, env) or 1)
    sys.stdout.flush()
    sys.stderr.flush()
    cmd = torchrun_command(spec_path, devices, rendezvous=rendezvous)
    os.execve(cmd[0], cmd, env)


def rank_killed(stderr: str) -> bool:
    """Whether torchrun's report names a rank killed by a signal (the OOM killer, a preemption) as the root cause
    of its failure: ``Root Cause (first observed failure): ... exitcode  : -9``; a rank that raised exits 1."""
    found = re.search(r"Root Cause \(first observed failure\):.*?exitcode\s*:\s*(-?\d+)", stderr, re.DOTALL)
    return found is not None and int(found.group(1)) < 0


def die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG; kept across exec, so torchrun's
    agent inherits it). SIGKILL, not SIGTERM: a library may handle SIGTERM (a worker outlived its killed runner
    with SIGTERM); the records lose at most 0.5 s."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent_pid:  # the parent died before the call above
        os._exit(1)


def share(items: Sequence[T], rank: int, world: int) -> Sequence[T]:
    """Rank ``rank``'s contiguous share of ``items`` (the first ``len % world`` ranks take one more)."""
    base, extra = divmod(len(items), world)
    start = rank * base + min(rank, extra)
    return items[start:start + base + (rank < extra)]


def gather_in_order(mine: list[Any]) -> list[Any] | None:
    """Every rank's list, concatenated in rank order, on rank 0 (None on the others); ``mine`` itself when
    torch.distributed is not running."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return mine
    rank = dist.get_rank()
    parts: list[Any] | None = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object(mine, parts, dst=0)
    return [x for part in parts for x in part] if parts is not None else None


@contextlib.contextmanager
def eval_loss_per_rank(args: Any) -> Iterator[None]:
    """Evaluate with ``average_tokens_across_devices`` off: with it (transformers' default) a DDP evaluation's
    eval_loss is world_size x the loss (huggingface/transformers#35078: ``compute_loss`` multiplies by the number
    of processes, which only the training's gradient averaging cancels); off, each rank's loss is its own mean and
    the Trainer averages the ranks' (equal shares of the split: fixed padding)."""
    flag = getattr(args, "average_tokens_across_devices", None)
    if flag is None:
        yield
        return
    args.average_tokens_across_devices = False
    try:
        yield
    finally:
        args.average_tokens_across_devices = flag


def finish() -> None:
    """Close the process group accelerate opened (each rank under torchrun, after its last collective; an inline
    run leaves its caller's process group alone)."""
    if not under_torchrun():
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(Exception):
            dist.barrier()
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """``python -m greentrain.experiment.ranks VARIANT.json``: the runner's launcher of a variant of several
    devices; exits 2 with one line when it cannot launch, else becomes torchrun."""
    import json

    args = sys.argv[1:] if argv is None else argv
    die_with_parent(int(os.environ.get(PARENT_ENV, os.getppid())))
    path = Path(args[0])
    variant = json.loads(path.read_text(encoding="utf-8"))
    refused = launch(path, variant["job"], PARENT_ENV) or f"runtime.devices: {path} asks one device"
    print(f"greentrain experiment: error: variant {variant['variant_id']}: {refused}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
