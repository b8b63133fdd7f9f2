"""docs/runs-csv.md documents exactly the columns the runs-CSV reader accepts (a new column needs its row)."""

from __future__ import annotations

import re
from pathlib import Path

from greentrain.calibrate.runs import COLUMNS, REQUIRED

DOC = Path(__file__).resolve().parents[3] / "docs" / "runs-csv.md"


def test_every_column_has_one_row_and_no_row_is_stale() -> None:
    rows = re.findall(r"^\| `([a-z0-9_]+)` \|", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert sorted(rows) == sorted(COLUMNS) and len(rows) == len(set(rows))


def test_required_columns_are_said() -> None:
    text = DOC.read_text(encoding="utf-8")
    said = re.search(r"The required columns are (.*?)\.", text, flags=re.DOTALL)
    assert said is not None and sorted(re.findall(r"`([a-z_]+)`", said.group(1))) == sorted(REQUIRED)
