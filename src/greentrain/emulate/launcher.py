"""Start the ranks and run emulation cases on them.

Two ways in:
  * standalone: N processes started with torch.multiprocessing, rendezvous through a TCPStore that the
    parent hosts on a fresh port of 127.0.0.1 (port 0: the OS picks a free one, no race), told to the ranks
    once they run. On Linux with gloo the ranks are forked from this process, which has imported torch, before
    any other thread runs here (a forkserver would import torch a second time: 1.5 to 3 s per call on 2
    cores); with NCCL (CUDA does not survive a fork) and on other systems, from a forkserver that imported
    torch once, or spawned where there is none;
  * under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR set): this process is one rank of an existing
    job; results are gathered to rank 0.
Several cases run one after the other in one launch (start-up, i.e. importing torch in every rank, is paid
once). A rank that raises, exits or does not finish within ``timeout_s`` fails the whole run with one line;
every rank is then killed and joined, so no process outlives the call.
"""

from __future__ import annotations

import os
import queue as queue_module
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from greentrain.emulate import ffn, matmul, mesh3d, mlp, pipeline
from greentrain.emulate.cases import (
    REL_TOLERANCE,
    Case,
    FaultCase,
    FfnCase,
    MatMulCase,
    MeshStepCase,
    MlpCase,
    PipelineCase,
)
from greentrain.emulate.common import Checker
from greentrain.emulate.memory import check_memory
from greentrain.emulate.mesh import MeshContext
from greentrain.emulate.recorder import CollectiveImpl, Recorder
from greentrain.emulate.results import EmulationResult, RankResult
from greentrain.emulate.sharding import Mesh2D
from greentrain.errors import ConfigError, GreentrainError

Job = tuple[Case, bool]  # a case, and whether the recorder records (False: raw torch.distributed calls)


class EmulationError(GreentrainError):
    """A rank crashed, exited or hung: the whole emulation failed."""


class Progress(Protocol):
    """Where the launcher says what it is doing (the CLI's spinner: report/emulate.py)."""

    def phase(self, text: str) -> None:
        """The phase now running; resumes the display after ``quiet``."""

    def quiet(self) -> None:
        """Stop any thread of the display now: the ranks are about to be forked from this process."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchOptions:
    backend: str = "gloo"
    timeout_s: float = 60.0
    collectives: CollectiveImpl = "native"

    def __post_init__(self) -> None:
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError("backend", self.backend, "must be gloo or nccl")
        if not self.timeout_s > 0:
            raise ConfigError("timeout-s", self.timeout_s, "must be > 0")
        if self.collectives not in ("native", "ring"):
            raise ConfigError("collectives", self.collectives, "must be native or ring")


def max_local_ranks() -> int:
    """Ranks this machine spawns itself: each is a process with torch loaded (a few hundred MB)."""
    return max(16, 4 * (os.cpu_count() or 1))


def under_torchrun() -> bool:
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"))


def emulate(cases: Sequence[Case], options: LaunchOptions | None = None, *, record: bool = True,
            progress: Progress | None = None) -> list[EmulationResult]:
    """Run ``cases`` on one set of ranks; one result per case (empty on ranks > 0 under torchrun)."""
    return run_jobs([(c, record) for c in cases], options or LaunchOptions(), progress=progress)


def run_jobs(jobs: Sequence[Job], options: LaunchOptions, *,
             progress: Progress | None = None) -> list[EmulationResult]:
    if not jobs:
        raise ConfigError("cases", 0, "nothing to emulate")
    world = jobs[0][0].world_size
    for case, _ in jobs:
        if case.world_size != world:
            raise ConfigError("cases", case.label, f"needs {case.world_size} ranks; the launch has {world}")
    if options.backend == "nccl" and not torch.cuda.is_available():
        raise ConfigError("backend", "nccl", "needs CUDA, which this machine does not have; use gloo")
    limit = max_local_ranks()
    if not under_torchrun() and world > limit:
        raise ConfigError("mesh", world, f"needs {world} ranks; at most {limit} run as local processes here "
                                         "(4 per CPU core, at least 16): launch more under torchrun on several hosts, "
                                         "or count the mesh in one process (the counting mode, on PyTorch's fake "
                                         "process group)")
    check_memory([case for case, _ in jobs], world)
    per_rank = (_run_in_group(jobs, options, world) if under_torchrun()
                else _spawn(jobs, options, world, progress))
    if not per_rank:
        return []
    return [EmulationResult(label=case.label, policy=_policy(case), backend=options.backend, world_size=world,
                            ranks=tuple(per_rank[r][i] for r in range(world)), tolerance=REL_TOLERANCE)
            for i, (case, _) in enumerate(jobs)]


def _policy(case: Case) -> str:
    return case.derived_policy.value if isinstance(case, MatMulCase) else case.policy


# -- one rank ---------------------------------------------------------------------------------------------------
def _device(backend: str, local_rank: int) -> torch.device:
    if backend == "nccl":
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _run_case(case: Case, record: bool, options: LaunchOptions, device: torch.device,
              meshes: dict[Mesh2D, MeshContext]) -> RankResult:
    rank = dist.get_rank()
    rec = Recorder(device=device, enabled=record, collectives=options.collectives)
    if isinstance(case, FaultCase):
        if rank == case.rank and case.kind == "raise":
            raise RuntimeError(f"injected fault on rank {rank}")
        while rank == case.rank:  # "hang"
            time.sleep(1.0)
        dist.barrier()
        time_s, checker = 0.0, Checker()
    elif isinstance(case, PipelineCase):
        time_s, checker = pipeline.run(case, rank, rec)
    elif isinstance(case, MeshStepCase):
        time_s, checker = mesh3d.run_on_world(case, rank, rec)
    else:
        mesh = Mesh2D(x_size=1, y_size=case.tp) if isinstance(case, MlpCase) else case.mesh
        if mesh not in meshes:
            meshes[mesh] = MeshContext(mesh, device)
        ctx = meshes[mesh]
        if isinstance(case, MatMulCase):
            time_s, checker = matmul.run(case, ctx, rec)
        elif isinstance(case, FfnCase):
            time_s, checker = ffn.run(case, ctx, rec)
        else:
            time_s, checker = mlp.run(case, ctx, rec)
    return RankResult(rank=rank, stats=rec.statistics(), collectives=tuple(rec.records),
                      comm_time_s=rec.comm_time_s(), time_s=time_s, max_abs_error=checker.max_abs_error,
                      max_rel_error=checker.max_rel_error)


def _run_all(jobs: Sequence[Job], options: LaunchOptions, device: torch.device,
             say: Any = None) -> list[RankResult]:
    """Every job in order on this rank; ``say(text)`` (rank 0 of a local launch) reports each case."""
    meshes: dict[Mesh2D, MeshContext] = {}
    out = []
    for i, (case, record) in enumerate(jobs):
        if say is not None:
            say(f"case {i + 1}/{len(jobs)}: {case.label}" if len(jobs) > 1 else f"running {case.label}")
        out.append(_run_case(case, record, options, device, meshes))
    return out


PARENT_POLL_S = 0.2


def _exit_with_parent(parent_pid: int) -> None:
    """A rank's daemon thread: exit at once when the launching process is gone (SIGKILL, a crash). The
    ranks are forked by the forkserver, not by the launcher, so nothing else would stop them before their
    collectives time out; once they exit, the forkserver and the resource tracker (whose pipes they hold)
    exit too."""
    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # pid reused by another user's process: ours is gone
                os._exit(1)

    threading.Thread(target=watch, name="greentrain-parent-watch", daemon=True).start()


def _worker(rank: int, world: int, ports: Any, jobs: Sequence[Job], options: LaunchOptions, out: Any,
            parent_pid: int) -> None:
    # a forked rank inherits the launcher's handlers: SIGTERM/SIGHUP end it; Ctrl-C, which reaches the whole
    # process group, is the launcher's to handle (it stops every rank)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent_pid)
    try:
        if options.backend == "gloo":  # the ranks share the CPU cores: do not oversubscribe them
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        # the parent's deadline enforces timeout_s and names the ranks that did not finish; the process group's
        # own timeout comes later, so a peer's "Timed out" in a barrier never races that message
        timeout = timedelta(seconds=options.timeout_s + 30)
        port = ports.get(timeout=options.timeout_s)
        store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
        device = _device(options.backend, rank)
        dist.init_process_group(options.backend, store=store, rank=rank, world_size=world, timeout=timeout)

        def say(text: str) -> None:
            out.put(("progress", rank, text))

        out.put(("ok", rank, _run_all(jobs, options, device, say if rank == 0 else None)))
        dist.destroy_process_group()
    except BaseException as e:  # report and exit non-zero; the parent stops the others
        line = (str(e).strip().splitlines() or [""])[0][:300]
        out.put(("error", rank, f"{type(e).__name__}: {line}"))
        raise SystemExit(1) from None


# -- the parent -------------------------------------------------------------------------------------------------
def _spawn(jobs: Sequence[Job], options: LaunchOptions, world: int,
           progress: Progress | None) -> list[list[RankResult]]:
    context = _context(options.backend)
    out, ports = context.Queue(), context.Queue()
    procs = [context.Process(target=_worker, args=(r, world, ports, jobs, options, out, os.getpid()),
                             daemon=True, name=f"greentrain-emulate-rank{r}") for r in range(world)]
    finished, store = False, None
    old_handlers = _stop_on_signals()
    try:
        if progress is not None:
            progress.phase(f"starting {world} ranks")
        _prepare(jobs, world, context)
        if progress is not None:
            progress.quiet()  # no other thread in this process while it forks
        for p in procs:
            p.start()
        if progress is not None:
            progress.phase(f"{world} ranks: rendezvous")
        # the store (and its server thread) once the ranks are forked; they read its port from the queue
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=options.timeout_s),
                              wait_for_workers=False)
        for _ in range(world):
            ports.put(store.port)
        results = _collect(procs, out, options.timeout_s, progress)
        finished = True
    finally:
        if progress is not None:
            progress.phase(f"stopping {world} ranks")
        _stop(procs, grace_s=10.0 if finished else 0.0)
        matmul.forget_prepared()
        ffn.forget_prepared()
        del store
        _restore(old_handlers)
    return [results[r] for r in range(world)]


def _prepare(jobs: Sequence[Job], world: int, context: Any) -> None:
    """Ranks forked from this process inherit what it holds: the inputs of the first MatMul case and of the
    first FFN case are drawn here once (matmul.prepare, ffn.prepare), not in every rank."""
    if context.get_start_method() != "fork":
        return
    first_matmul = next((case for case, _ in jobs if isinstance(case, MatMulCase)), None)
    if first_matmul is not None:
        matmul.prepare(first_matmul, world)
    first_ffn = next((case for case, _ in jobs if isinstance(case, FfnCase)), None)
    if first_ffn is not None:
        ffn.prepare(first_ffn)


def _on_signal(signum: int, _frame: Any) -> None:
    print(f"greentrain: emulation stopped by {signal.Signals(signum).name}; stopping the ranks", file=sys.stderr)
    raise SystemExit(128 + signum)  # what a shell reports for a signalled process


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _stop_on_signals() -> dict[int, Any]:
    """SIGTERM/SIGHUP/SIGINT raise in the main thread, so ``_spawn``'s cleanup kills the ranks (the default
    action would end this process at once and leave them to their parent watch; Ctrl-C printed a traceback)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, _on_signal) for s in STOP_SIGNALS}


def _restore(old: dict[int, Any]) -> None:
    for s, handler in old.items():
        signal.signal(s, handler)


def _context(backend: str) -> Any:
    """gloo on Linux: fork this process (torch is imported here already). Else a forkserver that has imported
    torch and greentrain once (each rank a cheap fork of a clean, single-threaded server; later launches in
    this process reuse it); plain spawn where there is none."""
    if backend == "gloo" and sys.platform == "linux":
        return mp.get_context("fork")
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["greentrain.emulate.launcher"])
    return context


def _collect(procs: list[Any], out: Any, timeout_s: float,
             progress: Progress | None = None) -> dict[int, list[RankResult]]:
    deadline = time.monotonic() + timeout_s
    results: dict[int, list[RankResult]] = {}
    while len(results) < len(procs):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            missing = ",".join(str(r) for r in range(len(procs)) if r not in results)
            raise EmulationError(f"rank(s) {missing} did not finish within {timeout_s:g} s (timeout_s); "
                                 f"all {len(procs)} ranks were stopped")
        try:
            status, rank, payload = out.get(timeout=min(0.2, remaining))
        except queue_module.Empty:
            for r, p in enumerate(procs):
                if r not in results and p.exitcode is not None and p.exitcode != 0:
                    raise EmulationError(f"rank {r} exited with code {p.exitcode}; "
                                         f"all {len(procs)} ranks were stopped") from None
            continue
        if status == "progress":
            if progress is not None:
                progress.phase(payload)
            continue
        if status == "error":
            raise EmulationError(f"rank {rank} failed: {payload}; all {len(procs)} ranks were stopped")
        results[rank] = payload
    return results


def _stop(procs: list[Any], grace_s: float) -> None:
    """Join ranks that are finishing; kill any still alive after ``grace_s`` (0 on failure: at once)."""
    deadline = time.monotonic() + grace_s
    for p in procs:
        if p.pid is None:
            continue
        if p.exitcode is None:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def _run_in_group(jobs: Sequence[Job], options: LaunchOptions, world: int) -> list[list[RankResult]]:
    """Inside a torchrun job: run as this rank, gather every rank's results to rank 0."""
    device = _device(options.backend, int(os.environ["LOCAL_RANK"]))
    if not dist.is_initialized():
        dist.init_process_group(options.backend, timeout=timedelta(seconds=options.timeout_s))
    if dist.get_world_size() != world:
        raise ConfigError("cases", world, f"need {world} ranks; torchrun started {dist.get_world_size()}")
    mine = _run_all(jobs, options, device)
    gathered: list[Any] = [None] * world if dist.get_rank() == 0 else []
    dist.gather_object(mine, gathered if dist.get_rank() == 0 else None, dst=0)
    return gathered if dist.get_rank() == 0 else []
