"""Trace recorder and Chrome trace-event export (opens in Perfetto and chrome://tracing).

A span is (track, name, start_s, end_s, category). A track is named ``group/name`` (``device/gpu3``,
``link/gpu3.ingress``); each group becomes one process and each track one thread of the trace, so every
device and every link has its own row. Format: the Trace Event Format (Google, "Trace Event Format",
2016): complete events ``ph: "X"`` with ``ts``/``dur`` in microseconds, and ``ph: "M"`` metadata events
naming processes and threads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from greentrain.plotting import check_output_path, write_atomic

Span = tuple[str, str, float, float, str]

US_PER_S = 1e6  # the trace format counts microseconds


class Trace:
    """Collects spans; ``limit`` caps how many are kept (the rest are counted in ``dropped``)."""

    __slots__ = ("dropped", "limit", "spans")

    def __init__(self, limit: int = 5_000_000) -> None:
        self.spans: list[Span] = []
        self.limit = limit
        self.dropped = 0

    def span(self, track: str, name: str, start_s: float, end_s: float, category: str = "") -> None:
        if len(self.spans) < self.limit:
            self.spans.append((track, name, start_s, end_s, category))
        else:
            self.dropped += 1

    def tracks(self) -> list[str]:
        """Track names in order of first appearance."""
        return list(dict.fromkeys(s[0] for s in self.spans))

    def __iter__(self) -> Iterator[Span]:
        return iter(self.spans)

    def __len__(self) -> int:
        return len(self.spans)

    def to_chrome(self) -> dict[str, Any]:
        """The trace as a Chrome trace-event document (a dict ready for json.dump)."""
        groups: dict[str, int] = {}
        tids: dict[str, tuple[int, int]] = {}
        events: list[dict[str, Any]] = []
        for track in self.tracks():
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
        for track, name, start, end, cat in self.spans:
            pid, tid = tids[track]
            events.append({"name": name or cat or "busy", "cat": cat or "sim", "ph": "X", "pid": pid,
                           "tid": tid, "ts": start * US_PER_S, "dur": (end - start) * US_PER_S})
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"generator": "greentrain simulate", "dropped_spans": self.dropped}}

    def write_chrome(self, path: str | Path, flag: str = "--trace") -> None:
        write_json_atomic(path, self.to_chrome(), flag=flag)


def check_trace_path(path: str | Path, flag: str = "--trace") -> Path:
    """Fail before the simulation runs if the trace cannot be written (suffix .json, folder writable)."""
    return check_output_path(path, flag, (".json",))


def write_json_atomic(path: str | Path, doc: Any, flag: str = "--trace") -> None:
    """Write JSON to a temporary file next to ``path`` and rename it: nothing half-written on failure;
    an unwritable path is a ConfigError naming ``flag``."""

    def dump(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))

    write_atomic(path, flag, dump, suffix=".tmp")
