"""`greentrain track -- CMD`: run a training script as a child process and measure it (no torch here).

The parent samples the child's process tree (energy meters, resident memory) into ``track.jsonl``. With
module hooks on (GREENTRAIN_AUTO=1, through the ``measure/autoload`` sitecustomize), each training
process writes its steps and per-module figures to ``steps.jsonl`` (``steps.rank{r}.jsonl`` under
torchrun). At the end both are merged into one Measurement.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.measure.distributed import aggregate
from greentrain.measure.meters import CpuEstimateMeter, default_meters, prepare_estimates, process_tree, tree_rss_bytes
from greentrain.measure.preempt import Supervisor, Watchdog
from greentrain.measure.records import (
    JsonlWriter,
    Sampler,
    clip_samples,
    hardware_info,
    last_run,
    meter_info,
    read_jsonl,
    t0_unix,
)
from greentrain.measure.summary import Measurement, energy_per_step, steps_stats, summarize, with_footprint

AUTOLOAD_DIR = Path(__file__).parent / "autoload"


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def child_env(out_dir: Path, hooks: bool, depth: str, run_id: str = "") -> dict[str, str]:
    env = dict(os.environ)
    env["GREENTRAIN_CHILD"] = "1"
    env["GREENTRAIN_RUN_ID"] = run_id
    env["GREENTRAIN_OUT_DIR"] = str(out_dir.resolve())
    env["GREENTRAIN_DEPTH"] = depth
    if hooks:
        env["GREENTRAIN_AUTO"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(AUTOLOAD_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def prepare_out_dir(out_dir: Path, flag: str = "track.out_dir") -> bool:
    """Create ``out_dir`` if needed (True when created); a one-line error when it cannot hold the outputs."""
    if out_dir.exists():
        require(out_dir.is_dir(), flag, str(out_dir), "must be a directory (it is a file)")
        require(os.access(out_dir, os.W_OK | os.X_OK), flag, str(out_dir), "must be a writable directory")
        return False
    try:
        out_dir.mkdir(parents=True)
    except OSError as e:
        raise ConfigError(flag, str(out_dir), f"cannot be created: {e.strerror}") from None
    return True


@dataclass(frozen=True, slots=True)
class TrackedRun:
    """What ``run_tracked`` saw: the exit status (128+N for signal N, the tracker's own when it was signalled:
    measure/preempt.py) and, when writing track.jsonl failed during the run (a full disk), the OS's reason
    and the run time it happened at (the records before it are kept whole; the command ran to its end)."""

    code: int
    write_error: str = ""
    write_error_at_s: float = 0.0


def check_inputs(command: Sequence[str], cpu_tdp_w: float | None, interval_s: float) -> None:
    """The command exists, the CPU TDP and the sampling interval are in their config.BOUNDS: checked before
    anything is created."""
    if not command:
        raise ConfigError("command", "", "give the command to run after --, e.g. -- python train.py")
    require(cpu_tdp_w is None or cpu_tdp_w > 0, "track.cpu_tdp_w", cpu_tdp_w, "must be > 0")
    if cpu_tdp_w is not None:  # upper end: config.BOUNDS (1e9 W was accepted)
        BOUNDS["cpu_tdp_w"].check(cpu_tdp_w, "track.cpu_tdp_w")
    BOUNDS["sample_interval_s"].check(interval_s, "track.interval_s")
    require(shutil.which(command[0]) is not None, "command", command[0], "not found or not executable")


def run_tracked(command: Sequence[str], out_dir: Path, *, hooks: bool = True, depth: str = "1",
                cpu_tdp_w: float | None = None, interval_s: float = 0.5, stdout_to_stderr: bool = False,
                supervisor: Supervisor | None = None, run_id: str | None = None) -> TrackedRun:
    """Run ``command``, sampling it into out_dir/track.jsonl; returns its exit status and any write error.
    Every input is checked before the command starts; ``stdout_to_stderr`` keeps this process's stdout for
    its own output (``--json``). Records of earlier runs in ``out_dir`` are kept; this run's carry
    ``run_id`` (a new UUID by default), which ``merge`` selects."""
    check_inputs(command, cpu_tdp_w, interval_s)
    created = prepare_out_dir(out_dir)
    run_id = run_id or str(uuid.uuid4())
    sup = supervisor or Supervisor()
    with contextlib.ExitStack() as stack:
        if supervisor is None:
            stack.enter_context(sup)
        watchdog = Watchdog(sup.grace_s)
        stack.callback(watchdog.done)
        prepare_estimates()  # the CPU lookup before the command starts, not between it and the start record
        cpu0 = _children_cpu_s()
        t0 = time.perf_counter()
        try:  # its own process group: signals reach a launcher and its workers together
            child = subprocess.Popen(list(command), env=child_env(out_dir, hooks, depth, run_id),
                                     stdout=2 if stdout_to_stderr else None, process_group=0)
        except OSError as e:
            if created:
                shutil.rmtree(out_dir, ignore_errors=True)
            raise ConfigError("command", command[0], f"cannot start: {e.strerror}") from None
        watchdog.watch(child.pid)
        code, writer = _sample_while_running(child, out_dir, sup, t0, cpu0, command, run_id,
                                             cpu_tdp_w=cpu_tdp_w, interval_s=interval_s)
    t0_monotonic = time.monotonic() - (time.perf_counter() - t0)  # the writer stamps its error on this clock
    at_s = writer.error_t - t0_monotonic if writer.error else 0.0
    return TrackedRun(sup.exit_code(code), writer.error, max(at_s, 0.0))


def _sample_while_running(child: subprocess.Popen[bytes], out_dir: Path, sup: Supervisor, t0: float,
                          cpu0: float, command: Sequence[str], run_id: str, *, cpu_tdp_w: float | None,
                          interval_s: float) -> tuple[int, JsonlWriter]:
    writer = JsonlWriter(out_dir / "track.jsonl")
    meters = default_meters(child.pid, cpu_tdp_w=cpu_tdp_w)
    sampler = Sampler(writer, meters, t0, lambda: tree_rss_bytes(process_tree(child.pid)), interval_s)
    readings = sampler.start()
    now_unix = time.time()
    writer.append({"type": "start", "t_unix": now_unix, "t0_unix": now_unix - (time.perf_counter() - t0),
                   "run_id": run_id, "pid": child.pid, "rank": 0, "cpu_count": os.cpu_count() or 1,
                   "world_size": 1, "argv": list(command), "meters": meter_info(readings),
                   **hardware_info(meters)})
    writer.flush()
    code = sup.wait(child)
    sup.reap_group()
    for m in meters:
        if isinstance(m, CpuEstimateMeter):
            m.settle(_children_cpu_s() - cpu0)
    sampler.stop()
    status = sup.status or ("ok" if code == 0 else f"exit {code if code > 0 else 128 - code}")
    writer.append({"type": "end", "t_s": time.perf_counter() - t0, "status": status, "error": "",
                   "cpu_s": _children_cpu_s() - cpu0})  # the command's processes, once reaped
    writer.close()
    return code, writer


def _cut_at_last_step(records: list[dict[str, Any]],
                      rank_records: Sequence[Sequence[dict[str, Any]]]) -> tuple[list[dict[str, Any]], str]:
    """A killed run (no end record): the tracker's records cut at the last recorded step, on the tracker's
    clock, so that duration and energy cover the steps counted, as in a complete run of those steps. The
    tracker's last samples may outlast the children's last flushed steps (kill -9 of all), or the children
    may outlive the tracker (kill -9 of the tracker, a script that finishes its steps on SIGTERM): then the
    energy after the tracker's last sample is extrapolated at its mean power, and a note says so."""
    if not records or any(r.get("type") == "end" for r in records):
        return records, ""
    t0 = t0_unix(records[0])
    ends = [float(s.get("t_s", 0.0)) + t0_unix(mine[0]) - t0 for mine in rank_records
            for s in mine if s.get("type") == "step"]
    if not ends or t0 <= 0:
        return records, ""
    t_end = max(ends)
    last_sample = max((float(r.get("t_s", 0.0)) for r in records if r.get("type") == "sample"), default=0.0)
    cut, extrapolated = clip_samples(records, t_end)
    note = f"killed: duration and energy cover the run up to its last recorded step ({t_end:.2f} s)"
    if extrapolated and t_end > last_sample:
        note += (f"; energy after the tracker's last sample ({last_sample:.2f} s) extrapolated at its mean "
                 "power")
    return cut, note


def merge(out_dir: Path, site: Site | None, pue: float | None = None) -> Measurement:
    """The Measurement of the last tracked run in ``out_dir``: energy and memory from the parent, steps from
    the children that carry the same run id (records of earlier runs in the folder are not counted)."""
    records = last_run(read_jsonl(out_dir / "track.jsonl"))
    run_id = str(records[0].get("run_id", "")) if records else ""
    rank_records = [mine for p in sorted(out_dir.glob("steps*.jsonl")) if (mine := last_run(read_jsonl(p)))
                    and str(mine[0].get("run_id", "")) == run_id]
    records, cut_note = _cut_at_last_step(records, rank_records)
    parent = summarize(records, None, pue=pue)
    if cut_note:
        parent = replace(parent, notes=(*parent.notes, cut_note))
    ranks = [summarize(mine, None) for mine in rank_records]
    if not ranks:
        m = replace(parent, notes=(*parent.notes, "no step records: run with module hooks (the default) or "
                                                  "call greentrain.Tracker.step() in the script"))
        return with_footprint(m, site)
    steps = aggregate(ranks) if len(ranks) > 1 else ranks[0]
    n = steps.num_steps
    per_s = parent.energy_j / parent.duration_s if parent.duration_s > 0 else 0.0
    # the steady window on the tracker's clock, from the first rank's step records (the others' are the same
    # steps, synchronised by their collectives)
    first = rank_records[0]
    first_steps = [r for r in first if r.get("type") == "step"]
    stats = steps_stats(first_steps)
    t0s = (t0_unix(first[0]), t0_unix(records[0]) if records else 0.0)
    for k in ("steady_from_s", "steady_to_s"):  # no clock to align (a start record lost): the run's mean power
        stats[k] = stats[k] + t0s[0] - t0s[1] if min(t0s) > 0 else 0.0
    per_step_j = energy_per_step(records, stats, len(first_steps), parent.pue, per_s)
    steady_w = per_step_j / steps.step_time_s if steps.step_time_s > 0 else 0.0  # the steps' power, x PUE
    modules = tuple(replace(x, energy_j=(x.forward_s + x.backward_s) * steady_w) for x in steps.modules)
    m = replace(parent, world_size=len(ranks), num_steps=n, step_time_s=steps.step_time_s,
                first_step_time_s=steps.first_step_time_s, forward_s=steps.forward_s,
                backward_s=steps.backward_s, tokens=steps.tokens, tokens_per_s=steps.tokens_per_s,
                samples_per_s=steps.samples_per_s, flop=steps.flop, flop_per_step=steps.flop_per_step,
                flop_per_s=steps.flop_per_s, peak_cuda_bytes=steps.peak_cuda_bytes,
                peak_cuda_reserved_bytes=steps.peak_cuda_reserved_bytes,
                memory_bytes=steps.peak_cuda_bytes if steps.peak_cuda_bytes > 0 else parent.peak_rss_bytes,
                energy_j_per_step=per_step_j, modules=modules,
                notes=(*(x for x in parent.notes if not x.startswith("no step markers")),
                       *(x for x in steps.notes if x.startswith("steady steps"))))
    return with_footprint(m, site)
