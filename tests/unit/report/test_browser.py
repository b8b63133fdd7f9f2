"""The report in a real browser: headless Chromium (Debian's ``chromium``) opens the page from disk.

Console: the page has no script and its Content-Security-Policy is ``default-src 'none'``, so anything on
Chromium's console (a refused load of a script, stylesheet, font or image from elsewhere, an error) is a
fault; ``--enable-logging=stderr`` writes every console message as a ``:CONSOLE`` line, which is read here
(simpler than a DevTools-protocol client, which would need a websocket library this project does not have).
Text: ``--dump-dom`` gives the page as the browser parsed it; the key numbers must be in it.
Plots: every figure of the page is laid out alone in a fixed cell of one screenshot, and each cell must hold
drawn pixels of more than one colour.

Without Chromium the tests skip with their reason (also a warning, shown in pytest's summary even under -q);
under CI (``CI`` set, as .ci/run does) they fail instead.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

from greentrain.report.html import CSP, build_page
from greentrain.results.codec import load_result

README_SET = ("plan", "search", "simulate", "trace", "track")
CELL_W, CELL_H, COLS = 560, 420, 2
TIMEOUT_S = 120


def _chromium() -> str:
    found = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
    if found is None:
        reason = "chromium is not installed (apt-get install chromium): the browser test of the HTML report"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} must run in CI")
        warnings.warn(f"skipped: {reason}", stacklevel=1)  # in the warnings summary even under -q
        pytest.skip(reason)
    return found


def _run(browser: str, page: Path, *args: str) -> tuple[str, list[str]]:
    """(stdout, console lines) of one headless Chromium run on ``page``."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={page.parent / 'chromium-profile'}", *args,
           page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [ln for ln in done.stderr.splitlines() if ":CONSOLE" in ln]


def _text(dom: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


@pytest.fixture(scope="module")
def browser() -> str:
    return _chromium()


@pytest.fixture(scope="module")
def page(result_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    out.write_text(build_page([(str(result_files[k]), load_result(result_files[k])) for k in README_SET]))
    return out


def test_page_renders_without_console_messages(browser: str, page: Path) -> None:
    _, console = _run(browser, page, f"--screenshot={page.parent / 'page.png'}", "--window-size=1000,3000")
    assert console == [], console
    assert (page.parent / "page.png").stat().st_size > 10_000


def test_console_check_catches_a_refused_load(browser: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
                   '<link rel="stylesheet" href="https://cdn.invalid/x.css"></head><body>x</body></html>')
    _, console = _run(browser, bad, "--dump-dom")
    assert console and "Content Security Policy" in console[0]


def test_key_numbers_are_in_the_rendered_text(browser: str, page: Path, result_files: dict[str, Path]) -> None:
    dom, console = _run(browser, page, "--dump-dom")
    assert console == [], console
    text = _text(dom)
    plan = json.loads(result_files["plan"].read_text())
    track = json.loads(result_files["track"].read_text())
    sim = json.loads(result_files["simulate"].read_text())
    expected = [f"step time {plan['step_time_s']:.2f} s", f"MFU {plan['mfu'] * 100:.1f}%",
                f"energy {plan['energy_kwh']:,.0f} kWh", f"CO2e {plan['emissions_kg_co2e'] / 1000:.2f} t",
                f"step time {track['step_time_s'] * 1000:.1f} ms",
                f"energy per step {track['energy_j_per_step']:.3g} J",
                f"CO2e {track['emissions_kg_co2e'] * 1000:.3g} g",
                f"simulated step time {sim['step_time_s']:.2f} s"]
    missing = [e for e in expected if e not in text]
    assert not missing, missing


def test_every_plot_draws_pixels(browser: str, page: Path, tmp_path: Path) -> None:
    import matplotlib.image as mpimg
    import numpy as np

    figures = re.findall(r'<figure class="plot">(<svg.*?</svg>)', page.read_text(), flags=re.S)
    assert len(figures) == len(README_SET)
    cells = "".join(f'<div style="position:absolute;left:{(i % COLS) * CELL_W}px;top:{(i // COLS) * CELL_H}px;'
                    f'width:{CELL_W - 20}px;height:{CELL_H - 20}px">{svg.replace("<svg ", "<svg class=f ", 1)}</div>'
                    for i, svg in enumerate(figures))
    grid = tmp_path / "plots.html"
    grid.write_text(f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="{CSP}">'
                    "<style>body{margin:0;background:#fff}svg.f{width:100%;height:100%}</style></head>"
                    f"<body>{cells}</body></html>")
    rows = -(-len(figures) // COLS)
    shot = tmp_path / "plots.png"
    _, console = _run(browser, grid, f"--screenshot={shot}", f"--window-size={COLS * CELL_W},{rows * CELL_H}")
    assert console == [], console
    img = mpimg.imread(shot)[..., :3]
    for i in range(len(figures)):
        x, y = (i % COLS) * CELL_W, (i // COLS) * CELL_H
        cell = img[y:y + CELL_H - 20, x:x + CELL_W - 20].reshape(-1, 3)
        drawn = cell[(cell < 0.9).any(axis=1)]
        colours = {tuple(c) for c in np.round(drawn * 8)}
        assert len(drawn) > 0.02 * len(cell) and len(colours) > 3, f"plot {i} looks blank"
