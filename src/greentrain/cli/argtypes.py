"""argparse ``type=`` converters shared by the subcommands: numbers are finite, counts are whole.

argparse's own ``type=float`` accepts "inf" and "nan", and ``type=int`` refuses "1e9"; these accept what
the YAML readers in greentrain.config accept and refuse the rest. A refusal is argparse's one-line error
naming the flag (``argument --tokens: 'inf' must be a finite number``), exit status 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar


def finite_float(text: str) -> float:
    """Any finite number."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return x


def whole(text: str) -> int:
    """An integer; "1e6" and "64.0" are accepted, "1.5" and "inf" are not."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not math.isfinite(x) or x != int(x):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite integer")
    try:
        return int(text)  # exact for long integers, which float() would round
    except ValueError:
        return int(x)


N = TypeVar("N", int, float)


def _checked(parse: Callable[[str], N], ok: Callable[[N], bool], rule: str, name: str) -> Callable[[str], N]:
    """A converter: ``parse``, then refuse what fails ``ok`` in argparse's one line (``'-1' must be >= 0``)."""

    def convert(text: str) -> N:
        x = parse(text)
        if not ok(x):
            raise argparse.ArgumentTypeError(f"{text!r} {rule}")
        return x

    convert.__name__ = name  # argparse names the type in its "invalid <name> value" message
    return convert


# finite numbers >= 0 and > 0; integers >= 1 and >= 0
nonneg_float = _checked(finite_float, lambda x: x >= 0, "must be >= 0", "nonneg_float")
positive_float = _checked(finite_float, lambda x: x > 0, "must be > 0", "positive_float")
positive_int = _checked(whole, lambda v: v >= 1, "must be a positive integer", "positive_int")
nonneg_int = _checked(whole, lambda v: v >= 0, "must be >= 0", "nonneg_int")


def bounded(kind: str, *, integer: bool = False) -> Callable[[str], float]:
    """A converter for a number in ``greentrain.config.BOUNDS[kind]`` (the one table of input ranges, each with
    its unit and reason): ``--pue 1e9`` is ``argument --pue: '1e9' must be in [1, 3]: facility / IT ...``."""
    from greentrain.config import BOUNDS

    bound = BOUNDS[kind]
    parse: Callable[[str], float] = whole if integer else finite_float
    return _checked(parse, bound.ok, bound.rule(), kind)


def name_text(text: str) -> str:
    """A name (chip, region, model, run): not empty, no line break, at most MAX_NAME_CHARS characters (it may
    become a file name, and Linux refuses longer ones)."""
    from greentrain.config import MAX_NAME_CHARS

    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} must not be empty")
    if len(text) > MAX_NAME_CHARS:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}... ({len(text):,} chars) must be at most {MAX_NAME_CHARS} "
                                         "characters (a name may become a file name: Linux NAME_MAX)")
    if "\n" in text or "\r" in text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} must not hold a line break or NUL")
    return text


def path_text(text: str) -> str:
    """A preset name or a file path: not empty, at most MAX_PATH_CHARS characters, each part at most
    MAX_NAME_CHARS (Linux PATH_MAX and NAME_MAX; a longer one was an OSError traceback)."""
    from pathlib import Path

    from greentrain.config import MAX_NAME_CHARS, MAX_PATH_CHARS

    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} must not be empty")
    if len(text) > MAX_PATH_CHARS or any(len(part) > MAX_NAME_CHARS for part in Path(text).parts):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}... ({len(text):,} chars) is not a name or a path: a path is "
                                         f"at most {MAX_PATH_CHARS} characters, each part {MAX_NAME_CHARS}")
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r} must not hold a NUL character")
    return text


def link_name(text: str) -> str:
    """A link of the catalog (`greentrain catalog links`), checked before any run is read: a flag's unknown
    link is the flag's error, not the first row's; "" (the default) is the chip's own."""
    if text == "":
        return text
    from greentrain.errors import ConfigError
    from greentrain.hardware.catalog import get_link

    try:
        get_link(name_text(text))
    except ConfigError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e.rule}") from None
    return text
