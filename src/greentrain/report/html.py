"""`greentrain report`: result files (plan, search, simulate, trace, track, compare, footprint, traffic,
batch-time, offload heatmap, experiment) as one self-contained static HTML page.

The page loads nothing: no script, no stylesheet, font or image from anywhere; its Content-Security-Policy
(``default-src 'none'``) makes the browser refuse any such load and say so on its console, which the browser
test reads. Plots are inline SVG (report/html_plots.py), tables are HTML, every file-borne string is escaped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain._version import __version__
from greentrain.config import BOUNDS, as_float
from greentrain.errors import ConfigError
from greentrain.report import html_plots as plots
from greentrain.report.html_parts import esc, figure, key_figures, provenance, section
from greentrain.results.codec import load_result
from greentrain.results.kinds import TraceView
from greentrain.results.view import ResultView

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
MAX_GANTT_ROWS = 48  # more rows than this: links left out, then the first rows drawn (Perfetto shows all)
CSS = """
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1000px;
padding:1.5em;color:#1d2a22;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;border-bottom:2px solid #2b7a4b;padding-bottom:.2em}
section{margin:2em 0}.prov{margin:.3em 0;color:#2b4a36}.scenario{margin:.3em 0 .8em;color:#444}
code{background:#eef4ef;padding:0 .25em;border-radius:3px}
dl.key{display:flex;flex-wrap:wrap;gap:.6em;margin:.8em 0}
dl.key div{border:1px solid #cfe0d4;border-radius:6px;padding:.4em .7em;min-width:8em;background:#f6faf7}
dt{font-size:.8em;color:#555}dd{margin:0;font-size:1.15em;font-weight:600}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left;white-space:nowrap}th{background:#eef4ef}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}td.w{white-space:normal;min-width:14em}
.cols{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}figure.plot{margin:1em 0}
figure.plot svg{max-width:100%;height:auto}figure.wide{width:min(1340px,calc(100vw - 2em));position:relative;
left:50%;transform:translateX(-50%)}figure.wide svg{width:100%}details summary{cursor:pointer;font-weight:600}
figcaption{font-size:.85em;color:#555}ul.notes{font-size:.9em;color:#444}nav ul{columns:2}
@media print{body{max-width:none}section{break-inside:avoid}}
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class WrittenReport:
    path: Path
    size_bytes: int
    num_sections: int
    seconds: float


def _trace_rows(events: Sequence[Mapping[str, Any]]) -> tuple[dict[str, dict[str, list[tuple[float, float]]]],
                                                                float]:
    """track label -> category -> (start, end) in microseconds, from Chrome trace events; and the end time."""
    procs = {e.get("pid"): str(e.get("args", {}).get("name", "")) for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name", "")) for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
    end = 0.0
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        key = (e.get("pid"), e.get("tid"))
        label = f"{procs.get(key[0], key[0])} {threads.get(key, key[1])}".strip()
        # Chrome trace format: ts and dur are numbers of microseconds ("ts": "soon" was a traceback)
        ts = as_float(e.get("ts", 0.0), f"traceEvents[{i}].ts", minimum=0.0)
        d = as_float(e.get("dur", 0.0), f"traceEvents[{i}].dur", minimum=0.0)
        for name, us in (("ts", ts), ("dur", d)):  # 1e300 us was drawn; range: config.BOUNDS duration_s
            if not BOUNDS["duration_s"].ok(units.us_to_s(us)):
                raise ConfigError(f"traceEvents[{i}].{name}", us, f"must be at most "
                                  f"{BOUNDS['duration_s'].hi / units.US_S:.3g} us: {BOUNDS['duration_s'].reason}")
        rows.setdefault(label, {}).setdefault(str(e.get("cat") or "busy"), []).append((ts, ts + d))
        end = max(end, ts + d)
    return rows, end


def _drawn_rows(rows: dict[str, Any]) -> tuple[list[str], str]:
    """The rows a Gantt chart draws (at most MAX_GANTT_ROWS: devices before links) and what it leaves out."""
    labels = list(rows)
    if len(labels) <= MAX_GANTT_ROWS:
        return labels, ""
    devices = [k for k in labels if not k.startswith("link ")] or labels
    drawn = devices[:MAX_GANTT_ROWS]
    return drawn, (f" The first {len(drawn)} of {len(labels)} rows are drawn"
                   + (", links left out" if len(devices) < len(labels) else "") + "; the trace holds them all.")


def trace_section(t: TraceView, source: str) -> str:
    """A Gantt chart of a simulation's Chrome trace: one row per device or link, one colour per category."""
    rows_us, end_us = _trace_rows(t.traceEvents)
    scale, unit = (1e-6, "s") if end_us >= 1e6 else (1e-3, "ms")
    drawn, left_out = _drawn_rows(rows_us)
    rows = {label: {cat: [(a * scale, b * scale) for a, b in spans] for cat, spans in rows_us[label].items()}
            for label in drawn}
    n_spans = sum(len(s) for per in rows_us.values() for s in per.values())
    other = t.extra.get("otherData")
    dropped = other.get("dropped_spans", 0) if isinstance(other, Mapping) else 0
    counts = f"{len(rows_us)} rows, {n_spans:,} spans" + (f", {dropped:,} dropped" if dropped else "")
    body = (provenance("Simulated by greentrain simulate (its --trace: every span of every device and link)",
                       source, counts)
            + key_figures([("span of the trace", f"{end_us * scale:,.4g} {unit}"), ("rows", str(len(rows_us))),
                           ("spans", f"{n_spans:,}")]))
    if rows:
        binned = "" if n_spans <= plots.GANTT_EXACT_SPANS else (
            f" Past {plots.GANTT_EXACT_SPANS:,} spans, a row of more than {plots.GANTT_RESOLUTION} is drawn in "
            f"{plots.GANTT_RESOLUTION} columns, each in the phase that takes most of it.")
        body += figure(plots.gantt(rows, unit, "Gantt chart"),
                       f"Busy time of each device and link, by phase (a span shorter than 1/"
                       f"{round(1 / plots.GANTT_MIN_WIDTH)} of the chart is drawn that wide).{binned}{left_out}")
    return body


def _section_of(view: ResultView, source: str, index: int) -> tuple[str, str]:
    """(title, html) of one result's section."""
    from greentrain.report.html_analyses import ANALYSES_SECTIONS, fields_section
    from greentrain.report.html_sections import SECTIONS

    if isinstance(view, TraceView):
        title, body = "Simulation trace", trace_section(view, source)
    else:
        generic = (view.KIND.replace("_", " ").capitalize(), fields_section)
        title, render = {**SECTIONS, **ANALYSES_SECTIONS}.get(type(view), generic)
        body = render(view, source)
    title = f"{title}: {Path(source).name}"
    return title, section(f"r{index}", title, body, view.KIND or "result")


def build_page(results: Sequence[tuple[str, ResultView]]) -> str:
    """The whole page for (source, view) pairs, in the order given."""
    built = [_section_of(view, source, i) for i, (source, view) in enumerate(results, 1)]
    nav = "".join(f'<li><a href="#r{i}">{esc(title)}</a></li>' for i, (title, _) in enumerate(built, 1))
    kinds = ", ".join(dict.fromkeys(v.KIND for _, v in results))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>greentrain report</title><style>{CSS}</style></head><body>"
            f"<header><h1>greentrain report</h1><p>{len(results)} result file(s): {esc(kinds)}. "
            f"Written by greentrain {esc(__version__)}; this page loads nothing from anywhere.</p>"
            f"<nav><ul>{nav}</ul></nav></header><main>"
            + "".join(html for _, html in built) + "</main></body></html>\n")


def check_html_path(path: str | Path, flag: str = "--html") -> Path:
    """Before any work: ``path`` ends in .html or .htm and its folder takes a new file."""
    from greentrain.files import check_output_path

    return check_output_path(path, flag, (".html", ".htm"))


def write_page(results: Sequence[tuple[str, ResultView]], out: str | Path, flag: str = "--html") -> WrittenReport:
    """Build the page for (source, view) pairs and write it atomically to ``out``."""
    from greentrain.files import write_text_atomic

    t0 = time.perf_counter()
    target = check_html_path(out, flag)
    page = build_page(results)
    write_text_atomic(target, page, flag)
    return WrittenReport(path=target, size_bytes=len(page.encode("utf-8")), num_sections=len(results),
                         seconds=time.perf_counter() - t0)


def write_report(paths: Sequence[str], out: str | Path, flag: str = "-o") -> WrittenReport:
    """`greentrain report`: read every result file, build the page, write it atomically to ``out``."""
    t0 = time.perf_counter()
    if not paths:
        raise ConfigError("files", [], "give at least one result JSON file")
    check_html_path(out, flag)
    done = write_page([(p, load_result(p)) for p in paths], out, flag)
    return WrittenReport(path=done.path, size_bytes=done.size_bytes, num_sections=done.num_sections,
                         seconds=time.perf_counter() - t0)


def write_command_page(out: str | Path, parts: Sequence[tuple[str, str, Mapping[str, Any]]],
                       flag: str = "--html") -> WrittenReport:
    """A plotting command's ``--html``: its (source, kind, JSON mapping) parts as a page at ``out``; one line
    on stderr says what was written (stdout stays the command's own output, JSON included)."""
    import sys

    from greentrain.results.codec import from_dict, stamp

    done = write_page([(source, from_dict(stamp(kind, data), source)) for source, kind, data in parts], out, flag)
    print(f"greentrain: wrote {done.path} ({done.size_bytes / 1e3:,.0f} kB)", file=sys.stderr)
    return done
