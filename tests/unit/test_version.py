"""The version moves in one step: pyproject.toml, greentrain/_version.py and CHANGELOG.md's newest release."""

from __future__ import annotations

import re
from pathlib import Path

from greentrain._version import __version__

ROOT = Path(__file__).resolve().parents[2]


def test_one_version_everywhere() -> None:
    # the [project] table's version line (tomllib is Python 3.11+, the package supports 3.10)
    project = {"version": re.findall(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[0]}
    releases = re.findall(r"^## (\d+\.\d+\.\d+) - \d{4}-\d{2}-\d{2}$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert project["version"] == __version__ == releases[0], (project["version"], __version__, releases[:1])


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: py.typed ships with the package (MANIFEST.in puts it in the wheel)."""
    assert (ROOT / "src" / "greentrain" / "py.typed").is_file()
    assert "src/greentrain/py.typed" in (ROOT / "MANIFEST.in").read_text()
