"""Chrome trace-event export of a simulation's spans (opens in Perfetto and chrome://tracing).

Each track group (``device``, ``link``) becomes one process and each track one thread of the trace, so every
device and every link has its own row. Format: the Trace Event Format (Google, "Trace Event Format", 2016):
complete events ``ph: "X"`` with ``ts``/``dur`` in microseconds, and ``ph: "M"`` metadata events naming
processes and threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from greentrain import files
from greentrain.files import check_output_path
from greentrain.results.view import SCHEMA_VERSION
from greentrain.sim.trace import Trace

US_PER_S = 1e6  # the trace format counts microseconds


def to_chrome(trace: Trace) -> dict[str, Any]:
    """The trace as a Chrome trace-event document (a dict ready for json.dump)."""
    groups: dict[str, int] = {}
    tids: dict[str, tuple[int, int]] = {}
    events: list[dict[str, Any]] = []
    for track in trace.tracks():
        group = track.split("/", 1)[0] if "/" in track else "sim"
        if group not in groups:
            groups[group] = len(groups) + 1
            events.append({"name": "process_name", "ph": "M", "pid": groups[group], "tid": 0,
                           "args": {"name": group}})
        pid = groups[group]
        tid = len(tids) + 1
        tids[track] = (pid, tid)
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": track.split("/", 1)[-1]}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"sort_index": tid}})
    for track, name, start, end, cat in trace:
        pid, tid = tids[track]
        events.append({"name": name or cat or "busy", "cat": cat or "sim", "ph": "X", "pid": pid,
                       "tid": tid, "ts": start * US_PER_S, "dur": (end - start) * US_PER_S})
    return {"kind": "trace", "schema_version": SCHEMA_VERSION, "traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "greentrain simulate", "dropped_spans": trace.dropped}}


def write_chrome(trace: Trace, path: str | Path, flag: str = "--trace") -> None:
    """Write the trace as Chrome trace-event JSON, atomically; an unwritable path is a ConfigError naming
    ``flag``."""
    write_json_atomic(path, to_chrome(trace), flag=flag)


def check_trace_path(path: str | Path, flag: str = "--trace") -> Path:
    """Fail before the simulation runs if the trace cannot be written (suffix .json, folder writable)."""
    return check_output_path(path, flag, (".json",))


def write_json_atomic(path: str | Path, doc: Any, flag: str = "--trace") -> None:
    """Write JSON to a temporary file next to ``path`` and rename it: nothing half-written on failure;
    an unwritable path is a ConfigError naming ``flag``."""
    files.write_json_atomic(path, doc, flag)
