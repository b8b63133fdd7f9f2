"""The bundled CSVs: every row has a source and a year, values in range, codes unique, zones resolvable."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from greentrain.footprint.host import host_systems
from greentrain.footprint.regions import electricity_prices, list_regions, provider_pues

FILES = ("grid_intensity.csv", "cloud_regions.csv", "pue.csv", "electricity_prices.csv", "hosts.csv")


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("greentrain.footprint").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


@pytest.mark.parametrize("name", FILES)
def test_every_row_has_source_and_year(name: str) -> None:
    rows = _rows(name)
    assert rows
    for row in rows:
        assert row["source"].strip(), row
        assert 2000 <= int(row["year"]) <= 2026, row


def test_grid_intensity_rows_in_physical_range_and_unique() -> None:
    rows = _rows("grid_intensity.csv")
    zones = [r["zone"] for r in rows]
    assert len(zones) == len(set(zones))
    for r in rows:
        # Cleanest grids ~10 g/kWh (hydro/nuclear); dirtiest ~1,300 (Turkmenistan's gas and oil, OWID 2022).
        assert 0 < float(r["grid_g_co2e_per_kwh"]) < 1500, r
        assert r["kind"] in ("country", "state", "province")
        assert r["basis"] in ("life-cycle", "combustion")


def test_country_coverage_includes_largest_consumers() -> None:
    countries = {r["zone"] for r in _rows("grid_intensity.csv") if r["kind"] == "country"}
    assert len(countries) >= 60
    big = {"CHN", "USA", "IND", "RUS", "JPN", "BRA", "CAN", "KOR", "DEU", "FRA", "SAU", "IRN", "MEX", "IDN",
           "GBR", "TUR", "ITA", "ESP", "AUS", "TWN", "ZAF", "VNM", "THA", "EGY", "POL", "MYS", "ARE", "UKR"}
    assert big <= countries
    states = {r["zone"] for r in _rows("grid_intensity.csv") if r["zone"].startswith("US-")}
    assert len(states) == 51  # 50 states + DC


def test_cloud_regions_cover_three_providers_and_resolve() -> None:
    rows = _rows("cloud_regions.csv")
    providers = {r["provider"] for r in rows}
    assert providers == {"aws", "azure", "gcp"}
    for r in rows:
        if r["provider"] == "gcp":
            assert 0 <= float(r["google_cfe"]) <= 1
            assert float(r["grid_g_co2e_per_kwh"]) > 0
    regions = {r.code for r in list_regions()}
    assert {"us-east-1", "eastus", "us-central1", "europe-north1", "FRA", "US-VA"} <= regions


def test_pue_per_provider() -> None:
    pues = provider_pues()
    assert set(pues) == {"google", "aws", "microsoft", "meta", "unknown"}
    assert pues["unknown"].pue == pytest.approx(1.56)
    assert all(1.0 <= p.pue < 2.0 for p in pues.values())


def test_electricity_prices_in_range() -> None:
    prices = electricity_prices()
    assert "USA" in prices
    assert all(0.01 < usd < 1.0 for usd, _, _ in prices.values())


def test_host_systems_have_positive_overhead() -> None:
    for s in host_systems():
        assert 0 < s.host_max_w_per_gpu < 2 * s.gpu_tdp_w
