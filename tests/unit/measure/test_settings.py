"""Issue 26 item 1: every Tracker setting also from a GREENTRAIN_* environment variable; an argument wins; a
malformed value is one ConfigError naming the variable; docs/track.md lists every variable."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.measure.settings import SETTINGS
from greentrain.measure.tracker import Tracker

DOCS = Path(__file__).parents[3] / "docs" / "track.md"


def test_every_tracker_argument_has_a_variable_and_a_docs_row() -> None:
    args = set(inspect.signature(Tracker).parameters) - {"model"}
    assert args == set(SETTINGS)
    text = DOCS.read_text()
    assert all(f"`{s.env}`" in text for s in SETTINGS.values())


def test_settings_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in {"GREENTRAIN_REGION": "fr", "GREENTRAIN_PUE": "1.3", "GREENTRAIN_OUT_DIR": str(tmp_path),
                       "GREENTRAIN_DEPTH": "leaf", "GREENTRAIN_INTERVAL_S": "0.25", "GREENTRAIN_HOOKS": "off",
                       "GREENTRAIN_PRINT_SUMMARY": "no", "GREENTRAIN_CHIP": "h100-sxm",
                       "GREENTRAIN_PROJECT_NAME": "p"}.items():
        monkeypatch.setenv(var, value)
    t = Tracker()
    assert t.site is not None and t.site.region == "FRA" and t.site.pue == 1.3 and t.out_dir == tmp_path
    assert t.depth is None and t.interval_s == 0.25 and not t.use_hooks and t.print_summary is None
    assert t.project_name == "p" and t.peak_flop_per_s is not None and t.peak_flop_per_s > 1e14
    explicit = Tracker(region=None, grid_g_per_kwh=10.0, pue=None, depth=2, out_dir="x")  # arguments win
    assert explicit.site is not None and explicit.site.grid_g_co2e_per_kwh == 10.0 and explicit.depth == 2


@pytest.mark.parametrize("var, value, rule", [("GREENTRAIN_PUE", "high", "must be a float"),
                                              ("GREENTRAIN_HOOKS", "maybe", "must be one of"),
                                              ("GREENTRAIN_PUE", "0.5", "GREENTRAIN_PUE=0.5: must be in [1, 3]"),
                                              ("GREENTRAIN_INTERVAL_S", "inf", "finite"),
                                              ("GREENTRAIN_INTERVAL_S", "1e-9", "GREENTRAIN_INTERVAL_S=1e-09: must"),
                                              ("GREENTRAIN_CPU_TDP_W", "1e-300", "GREENTRAIN_CPU_TDP_W=1e-300: must"),
                                              ("GREENTRAIN_GRID_G_PER_KWH", "1e12", "GREENTRAIN_GRID_G_PER_KWH=")])
def test_a_bad_variable_is_one_line(monkeypatch: pytest.MonkeyPatch, var: str, value: str, rule: str) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as e:
        Tracker()
    assert rule in str(e.value) and "\n" not in str(e.value)
    assert var in str(e.value) or var.removeprefix("GREENTRAIN_").lower() in str(e.value)
