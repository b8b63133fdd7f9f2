"""The commands quoted in README.md and docs/*.md run, and the figures quoted under them are what they print.

Every fenced block line ``$ greentrain ...`` is run in-process (COLUMNS=120, from the repository root), and so is
each README block introduced by "Real output (`COLUMNS=N greentrain ...`)". The rule, the stated tolerance: every
number quoted in the block's output (a `  # comment` and an `exit N` line are prose, not output) must appear in
what the command prints, in the same order, within 0.1 % (relative). A quoted excerpt passes; a changed figure
fails and names the first number that is no longer printed.

Left out, by rule: commands whose input file is not in the repository (the bad-input examples made in /tmp),
`track` (it runs a training script) and `experiment` (minutes of training: docs/experiment.md gives its command
and date instead).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from greentrain.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
REL_TOL = 1e-3
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", re.IGNORECASE)
NOT_RUN = ("track", "experiment")
SLOW = ("emulate",)  # imports torch and starts ranks: several seconds each (the `slow` marker)
# Blocks whose figures are known to be stale, with who regenerates them; xfail(strict): fixed, they must go.
KNOWN_STALE: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Quoted:
    doc: str
    line: int
    argv: tuple[str, ...]
    columns: int
    expected: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _output_line(line: str) -> str | None:
    if re.fullmatch(r"exit \d+", line.strip()):
        return None
    return re.split(r"\s{2,}# ", line)[0]


def quoted(path: Path) -> list[Quoted]:
    """The `$ greentrain` commands of a document, with the output quoted under each."""
    out: list[Quoted] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    in_block, cur, intro = False, None, None
    for i, line in enumerate(lines):
        real = re.search(r"Real output \(`COLUMNS=(\d+) (greentrain [^`]*)`\)", line)
        if real and not in_block:
            intro = (int(real.group(1)), real.group(2), i + 1)
        if line.startswith("```"):
            if in_block and cur:
                out.append(cur)
            cur = None
            in_block = not in_block
            if in_block and intro:
                cur, intro = Quoted(path.name, intro[2], tuple(shlex.split(intro[1])[1:]), intro[0], ""), None
            continue
        if in_block and line.startswith("$ greentrain "):
            if cur:
                out.append(cur)
            cur = Quoted(path.name, i + 1, tuple(shlex.split(line[2:].split("  #")[0])[1:]), 120, "")
        elif in_block and cur is not None and (kept := _output_line(line)) is not None:
            cur = Quoted(cur.doc, cur.line, cur.argv, cur.columns, cur.expected + kept + "\n")
    return out


def _runnable(q: Quoted) -> bool:
    if q.argv[0] in NOT_RUN:
        return False
    files = [a for a in q.argv if re.search(r"\.(ya?ml|json|csv|png|html)$", a)]
    return all((ROOT / f).exists() for f in files)


def _numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in NUMBER.findall(text)]


def _first_missing(expected: list[float], printed: list[float]) -> float | None:
    j = 0
    for x in expected:
        while j < len(printed) and not (x == printed[j] or abs(x - printed[j]) <= REL_TOL * max(abs(x), 1e-12)):
            j += 1
        if j == len(printed):
            return x
        j += 1
    return None


CASES = [q for doc in DOCS for q in quoted(doc) if _runnable(q)]


def _param(q: Quoted) -> object:
    stale = KNOWN_STALE.get((q.doc, " ".join(q.argv)))
    marks = [pytest.mark.xfail(reason=stale, strict=True)] if stale else []
    if q.argv[0] in SLOW:
        marks.append(pytest.mark.slow)
    return pytest.param(q, id=q.id, marks=marks)


def test_the_docs_quote_commands() -> None:
    """The reader finds the quoted commands (a format change in the docs must not make this test vacuous)."""
    assert len(CASES) >= 40
    assert any(q.doc == "README.md" and q.argv == ("plan",) for q in CASES)  # README's `greentrain plan` output


@pytest.mark.parametrize("q", [_param(q) for q in CASES])
def test_quoted_figures_are_what_the_command_prints(q: Quoted, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", str(q.columns))
    os.environ.pop("NO_COLOR", None)
    main(list(q.argv))
    cap = capsys.readouterr()
    missing = _first_missing(_numbers(q.expected), _numbers(cap.out + cap.err))
    assert missing is None, (f"{q.id}: `greentrain {' '.join(q.argv)}` no longer prints {missing:g} quoted "
                             f"there (tolerance {REL_TOL:.1%}); regenerate the block from its output")
