"""Trace recorder: the spans a simulation records (writing them out is greentrain.report.trace's job).

A span is (track, name, start_s, end_s, category). A track is named ``group/name`` (``device/gpu3``,
``link/gpu3.ingress``); report.trace writes each group as one process and each track as one thread of a
Chrome trace, so every device and every link has its own row.
"""

from __future__ import annotations

from collections.abc import Iterator

Span = tuple[str, str, float, float, str]


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
