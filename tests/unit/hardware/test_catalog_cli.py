"""`greentrain catalog chips|models|regions|links [--json]` through greentrain.cli.main.main."""

from __future__ import annotations

import json
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.hardware.catalog import chips, links
from greentrain.model.load import load_preset, preset_names


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["catalog", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _json(capsys: pytest.CaptureFixture[str], kind: str) -> list[dict[str, Any]]:
    rc, out, err = _run(capsys, kind, "--json")
    assert rc == 0 and err == ""
    data = json.loads(out)
    assert isinstance(data, list)
    return data


def test_chips_table_lists_every_chip(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "chips")
    assert rc == 0
    for name in chips():
        assert name in out
    assert "989.5" in out  # H100 SXM dense bf16 TFLOP/s
    assert "125.0 (fp16)" in out  # V100: no bf16, its fp16 tensor rate is shown and marked


def test_chips_json_has_si_unit_keys(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "chips")
    assert [d["name"] for d in data] == list(chips())
    h100 = next(d for d in data if d["name"] == "h100-sxm")
    assert h100["peak_bf16_flop_per_s"] == 989.5e12
    assert h100["memory_bytes"] == 80 * 2**30
    assert h100["memory_bytes_per_s"] == 3.35e12
    assert h100["price_usd_per_s"] == pytest.approx(55.04 / 8 / 3600)  # p5.48xlarge after the June 2025 cut
    assert "h100" in h100["aliases"] and h100["source"]


def test_models_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "models")
    assert rc == 0
    for name in preset_names():
        assert name in out
    data = _json(capsys, "models")
    assert [d["name"] for d in data] == list(preset_names())
    for d in data:
        spec = load_preset(d["name"])
        assert d["num_params"] == spec.num_params() and d["num_active_params"] == spec.num_active_params()
        assert d["num_kv_heads"] == spec.num_kv_heads


def test_links_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "links")
    assert rc == 0 and "nvlink4" in out and "450.00" in out
    data = {d["name"]: d for d in _json(capsys, "links")}
    assert set(data) == set(links())
    assert data["nvlink4"]["bytes_per_s"] == 450e9 and data["ib-ndr-400"]["bytes_per_s"] == 50e9
    assert data["ib-ndr-400"]["latency_s"] == pytest.approx(9.6e-6)


def test_regions(capsys: pytest.CaptureFixture[str]) -> None:
    regions = pytest.importorskip("greentrain.footprint.regions")
    rc, out, _ = _run(capsys, "regions")
    assert rc == 0
    data = _json(capsys, "regions")
    codes = [r.code for r in regions.list_regions()]
    assert [d["code"] for d in data] == codes
    assert codes[0] in out


@pytest.mark.parametrize("argv", [["chip"], ["gpus", "--json"], ["chips", "--jsn"], []])
def test_bad_arguments_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    rc, out, err = _run(capsys, *argv)
    assert rc == 2
    assert out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "error" in err
