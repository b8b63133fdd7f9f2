"""argparse ``type=`` converters shared by the subcommands: numbers are finite, counts are whole.

argparse's own ``type=float`` accepts "inf" and "nan", and ``type=int`` refuses "1e9"; these accept what
the YAML readers in greentrain.config accept and refuse the rest. A refusal is argparse's one-line error
naming the flag (``argument --tokens: 'inf' must be a finite number``), exit status 2.
"""

from __future__ import annotations

import argparse
import math


def finite_float(text: str) -> float:
    """Any finite number."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return x


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    x = finite_float(text)
    if x < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return x


def positive_float(text: str) -> float:
    """A finite number > 0."""
    x = finite_float(text)
    if x <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
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


def positive_int(text: str) -> int:
    """An integer >= 1."""
    v = whole(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive integer")
    return v


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    v = whole(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return v
