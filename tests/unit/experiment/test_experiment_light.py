"""`experiment report` on a light install (no matplotlib): the tables and files without the plots and one note;
`--plot` refused in one line before any work; a read-only --plot folder refused before any work."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main


def _no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_report_without_matplotlib_writes_the_files_and_says_no_plots(tmp_path: Path, make_folder: Any,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_folder(out)
    _no_matplotlib(monkeypatch)
    assert main(["experiment", "report", str(out)]) == 0
    err = capsys.readouterr().err
    assert "no plots (matplotlib is not installed: pip install 'greentrain[plot]')" in err
    assert (out / "report.md").is_file() and not list(out.glob("*.png"))


def test_plot_flag_without_matplotlib_is_refused_first(tmp_path: Path, make_folder: Any,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_folder(out)
    before = sorted(p.name for p in out.iterdir())
    _no_matplotlib(monkeypatch)
    assert main(["experiment", "report", str(out), "--plot", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plot=" in err and "greentrain[plot]" in err
    assert sorted(p.name for p in out.iterdir()) == before and not (tmp_path / "plots").exists()


def test_unwritable_plot_folder_is_refused_first(tmp_path: Path, make_folder: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """/proc takes no new folder, even from root (CI runs as root: chmod would not bind)."""
    out = tmp_path / "out"
    make_folder(out)
    before = sorted(p.name for p in out.iterdir())
    assert main(["experiment", "report", str(out), "--plot", "/proc/greentrain-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plot='/proc/greentrain-plots'" in err
    assert sorted(p.name for p in out.iterdir()) == before
