"""Building blocks of the HTML report: escaped text, tables, key figures, figures, and number formats.

Every string that comes from a file goes through ``esc`` (html.escape, quotes included) before it reaches
the page; the only unescaped markup is the SVG that matplotlib writes and the tags built here.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], numeric_from: int = 1,
          caption: str = "") -> str:
    """An HTML table; columns from ``numeric_from`` on are right-aligned (numbers). Cells stay on one line
    but a long text (a strategy, a note) wraps."""
    head = "".join(f"<th{_cls(i, numeric_from, h)}>{esc(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{_cls(i, numeric_from, c)}>{esc(c)}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


WRAP_CHARS = 28  # a text cell longer than this may wrap


def _cls(i: int, numeric_from: int, cell: object) -> str:
    if len(str(cell)) > WRAP_CHARS:  # a sentence (a note, a profile's summary), even in a numbers column
        return ' class="w"'
    return ' class="n"' if i >= numeric_from else ""


def key_figures(items: Sequence[tuple[str, str]]) -> str:
    """The section's headline numbers as a definition list (name, value)."""
    cells = "".join(f'<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>' for k, v in items)
    return f'<dl class="key">{cells}</dl>'


def figure(svg: str, caption: str, wide: bool = False) -> str:
    """A plot and its caption; ``wide``: the figure may use the window's width beyond the text column."""
    return f'<figure class="plot{" wide" if wide else ""}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def provenance(how: str, source: str, scenario: str) -> str:
    """The line every section starts with: predicted or measured, by which command, from which file, and
    the scenario the numbers belong to."""
    return (f'<p class="prov"><strong>{esc(how)}</strong> &middot; from <code>{esc(source)}</code></p>'
            f'<p class="scenario">Scenario: {esc(scenario)}</p>')


def section(anchor: str, title: str, body: str, kind: str) -> str:
    return (f'<section id="{esc(anchor)}" class="result {esc(kind)}"><h2>{esc(title)}</h2>{body}</section>')


def notes(items: Iterable[str]) -> str:
    lines = "".join(f"<li>{esc(n)}</li>" for n in items)
    return f'<ul class="notes">{lines}</ul>' if lines else ""


