"""The two kinds of error greentrain raises on purpose.

ConfigError: the user's input is wrong (a field, its value, the rule it breaks). The CLI prints one line, exits 2.
InfeasibleError: the input is well formed but the strategy cannot run (does not divide, does not fit).
"""

from __future__ import annotations

import csv
import difflib
import reprlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class GreentrainError(Exception):
    """Base class of the errors the CLI reports as one line with exit status 2."""


# every character str.splitlines() breaks a line at, written as its escape (\n, \x0c, \u2028)
_ESCAPED_BREAKS = {ord(c): c.encode("unicode_escape").decode("ascii") for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


class ConfigError(GreentrainError, ValueError):
    """Bad user input: names the field, the value and the rule."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        self.field = field
        self.value = value
        self.rule = rule
        # a field or rule may hold a line break (a YAML key "\n", "\f"): the message stays one line
        super().__init__(f"{field}={shorten(value)}: {rule}".translate(_ESCAPED_BREAKS))


MAX_QUOTED_CHARS = 120  # an error quotes at most this much of a value (a file may hold megabytes)


def shorten(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters; the repr of a huge or aliased (self-similar)
    container is never built in full (reprlib bounds items per level and levels)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} chars)"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        r = reprlib.Repr()
        r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset, r.maxstring = 3, 6, 6, 6, 6, 40
        text = r.repr(value)
    else:
        text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


class InfeasibleError(GreentrainError):
    """A strategy that cannot run on the given model and cluster (it does not divide, or does not fit)."""

    def __init__(self, message: str, *, shortfall_bytes: float | None = None) -> None:
        self.shortfall_bytes = shortfall_bytes
        super().__init__(message)


def did_you_mean(name: str, choices: Iterable[str], listing: str = "") -> str:
    """A '; did you mean X?' suffix, or '; known: ...' when nothing is close; a list cut at 20 names says how
    many there are and, with ``listing`` (a command), where to see them all."""
    options = sorted(set(choices))
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in options], n=3, cutoff=0.5)
    if close:
        return f"; did you mean {', '.join(close)}?"
    if len(options) <= 20:
        return f"; known: {', '.join(options)}"
    where = f"; `{listing}` lists them" if listing else ""
    return f"; known: {', '.join(options[:20])}, ... ({len(options)} names in all{where})"


@contextmanager
def csv_errors(field: str, path: object) -> Iterator[None]:
    """Read a CSV file the user gave inside this: what the csv module cannot parse (a cell over its 128 KiB
    field limit, a quote left open in strict mode) becomes one line naming the file, not a traceback."""
    try:
        yield
    except csv.Error as e:
        raise ConfigError(field, str(path), f"is not a CSV greentrain can read: {e}") from None
