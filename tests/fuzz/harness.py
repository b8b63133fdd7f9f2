"""The fuzz suite's runner and oracle (issue 24): greentrain's CLI in-process, one case at a time.

Every case must end with exit status 0 or 2 (never a traceback: an exception other than SystemExit fails the
case), a refusal is exactly one line on stderr, and no case may run past ``CASE_LIMIT_S`` (a SIGALRM stops it:
a hang). A case that holds a value marked absurd must be refused (status 2). The hypothesis profile is fixed
(derandomize, a fixed number of examples, no deadline, no example database) so CI is not flaky.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType

from hypothesis import HealthCheck, settings

from greentrain.cli.main import main

CASE_LIMIT_S = 20.0  # a case here takes 0.01-0.5 s; 20 s is a hang, not a slow machine
EXAMPLES = int(os.environ.get("GREENTRAIN_FUZZ_EXAMPLES", "0"))  # 0: each test's own count


def profile(examples: int) -> settings:
    """The deterministic profile: ``examples`` cases (or GREENTRAIN_FUZZ_EXAMPLES when set)."""
    return settings(max_examples=EXAMPLES or examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


class Hang(BaseException):
    """A case ran past CASE_LIMIT_S."""


@dataclass(frozen=True, slots=True)
class Outcome:
    argv: tuple[str, ...]
    status: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _alarm(limit_s: float, argv: Sequence[str]) -> Iterator[None]:
    def fire(_signum: int, _frame: FrameType | None) -> None:
        raise Hang(f"greentrain {' '.join(argv)[:300]} ran past {limit_s} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(argv: Sequence[str], limit_s: float = CASE_LIMIT_S) -> Outcome:
    """``greentrain ARGV`` in this process; any exception but SystemExit propagates (a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with _alarm(limit_s, argv), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as e:  # argparse's --help and the like
            status = e.code if isinstance(e.code, int) else 2
    return Outcome(tuple(argv), int(status), out.getvalue(), err.getvalue())


def check(outcome: Outcome, *, absurd: bool) -> None:
    """The oracle: 0 or 2; a refusal is one line naming the command; a case with an absurd value is refused."""
    shown = " ".join(outcome.argv)[:300]
    assert outcome.status in (0, 2), f"exit {outcome.status}: greentrain {shown}\n{outcome.stderr[-2000:]}"
    if outcome.status == 2:
        lines = outcome.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("greentrain"), (
            f"refusal is not one line: greentrain {shown}\n{outcome.stderr[-2000:]}")
    if absurd:
        assert outcome.status == 2, f"absurd value accepted: greentrain {shown}\n{outcome.stdout[-1000:]}"
