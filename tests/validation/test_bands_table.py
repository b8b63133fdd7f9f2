"""The error-band table (calibrate/bands.yaml) regenerates from the calibration runs (tests/data/calibration,
copies of the shared reference files) with benchmarks/make_bands.py, and the shipped table has the classes the
runs give."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from greentrain.calibrate.bands import shipped_bands

ROOT = Path(__file__).resolve().parents[2]
CALIBRATION = ROOT / "tests" / "data" / "calibration"

pytestmark = pytest.mark.slow


def test_make_bands_regenerates_the_shipped_classes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("make_bands", ROOT / "benchmarks" / "make_bands.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "bands.yaml"
    assert mod.main(["--calibration", str(CALIBRATION), "--out", str(out)]) == 0
    fresh = shipped_bands(str(out))
    keys = {(b.framework, b.chip, b.moe, b.scale): b.runs for b in fresh}
    assert keys == {(b.framework, b.chip, b.moe, b.scale): b.runs for b in shipped_bands()}
    assert keys[("all", "all", False, "all")] >= 1000 and keys[("nemo", "h100-sxm", True, "any")] == 2
    pools = {b.scale: b for b in fresh if b.classes and b.framework == "any"}
    assert set(pools) == {"1 node", "2-16 nodes", "> 16 nodes, compute-bound", "> 16 nodes, mostly waiting"}
    for scale, pool in pools.items():  # fewer than 9 classes at each scale: the pool is its worst class
        members = [b for b in fresh if b.scale == scale and not b.classes]
        assert pool.classes == len(members) < 9 and pool.band == max(b.band for b in members)
    assert mod.main(["--calibration", str(tmp_path / "absent"), "--out", str(out)]) == 2
    assert "missing" in capsys.readouterr().err
