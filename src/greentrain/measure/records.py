"""The run record: a JSONL file appended as things happen, and the sampler thread that feeds and flushes it.

One JSON object per line, each with a ``type``:
  start   {t_unix, t0_unix, run_id, pid, rank, world_size, meters: [{name, measured, source}], cpu_model,
           gpu_model, argv}
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
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.measure.meters import EnergyMeter, EnergyReading, cpu_model_name

FLUSH_INTERVAL_S = 0.5


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
        line = json.dumps(record, separators=(",", ":")) + "\n"
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
    lines = p.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break  # torn last line
            raise ConfigError("records", f"{path}:{i + 1}", "malformed JSON line") from None
        if isinstance(rec, dict):
            out.append(rec)
    return out


def last_run(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of the last run in a file: from its last ``start`` record on (a folder reused by several
    runs keeps each run's records; none of them is counted in another)."""
    starts = [i for i, r in enumerate(records) if r.get("type") == "start"]
    return list(records[starts[-1]:]) if starts else list(records)


def t0_unix(start: dict[str, Any]) -> float:
    """The Unix time of a record's ``t_s = 0`` (the start record's own time in records written before it)."""
    return float(start.get("t0_unix", start.get("t_unix", 0.0)))


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


def hardware_info(meters: Sequence[EnergyMeter]) -> dict[str, str]:
    """What the run ran on, in CodeCarbon's words: ``cpu_model`` (the CPU's name) and ``gpu_model``
    ("2 x NVIDIA H100 80GB HBM3"; "" without a measured GPU), recorded in the start record."""
    names: list[str] = [n for m in meters for n in getattr(m, "names", [])]
    gpu = ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
    return {"cpu_model": cpu_model_name(), "gpu_model": gpu}


class Sampler:
    """Background thread: every ``interval_s`` read the meters and memory, append a sample, flush."""

    def __init__(self, writer: JsonlWriter, meters: Sequence[EnergyMeter], t0: float,
                 memory_bytes: Callable[[], float], interval_s: float = FLUSH_INTERVAL_S) -> None:
        require(interval_s > 0, "interval_s", interval_s, "must be > 0")
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
