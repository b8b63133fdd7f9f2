"""Regions with equal values rank by a stated rule (footprint/compare.py TIE_RULE), never by the order listed."""

from __future__ import annotations

import itertools
import json

import pytest

from greentrain.cli.main import main
from greentrain.footprint.compare import TIE_RULE, compare_regions

REGIONS = ["us-central1", "europe-north1", "FRA", "DEU"]


def _ranks(codes: list[str]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    ranked = compare_regions(codes, num_chips=8, duration_s=3600.0, power_w=500.0, price_usd_per_device_s=1e-3)
    return (sorted((r.region.code, r.co2e_rank) for r in ranked), sorted((r.region.code, r.cost_rank) for r in ranked))


def test_equal_prices_rank_by_co2e_then_code_whatever_the_order() -> None:
    """Four regions at one price: the cost rank follows CO2e, the same for every order they are listed in."""
    first = _ranks(REGIONS)
    assert all(_ranks(list(p)) == first for p in itertools.permutations(REGIONS))
    co2e, cost = dict(first[0]), dict(first[1])
    assert co2e == cost  # equal cost everywhere: CO2e decides


def test_equal_everything_ranks_by_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal CO2e and equal cost (every region given the same footprint): the region code decides."""
    from greentrain.footprint import compare

    same = compare._footprint_in(compare.get_region("FRA").site(), {"num_chips": 1, "duration_s": 3600.0,
                                                                      "power_w": 100.0})
    monkeypatch.setattr(compare, "_footprint_in", lambda site, kwargs: same)
    ranked = compare_regions(["us-central1", "FRA", "DEU", "europe-north1"], num_chips=1, duration_s=1.0)
    order = ["DEU", "FRA", "europe-north1", "us-central1"]
    assert [r.region.code for r in ranked] == order and [r.co2e_rank for r in ranked] == [1, 2, 3, 4]
    assert [r.cost_rank for r in ranked] == [1, 2, 3, 4]


def test_the_rule_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["footprint", "--num-chips", "8", "--hours", "1", "--power-w", "500", "--price-usd-per-hour", "2",
            "--compare-regions", ",".join(REGIONS)]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tie_rule"] == TIE_RULE
    assert main(args) == 0
    assert "ties: by the other measure" in capsys.readouterr().out
