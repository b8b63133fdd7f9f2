"""Where an experiment's variants run, and how several runners share one output folder.

* **Claims.** A variant is run by whoever holds ``DIR/claims/<id>.lock``: the file is created atomically
  (``O_CREAT``) and held with ``fcntl.flock``, which the kernel releases when its holder dies, so a killed runner
  leaves no stale claim. A runner that finds a variant claimed goes on with the others and comes back to it at the
  end (blocking on the claim); it then finds the result the other runner wrote, or runs the variant itself when
  that runner died. So two runners on one folder share the variants, none run twice. On a shared file system the
  claims need working ``flock`` (local disks, NFSv4, Lustre with ``flock``).
* **The folder.** ``DIR/.lock`` is held shared by every runner of the same experiment and exclusively by one that
  starts afresh; a runner of another experiment, or ``--fresh`` while another runner is at work, is refused.
* **Local pool.** ``--jobs N`` runs N variants at once, each in its own worker process: with GPUs, each worker gets
  its own device or device group (``CUDA_VISIBLE_DEVICES`` split into N groups); on a CPU box each worker gets
  ``cores // N`` torch threads (unless the file sets ``runtime.num_threads``). ``--jobs 1`` is the sequential run.
  A variant of ``runtime.devices: D`` needs D GPUs in its worker's group (else one line before anything runs); on
  a CPU box its D ranks share the worker's threads (``cores // (N x D)`` each).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from greentrain.errors import ConfigError
from greentrain.experiment.results import write_text_atomic
from greentrain.experiment.spec import safe_name

CLAIMS = "claims"
THREADS_ENV = "GREENTRAIN_WORKER_THREADS"  # torch threads of a pool's CPU worker (runtime.num_threads wins)
EXECUTORS = ("local", "ray", "slurm")
T = TypeVar("T")


@contextlib.contextmanager
def claim(out: Path, variant_id: str, wait: bool) -> Iterator[bool]:
    """Hold the claim on one variant; yields False (without waiting) when another runner holds it and not ``wait``."""
    path = out / CLAIMS / f"{safe_name(variant_id)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
        yield True
    finally:
        os.close(fd)  # releases the flock


def _holder(f: IO[str]) -> str:
    f.seek(0)
    return f.read().strip() or "?"


@contextlib.contextmanager
def joined(out: Path, manifest: Mapping[str, object], fresh: bool,
           start_fresh: Callable[[Path], None]) -> Iterator[None]:
    """Hold ``DIR/.lock`` shared for a run of the experiment ``manifest`` describes (see the module's text); alone,
    start afresh when asked and write the manifest; with others, only when the folder holds the same experiment."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        f: IO[str] = (out / ".lock").open("a+", encoding="utf-8")
        setup = (out / ".setup.lock").open("a+", encoding="utf-8")
    except OSError as e:
        raise ConfigError("out", str(out), f"cannot be written: {e.strerror or e}") from None
    try:
        with setup:
            fcntl.flock(setup, fcntl.LOCK_EX)  # one runner at a time joins (milliseconds)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
                _join_others(out, f, manifest, fresh)
            if alone:
                f.seek(0)
                f.truncate()
                f.write(str(os.getpid()))
                f.flush()
                if fresh:
                    start_fresh(out)
                write_text_atomic(out / "experiment.json", json.dumps(manifest, indent=1))
                fcntl.flock(f, fcntl.LOCK_SH)  # others of the same experiment may join now
        yield
    finally:
        f.close()


def _join_others(out: Path, f: IO[str], manifest: Mapping[str, object], fresh: bool) -> None:
    try:
        fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ConfigError("out", str(out), f"is locked by another experiment runner (pid {_holder(f)})") from None
    if fresh:
        raise ConfigError("fresh", str(out), f"another runner is at work in the folder (pid {_holder(f)}): "
                          "nothing is deleted")
    try:
        theirs = json.loads((out / "experiment.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        theirs = {}
    if not isinstance(theirs, dict):  # a file greentrain did not write
        theirs = {}
    if theirs.get("spec_hash") != manifest.get("spec_hash"):
        raise ConfigError("out", str(out), f"another runner (pid {_holder(f)}) is running a different experiment "
                          f"({theirs.get('name', '?')}) in the folder; give this one an output folder of its own")


@dataclass(frozen=True, slots=True)
class Slot:
    """One worker of the local pool: its environment (devices, threads)."""

    index: int
    env: tuple[tuple[str, str], ...] = ()


def _gpus(environ: Mapping[str, str]) -> list[str]:
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch
    except ImportError:
        return []
    return [str(i) for i in range(torch.cuda.device_count())]


def local_slots(jobs: int, environ: Mapping[str, str] | None = None, cores: int | None = None) -> list[Slot]:
    """The pool's workers: one device group each on a GPU box, ``cores // jobs`` threads each on a CPU box.
    ``--jobs 1`` leaves the worker's environment as it is."""
    if jobs < 1:
        raise ConfigError("jobs", jobs, "must be at least 1")
    if jobs == 1:
        return [Slot(0)]
    env = os.environ if environ is None else environ
    gpus = _gpus(env)
    if gpus:
        if jobs > len(gpus):
            raise ConfigError("jobs", jobs, f"exceeds the {len(gpus)} GPU(s) here (one device or device group "
                              "per worker)")
        per = len(gpus) // jobs
        return [Slot(i, (("CUDA_VISIBLE_DEVICES", ",".join(gpus[i * per:(i + 1) * per])),)) for i in range(jobs)]
    n = cores if cores is not None else len(os.sched_getaffinity(0))
    threads = str(max(1, n // jobs))
    return [Slot(i, ((THREADS_ENV, threads), ("OMP_NUM_THREADS", threads))) for i in range(jobs)]


def check_device_groups(slots: Sequence[Slot], devices: int, jobs: int,
                        environ: Mapping[str, str] | None = None) -> None:
    """Each worker's device group holds ``devices`` GPUs (a variant's ``runtime.devices``) on a GPU box; on a CPU
    box any number of ranks runs (gloo), each with its share of the worker's threads (experiment/ranks.py)."""
    env = os.environ if environ is None else environ
    every = _gpus(env)
    if not every:
        return
    smallest = min(len([g for g in dict(s.env).get("CUDA_VISIBLE_DEVICES", ",".join(every)).split(",") if g])
                   for s in slots)
    if smallest < devices:
        raise ConfigError("runtime.devices", devices,
                          f"exceeds the {smallest} GPU(s) of each worker's device group ({len(every)} GPU(s) here "
                          f"over {jobs} jobs): run fewer jobs at once or lower runtime.devices")


_LIVE: set[subprocess.Popen[str]] = set()  # the worker processes running now, which run_pool stops on a signal
_STOPPING = threading.Event()


def stopping() -> bool:
    """run_pool was interrupted (a signal to the runner) and is stopping its workers."""
    return _STOPPING.is_set()


@contextlib.contextmanager
def live_worker(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` stopped (SIGTERM: its records flushed) when the runner is interrupted while it runs."""
    _LIVE.add(proc)
    if _STOPPING.is_set():
        proc.terminate()
    try:
        yield proc
    finally:
        _LIVE.discard(proc)


def run_worker(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    """A worker process: its exit status and stderr. Interrupted in this thread, it is killed (as subprocess.run
    does); interrupted in run_pool's, it is stopped by run_pool (a pool's SIGTERM waited for every running variant
    to finish: 12-27 s on two tiny ones, a training run's length on real ones); none starts once stopping."""
    if _STOPPING.is_set():
        return -15, ""
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=dict(env))
    with live_worker(proc):
        try:
            _, stderr = proc.communicate()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    return proc.returncode, stderr


def run_pool(items: Sequence[T], slots: Sequence[Slot],
             run: Callable[[T, Slot, bool], object | None]) -> None:
    """Run ``run(item, slot, wait)`` for every item on the slots, ``len(slots)`` at a time. An item whose
    ``run(..., wait=False)`` returns None (claimed by another runner) is run again at the end with ``wait=True``.
    One slot: in this thread, in order (the sequential run). The stopping flag a signal sets lives until run_pool
    returns: left set, it made every later run in the process (a notebook's, a test's) "stopped" at once."""
    _STOPPING.clear()
    try:
        _run_pool(items, slots, run)
    finally:
        _STOPPING.clear()  # every worker thread has ended (the executors' exits wait for them)


def _run_pool(items: Sequence[T], slots: Sequence[Slot], run: Callable[[T, Slot, bool], object | None]) -> None:
    if len(slots) == 1:
        later = [x for x in items if run(x, slots[0], False) is None]
        for x in later:
            run(x, slots[0], True)
        return
    free: queue.Queue[Slot] = queue.Queue()
    for s in slots:
        free.put(s)
    deferred: list[T] = []
    lock = threading.Lock()

    def one(x: T, wait: bool) -> None:
        s = free.get()
        try:
            if run(x, s, wait) is None:
                with lock:
                    deferred.append(x)
        finally:
            free.put(s)

    for wait, todo in ((False, list(items)), (True, None)):
        with ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="greentrain-variant") as pool:
            batch = todo if todo is not None else [x for x in items if x in deferred]
            futures = [pool.submit(one, x, wait) for x in batch]
            try:
                for fut in futures:
                    fut.result()
            except BaseException as e:  # a refusal: nothing more starts, the running workers finish; a signal:
                for fut in futures:  # they are stopped too (their attempts rerun next time)
                    fut.cancel()
                if not isinstance(e, Exception):
                    _STOPPING.set()
                    for proc in list(_LIVE):
                        proc.terminate()
                raise
