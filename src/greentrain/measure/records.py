"""The run record: a JSONL file appended as things happen, and the sampler thread that feeds and flushes it.

One JSON object per line, each with a ``type``:
  start   {t_unix, t0_unix, run_id, pid, rank, world_size, meters: [{name, measured, source}], cpu_model,
           gpu_model, argv, scheduler: {slurm, kubernetes, torchrun} (each when present: scheduler_identity)}
  sample  {t_s, gpu_energy_j, cpu_energy_j, ram_energy_j, rss_bytes}    every ``interval_s`` (cumulative energy)
  step    {t_s, step, step_time_s, tokens, samples, flop, forward_s, backward_s, peak_memory_bytes}
  modules {modules: [{name, calls, forward_s, backward_s, forward_flop, backward_flop, memory_bytes}]}
  end     {t_s, status: "ok" | "error" | "exit <code>", error}
The file is flushed by the sampler at least every ``interval_s`` (default 0.5 s) and on close, so a
SIGKILL loses at most the last interval; ``read_jsonl`` ignores a torn last line. ``t0_unix`` is the Unix
time of ``t_s = 0``, so the records of two processes (`greentrain track` and its child) share one clock. A
file reused by a later run gets that run's records appended after its own ``start``; ``last_run`` selects
them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from greentrain.config import BOUNDS
from greentrain.errors import ConfigError
from greentrain.measure.meters import EnergyMeter, EnergyReading, cpu_model_name

FLUSH_INTERVAL_S = 0.5
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(separators=...) builds one per call


class JsonlWriter:
    """Thread-safe append-only JSONL file; ``append`` buffers, ``flush`` pushes to the OS.

    A write that fails (full disk, I/O error) never reaches the caller: the training goes on, the records
    already on disk stay whole (a torn last line is skipped by ``read_jsonl``), later records are dropped and
    ``error`` says what happened ("No space left on device") and ``error_t`` when (monotonic seconds)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] | None = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.error = ""
        self.error_t = 0.0

    def _failed(self, exc: OSError) -> None:
        self.error, self.error_t = exc.strerror or type(exc).__name__, time.monotonic()
        f, self._f = self._f, None
        if f is not None:
            with contextlib.suppress(OSError):  # closing flushes the buffer, which fails again
                f.close()

    def append(self, record: dict[str, Any]) -> None:
        line = _ENCODE(record) + "\n"
        with self._lock:
            if self._f is None:
                return
            try:
                self._f.write(line)
                if time.monotonic() - self._last_flush > FLUSH_INTERVAL_S:
                    self._flush_locked()
            except OSError as exc:
                self._failed(exc)

    def _flush_locked(self) -> None:
        if self._f is not None:
            self._f.flush()
            self._last_flush = time.monotonic()

    def flush(self) -> None:
        with self._lock:
            try:
                self._flush_locked()
            except OSError as exc:
                self._failed(exc)

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                try:
                    self._f.flush()
                    self._f.close()
                    self._f = None
                except OSError as exc:
                    self._failed(exc)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """All complete records of a run file (a torn last line, from a killed writer, is skipped)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError("records", str(path), "file does not exist")
    out: list[dict[str, Any]] = []
    lines = p.read_bytes().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):  # a latin-1 or binary file: one line, not a traceback
            if i == len(lines) - 1:
                break  # torn last line
            raise ConfigError("records", f"{path}:{i + 1}", "malformed JSON line") from None
        if isinstance(rec, dict):
            bad = _bad_number(rec)
            if bad:
                raise ConfigError("records", f"{path}:{i + 1}", f"{bad}: must be a finite number >= 0")
            out.append(rec)
    return out


# the record fields the summaries read as numbers (unit suffixes, and counts), checked where a file is read: a
# hand-edited or foreign file gets one line naming the line and field, not a traceback deep in a summary
_NUMBER_SUFFIXES = ("_s", "_j", "_bytes", "_percent", "_w", "_unix", "_flop")
_NUMBER_KEYS = frozenset({"tokens", "samples", "flop", "step", "num_steps", "calls", "rank", "world_size",
                          "model_parallel_size", "cpu_count", "pid"})
_MAY_BE_NULL = frozenset({"gpu_utilization_percent"})


def _bad_number(rec: dict[str, Any]) -> str:
    """``key=value`` of the first numeric field that is not a finite number >= 0 ("" when none), modules too."""
    for key, value in rec.items():
        if isinstance(value, list):
            for item in value:
                bad = _bad_number(item) if isinstance(item, dict) else ""
                if bad:
                    return f"{key}[].{bad}"
            continue
        if key not in _NUMBER_KEYS and not key.endswith(_NUMBER_SUFFIXES):
            continue
        if value is None and key in _MAY_BE_NULL:
            continue
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        if not ok:
            return f"{key}={value!r}"
    return ""


def last_run(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of the last run in a file: from its last ``start`` record on (a folder reused by several
    runs keeps each run's records; none of them is counted in another)."""
    starts = [i for i, r in enumerate(records) if r.get("type") == "start"]
    return list(records[starts[-1]:]) if starts else list(records)


def t0_unix(start: dict[str, Any]) -> float:
    """The Unix time of a record's ``t_s = 0`` (the start record's own time in records written before it)."""
    return float(start.get("t0_unix", start.get("t_unix", 0.0)))


ENERGY_PARTS = ("gpu", "cpu", "ram")  # the samples' cumulative ``{part}_energy_j``: the run's IT energy


def it_energy_at(records: Sequence[dict[str, Any]], t_s: float) -> float:
    """The run's cumulative IT energy (the ENERGY_PARTS of the samples summed) at ``t_s``: interpolated
    between the two samples around it, from 0 J at t = 0 before the first, and held at the last sample's value
    past it (a window that runs past the record is cut by the caller's clip_samples)."""
    points = [(float(r.get("t_s", 0.0)), sum(float(r.get(f"{p}_energy_j", 0.0)) for p in ENERGY_PARTS))
              for r in records if r.get("type") == "sample"]
    lo = (0.0, 0.0)
    for t, e in sorted(points):
        if t >= t_s:
            return lo[1] + (e - lo[1]) * (t_s - lo[0]) / (t - lo[0]) if t > lo[0] else e
        lo = (t, e)
    return lo[1]


def steady_energy_j(records: Sequence[dict[str, Any]], t_from_s: float, t_to_s: float) -> float | None:
    """IT energy between two times of the record (the steady steps: from the end of the warm-up to the end
    of the last step), None where no sample lies at or after ``t_to_s`` (the window is not covered) or the
    cumulative energy went down across it (a counter reset, an edited file)."""
    if t_to_s <= t_from_s or not any(r.get("type") == "sample" and float(r.get("t_s", 0.0)) >= t_to_s
                                     for r in records):
        return None
    energy_j = it_energy_at(records, t_to_s) - it_energy_at(records, t_from_s)
    return energy_j if energy_j >= 0 else None


def clip_samples(records: Sequence[dict[str, Any]], t_end_s: float) -> tuple[list[dict[str, Any]], bool]:
    """The records with the samples cut at ``t_end_s``: the cumulative energies interpolated there between
    the two samples around it, or extrapolated at the mean power since t = 0 past the last sample (then
    the second value is True). Records without samples come back unchanged."""
    samples = [r for r in records if r.get("type") == "sample"]
    if not samples or t_end_s <= 0:
        return list(records), False
    before = [r for r in samples if float(r.get("t_s", 0.0)) <= t_end_s]
    after = [r for r in samples if float(r.get("t_s", 0.0)) > t_end_s]
    hi = after[0] if after else samples[-1]
    # inside the samples: between the two around t_end_s; past the last one: from t = 0 at the mean power
    lo: dict[str, Any] = before[-1] if before and after else {"t_s": 0.0}
    t_lo, t_hi = float(lo.get("t_s", 0.0)), float(hi.get("t_s", 0.0))
    w = (t_end_s - t_lo) / (t_hi - t_lo) if t_hi > t_lo else 1.0
    cut: dict[str, Any] = {"type": "sample", "t_s": t_end_s,
                           "rss_bytes": float((before[-1] if before else hi).get("rss_bytes", 0.0))}
    for key in hi:
        if key.endswith("_energy_j"):
            cut[key] = float(lo.get(key, 0.0)) + w * (float(hi[key]) - float(lo.get(key, 0.0)))
    kept = [r for r in records if r.get("type") != "sample" or float(r.get("t_s", 0.0)) <= t_end_s]
    return [*kept, cut], not after


def meter_info(readings: Sequence[EnergyReading]) -> list[dict[str, Any]]:
    return [{"name": r.name, "measured": r.measured, "source": r.source} for r in readings]


def hardware_info(meters: Sequence[EnergyMeter]) -> dict[str, Any]:
    """What the run ran on, in CodeCarbon's words: ``cpu_model`` (the CPU's name) and ``gpu_model``
    ("2 x NVIDIA H100 80GB HBM3"; "" without a measured GPU), and ``scheduler`` (scheduler_identity) when a
    job scheduler or launcher started the process, recorded in the start record."""
    names: list[str] = [n for m in meters for n in getattr(m, "names", [])]
    gpu = ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
    ids = scheduler_identity()
    return {"cpu_model": cpu_model_name(), "gpu_model": gpu, **({"scheduler": ids} if ids else {})}


# The environment each scheduler sets in a job's processes, as record keys (integers where the variable is one).
# Slurm: sbatch/srun "OUTPUT ENVIRONMENT VARIABLES" (https://slurm.schedmd.com/sbatch.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES);
# torchrun: torch.distributed.elastic's worker environment (https://pytorch.org/docs/stable/elastic/run.html#environment-variables);
# Kubernetes: KUBERNETES_SERVICE_HOST in every pod, HOSTNAME = the pod's name unless the spec sets one, and the
# Downward API's customary POD_NAME / POD_NAMESPACE / NODE_NAME (https://kubernetes.io/docs/concepts/workloads/pods/downward-api/).
_SLURM = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID",
          "step_id": "SLURM_STEP_ID", "job_name": "SLURM_JOB_NAME", "partition": "SLURM_JOB_PARTITION",
          "node_list": "SLURM_JOB_NODELIST", "num_nodes": "SLURM_JOB_NUM_NODES", "proc_id": "SLURM_PROCID",
          "num_tasks": "SLURM_NTASKS", "cluster": "SLURM_CLUSTER_NAME", "restart_count": "SLURM_RESTART_COUNT"}
_TORCHRUN = {"run_id": "TORCHELASTIC_RUN_ID", "rank": "RANK", "local_rank": "LOCAL_RANK", "world_size": "WORLD_SIZE",
             "local_world_size": "LOCAL_WORLD_SIZE", "group_rank": "GROUP_RANK", "restart_count":
             "TORCHELASTIC_RESTART_COUNT", "max_restarts": "TORCHELASTIC_MAX_RESTARTS", "master_addr": "MASTER_ADDR",
             "master_port": "MASTER_PORT"}
_KUBERNETES = {"pod": "POD_NAME", "namespace": "POD_NAMESPACE", "node": "NODE_NAME"}
_K8S_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _fields(env: Mapping[str, str], names: Mapping[str, str]) -> dict[str, str | int]:
    out: dict[str, str | int] = {}
    for key, var in names.items():
        value = env.get(var, "")
        if value:
            out[key] = int(value) if value.isdigit() and key not in ("job_id", "array_job_id", "run_id") else value
    return out


def scheduler_identity(env: Mapping[str, str] | None = None,
                       namespace_file: Path = _K8S_NAMESPACE_FILE) -> dict[str, dict[str, str | int]]:
    """Which job of which scheduler this process belongs to: ``slurm`` (job, array task, step, node list...),
    ``kubernetes`` (pod, namespace, node) and ``torchrun`` (run id, ranks, restarts), each only when present.
    A Slurm job is recognised by SLURM_JOB_ID, torchrun by TORCHELASTIC_RUN_ID, a pod by
    KUBERNETES_SERVICE_HOST; the pod's name falls back to HOSTNAME and its namespace to the service account's
    file."""
    env = os.environ if env is None else env
    out: dict[str, dict[str, str | int]] = {}
    if env.get("SLURM_JOB_ID"):
        out["slurm"] = _fields(env, _SLURM)
        if "node_list" not in out["slurm"] and env.get("SLURM_NODELIST"):  # older Slurm's name
            out["slurm"]["node_list"] = env["SLURM_NODELIST"]
    if env.get("KUBERNETES_SERVICE_HOST"):
        k8s = _fields(env, _KUBERNETES)
        k8s.setdefault("pod", env.get("HOSTNAME", ""))
        if "namespace" not in k8s:
            with contextlib.suppress(OSError):
                k8s["namespace"] = namespace_file.read_text(encoding="utf-8").strip()
        out["kubernetes"] = {k: v for k, v in k8s.items() if v != ""}
    if env.get("TORCHELASTIC_RUN_ID"):
        out["torchrun"] = _fields(env, _TORCHRUN)
    return out


class Sampler:
    """Background thread: every ``interval_s`` read the meters and memory, append a sample, flush."""

    def __init__(self, writer: JsonlWriter, meters: Sequence[EnergyMeter], t0: float,
                 memory_bytes: Callable[[], float], interval_s: float = FLUSH_INTERVAL_S) -> None:
        BOUNDS["sample_interval_s"].check(interval_s, "interval_s")
        self.writer = writer
        self.meters = list(meters)
        self.t0 = t0
        self.memory_bytes = memory_bytes
        self.interval_s = interval_s
        self.peak_rss_bytes = 0.0
        self.last: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="greentrain-sampler", daemon=True)

    def start(self) -> list[EnergyReading]:
        readings = [m.read() for m in self.meters]
        self._thread.start()
        return readings

    def sample(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"type": "sample", "t_s": time.perf_counter() - self.t0}
        for m in self.meters:
            r = m.read()
            rec[f"{r.name}_energy_j"] = rec.get(f"{r.name}_energy_j", 0.0) + r.energy_j
            util = getattr(m, "utilization_percent", None)
            percent = util() if util is not None else None
            if percent is not None:  # NVML's GPU busy share of its last period (measure/meters.NvmlMeter)
                rec["gpu_utilization_percent"] = percent
        rss = self.memory_bytes()
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)
        rec["rss_bytes"] = rss
        self.writer.append(rec)
        self.last = rec
        return rec

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()
            self.writer.flush()

    def stop(self) -> dict[str, Any]:
        """Stop the thread, take a final sample, flush; returns the final sample."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        rec = self.sample()
        self.writer.flush()
        for m in self.meters:
            m.close()
        return rec
