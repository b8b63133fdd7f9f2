"""The repository stands alone: README.md, docs/ and every subcommand's --help send no user to ../shared
(the files there are not part of a clone)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from greentrain.cli.main import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"(\.\./shared|shared/(reference|design|DESIGN|STYLE|seeds|hooks)|/work/shared)")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_docs_point_inside_the_repository(doc: Path) -> None:
    hits = [f"{doc.name}:{i}" for i, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert hits == []


def test_help_texts_point_inside_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    for name in SUBCOMMANDS:
        assert main([name, "--help"]) == 0
        text = capsys.readouterr().out
        assert not OUTSIDE.search(text), name
