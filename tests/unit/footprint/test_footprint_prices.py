"""Electricity prices per country, cloud instance prices and the price seam (footprint/prices.py), CLI --spot."""

from __future__ import annotations

import csv
import json
from importlib import resources

import pytest

from greentrain import units
from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.footprint import prices
from greentrain.footprint.prices import CloudPrice, device_price_usd_per_s
from greentrain.footprint.regions import (
    electricity_price_gaps,
    electricity_prices,
    exchange_rates,
    get_region,
    list_regions,
    site_for_region,
)
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip

EU27 = {"AUT", "BEL", "BGR", "HRV", "CYP", "CZE", "DNK", "EST", "FIN", "FRA", "DEU", "GRC", "HUN", "IRL", "ITA",
        "LVA", "LTU", "LUX", "MLT", "NLD", "POL", "PRT", "ROU", "SVK", "SVN", "ESP", "SWE"}
# TPU v4 is sold in us-central2 (Oklahoma), a TPU-only zone that region-carbon-info does not list.
TPU_ONLY_REGIONS = {"us-central2"}


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("greentrain.footprint").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


@pytest.mark.parametrize("name", ["exchange_rates.csv", "cloud_prices.csv"])
def test_new_rows_name_source_and_date(name: str) -> None:
    for row in _rows(name):
        assert row["source"].strip(), row
        when = row.get("year") or row["date"]
        assert 2018 <= int(when[:4]) <= 2026, row


def test_electricity_prices_cover_eu27_with_eurostat_band_id() -> None:
    rows = {r["zone"]: r for r in _rows("electricity_prices.csv")}
    assert set(rows) >= EU27
    for zone in EU27:
        assert rows[zone]["currency"] == "EUR"
        assert "nrg_pc_205" in rows[zone]["source"] and "band ID" in rows[zone]["source"]
    # Eurostat 2025-S2, band ID excl. VAT: Finland cheapest (0.0674 EUR/kWh), Cyprus dearest (0.2366).
    eu = {z: float(rows[z]["price_per_kwh"]) for z in EU27}
    assert min(eu, key=eu.__getitem__) == "FIN" and max(eu, key=eu.__getitem__) == "CYP"


def test_every_price_currency_converts_and_lands_in_a_sane_range() -> None:
    rates = exchange_rates()
    assert rates["USD"] == 1.0 and 1.0 < rates["EUR"] < 1.3  # a euro buys between 1.0 and 1.3 dollars
    for zone, (usd, source, year) in electricity_prices().items():
        # Cheapest industrial power here ~3.6 US cents (Qatar), dearest ~35 (Hawaii).
        assert 0.02 < usd < 0.40, (zone, usd)
        assert source and 2020 <= year <= 2026
    assert electricity_prices()["FRA"][0] == pytest.approx(0.1212 * 1.0824)
    assert electricity_prices()["KOR"][0] == pytest.approx(182.7 * 0.000724)


def test_every_cloud_region_has_an_electricity_price_or_a_stated_gap() -> None:
    gaps = electricity_price_gaps()
    for region in list_regions():
        if region.kind != "cloud":
            continue
        assert region.electricity_usd_per_kwh > 0 or region.zone in gaps, region.code
    assert all(reason.strip() for reason in gaps.values())
    priced = set(electricity_prices())
    assert not priced & set(gaps), "a zone is both priced and listed as a gap"


def test_sub_national_zones_fall_back_to_their_country() -> None:
    assert get_region("US-WY").electricity_usd_per_kwh == pytest.approx(electricity_prices()["USA"][0])
    assert get_region("eu-west-3").electricity_usd_per_kwh == pytest.approx(electricity_prices()["FRA"][0])
    assert get_region("ca-central-1").electricity_usd_per_kwh == pytest.approx(0.0533 * 1 / 1.3013, rel=1e-4)


def test_cloud_price_rows_are_consistent() -> None:
    known = {r.code.lower() for r in list_regions() if r.kind == "cloud"} | TPU_ONLY_REGIONS
    seen = set()
    for row in _rows("cloud_prices.csv"):
        key = (row["provider"], row["instance"], row["region"], row["date"])  # one row per price-list date
        assert key not in seen
        seen.add(key)
        if row["spot_usd_per_hour"]:
            assert 0 < float(row["spot_usd_per_hour"]) < float(row["on_demand_usd_per_hour"])
        get_chip(row["chip"])  # every chip is a catalog chip
        assert row["region"] in known, row["region"]
        per_device = float(row["on_demand_usd_per_hour"]) / int(row["chips_per_instance"])
        assert float(row["usd_per_device_hour"]) == pytest.approx(per_device)
        assert 0.1 < per_device < 20.0  # T4 at 0.35 to H100 at 12.29 per device-hour
    providers = {p.provider for p in prices.cloud_prices()}
    assert providers == {"aws", "gcp", "azure"}


def test_lookup_picks_the_region_instance() -> None:
    h100 = get_chip("h100-sxm")
    q = device_price_usd_per_s(h100, site_for_region("us-east-1"))
    assert q is not None and q.instance == "p5.48xlarge" and q.provider == "aws"
    # the post-June-2025 list price (2026-11 row) supersedes the 2025-05 row of $98.32
    assert q.usd_per_device_s == pytest.approx(55.04 / 8 / units.HOUR_S) and q.date == "2026-11"
    q = device_price_usd_per_s(get_chip("a100-40gb"), site_for_region("eastus"))
    assert q is not None and q.instance == "Standard_ND96asr_v4"
    q = device_price_usd_per_s(get_chip("a100-40gb"), site_for_region("us-central1"))
    assert q is not None and q.instance == "a2-highgpu-8g"  # most chips per instance wins over a2-highgpu-1g


def test_lookup_falls_back_within_the_provider_and_says_so() -> None:
    q = device_price_usd_per_s(get_chip("h100-sxm"), site_for_region("us-west-2"))
    assert q is not None and q.region == "us-east-1" and "us-west-2" in q.source
    q = device_price_usd_per_s(get_chip("tpu-v4"), site_for_region("europe-west4"))
    assert q is not None and q.region == "us-central2"


def test_no_quote_for_grid_zones_other_providers_and_unpriced_spot() -> None:
    h100 = get_chip("h100-sxm")
    assert device_price_usd_per_s(h100, site_for_region("FRA")) is None
    assert device_price_usd_per_s(h100, Site.from_intensity(300.0)) is None
    assert device_price_usd_per_s(get_chip("mi300x"), site_for_region("eastus")) is None  # no ND MI300X v5 row
    assert device_price_usd_per_s(h100, site_for_region("eastus"), "spot") is None  # ND H100 v5: no spot row
    assert device_price_usd_per_s(get_chip("t4"), site_for_region("us-central1"), "spot") is None
    with pytest.raises(ConfigError, match="market"):
        device_price_usd_per_s(h100, site_for_region("us-east-1"), "reserved")


def _with_spot(monkeypatch: pytest.MonkeyPatch) -> None:
    row = CloudPrice(provider="aws", instance="p5.48xlarge", chip="h100-sxm", chips_per_instance=8,
                     region="us-east-1", on_demand_usd_per_s=98.32 / units.HOUR_S,
                     spot_usd_per_s=40.0 / units.HOUR_S, source="test row", date="2025-05")
    monkeypatch.setattr(prices, "_index", lambda: {("aws", "h100-sxm"): (row,)})
    prices._quote.cache_clear()
    monkeypatch.setattr(prices, "_quote", prices._quote.__wrapped__)


def test_spot_quote_when_published(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_spot(monkeypatch)
    q = device_price_usd_per_s(get_chip("h100-sxm"), site_for_region("us-east-1"), "spot")
    assert q is not None and q.market == "spot" and q.usd_per_device_hour == pytest.approx(5.0)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["footprint", "--chip", "h100", "--num-chips", "8", "--hours", "10", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_uses_the_instance_price_and_notes_it(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(capsys, "--region", "us-east-1", "--json")
    d = json.loads(out)
    assert rc == 0 and d["cost_usd"] == pytest.approx(80 * 55.04 / 8)
    assert any("p5.48xlarge" in n for n in d["notes"])
    rc, out, _ = _cli(capsys, "--region", "us-east-1", "--price-usd-per-hour", "2", "--json")
    assert json.loads(out)["cost_usd"] == pytest.approx(160.0)  # an explicit price wins


def test_cli_spot(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(capsys, "--region", "eastus", "--spot")  # Azure ND H100 v5 publishes no spot row here
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "spot" in err
    _with_spot(monkeypatch)
    rc, out, _ = _cli(capsys, "--region", "us-east-1", "--spot", "--json")
    assert rc == 0 and json.loads(out)["cost_usd"] == pytest.approx(80 * 5.0)


@pytest.mark.parametrize("argv", [["--region", "us-east-1", "--market", "reserved"],
                                  ["--region", "us-east-1", "--market", "reserved", "--spot"],
                                  ["--compare-regions", "us-east-1,FRA", "--spot"]])
def test_cli_bad_market_is_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(capsys, *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_newest_row_wins_per_market_and_old_rows_stay() -> None:
    rows = [r for r in prices.cloud_prices() if r.instance == "p5.48xlarge" and r.region == "us-east-1"]
    # the pre-cut list price, the SkyPilot spot snapshot (2025-11 lower bound) and the post-cut list price
    assert sorted(r.date for r in rows) == ["2025-05", "2025-11", "2026-11"]
    q = device_price_usd_per_s(get_chip("h100-sxm"), site_for_region("us-east-1"))
    assert q is not None and q.date == "2026-11"  # on-demand: the newest row with an on-demand price
    q = device_price_usd_per_s(get_chip("a100-40gb"), site_for_region("us-central1"))
    assert q is not None and q.date == "2025-03"  # a2-highgpu-8g: the 2025-03 row over the 2024-12 row
    assert q.usd_per_device_hour == pytest.approx(29.38708 / 8)


def _rows_as_index(monkeypatch: pytest.MonkeyPatch, *rows: CloudPrice) -> None:
    index: dict[tuple[str, str], tuple[CloudPrice, ...]] = {}
    for r in rows:
        index[(r.provider, r.chip)] = (*index.get((r.provider, r.chip), ()), r)
    monkeypatch.setattr(prices, "_index", lambda: index)
    monkeypatch.setattr(prices, "_quote", prices._quote.__wrapped__)


def _row(date: str, on_demand: float, spot: float | None) -> CloudPrice:
    return CloudPrice(provider="aws", instance="p5.48xlarge", chip="h100-sxm", chips_per_instance=8,
                      region="us-east-1", on_demand_usd_per_s=on_demand / units.HOUR_S,
                      spot_usd_per_s=None if spot is None else spot / units.HOUR_S, source="test", date=date)


def test_newest_rule_is_per_market(monkeypatch: pytest.MonkeyPatch) -> None:
    # a newer row without a spot price does not hide the older row's spot price; it does replace on-demand
    _rows_as_index(monkeypatch, _row("2025-05", 98.32, 40.0), _row("2026-11", 55.04, None),
                   _row("2024-01-15", 120.0, 16.0))
    site, h100 = site_for_region("us-east-1"), get_chip("h100-sxm")
    on_demand = device_price_usd_per_s(h100, site)
    spot = device_price_usd_per_s(h100, site, "spot")
    assert on_demand is not None and on_demand.date == "2026-11"
    assert on_demand.usd_per_device_hour == pytest.approx(6.88)
    assert spot is not None and spot.date == "2025-05" and spot.usd_per_device_hour == pytest.approx(5.0)


@pytest.mark.parametrize("date", ["2025", "2025-13", "25-05", "2025/05", ""])
def test_bad_row_date_is_a_config_error(date: str) -> None:
    with pytest.raises(ConfigError, match="date"):
        _row(date, 98.32, None)


@pytest.mark.parametrize(("chip", "region", "instance", "spot_usd_per_hour", "chips"), [
    ("h100-sxm", "us-central1", "a3-highgpu-8g", 35.3957497, 8),
    ("a100-80gb", "us-central1", "a2-ultragpu-8g", 16.2197468, 8),
    ("h200", "us-east-1", "p5en.48xlarge", 27.1988, 8),
    ("h200", "us-central1", "a3-ultragpu-8g", 50.0856, 8),
])
def test_published_spot_prices(chip: str, region: str, instance: str, spot_usd_per_hour: float,
                               chips: int) -> None:
    q = device_price_usd_per_s(get_chip(chip), site_for_region(region), "spot")
    assert q is not None and q.instance == instance and q.market == "spot"
    assert q.usd_per_device_hour == pytest.approx(spot_usd_per_hour / chips)
    on_demand = device_price_usd_per_s(get_chip(chip), site_for_region(region))
    assert on_demand is not None and q.usd_per_device_s < on_demand.usd_per_device_s


def test_spot_falls_back_within_the_provider() -> None:
    # us-east4 lists a3-megagpu-8g, so it is priced there; europe-west4 lists no GCP H100 row, so the cheapest
    # 8-GPU row of the other regions (a3-highgpu-8g, us-central1) is taken and the source says so
    q = device_price_usd_per_s(get_chip("h100-sxm"), site_for_region("us-east4"), "spot")
    assert q is not None and q.instance == "a3-megagpu-8g" and q.region == "us-east4"
    q = device_price_usd_per_s(get_chip("h100-sxm"), site_for_region("europe-west4"), "spot")
    assert q is not None and q.region == "us-central1" and "europe-west4" in q.source


def test_cli_spot_with_a_published_price(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _cli(capsys, "--region", "us-central1", "--spot", "--json")
    d = json.loads(out)
    assert rc == 0 and d["cost_usd"] == pytest.approx(80 * 35.3957497 / 8)
    assert any("a3-highgpu-8g" in n and "spot" in n for n in d["notes"])


def test_new_zone_hong_kong_and_remaining_gaps() -> None:
    assert exchange_rates()["HKD"] == pytest.approx(1 / 7.80, rel=1e-5)
    usd, source, year = electricity_prices()["HKG"]
    assert usd == pytest.approx(1.443 / 7.80, rel=1e-5) and "CLP" in source and year == 2025
    for code in ("asia-east2", "ap-east-1", "eastasia"):  # the Hong Kong regions of GCP, AWS and Azure
        assert get_region(code).electricity_usd_per_kwh == pytest.approx(usd)
    assert "HKG" not in electricity_price_gaps()
    assert {"NOR", "CHE", "SGP"} <= set(electricity_price_gaps())


def test_catalog_h200_price_is_the_p5en_row() -> None:
    row = next(r for r in prices.cloud_prices() if r.instance == "p5en.48xlarge")
    assert get_chip("h200").price_usd_per_s == pytest.approx(row.usd_per_device_s("on-demand"))


# --- third pass (2026-11-21): SkyPilot catalog spot snapshots, p6-b200, Azure ND rows, GBR --------------------

@pytest.mark.parametrize(("chip", "region", "instance", "spot_usd_per_hour", "date"), [
    ("a100-40gb", "us-east-1", "p4d.24xlarge", 2.4655, "2025-11"),
    ("a100-80gb", "us-east-1", "p4de.24xlarge", 8.6505, "2025-11"),
    ("h100-sxm", "us-east-1", "p5.48xlarge", 17.6289, "2025-11"),
    ("b200", "us-east-1", "p6-b200.48xlarge", 21.0148, "2025-11"),
    ("a100-80gb", "eastus", "Standard_ND96amsr_A100_v4", 3.6047, "2024-08"),
    ("a100-40gb", "eastus", "Standard_ND96asr_v4", 2.99167, "2024-08"),
    ("v100-32gb", "eastus", "Standard_ND40rs_v2", 2.42352, "2024-08"),
])
def test_skypilot_catalog_spot_snapshots(chip: str, region: str, instance: str, spot_usd_per_hour: float,
                                         date: str) -> None:
    q = device_price_usd_per_s(get_chip(chip), site_for_region(region), "spot")
    assert q is not None and q.instance == instance and q.date == date
    assert q.usd_per_device_hour == pytest.approx(spot_usd_per_hour / 8)
    assert "skypilot-catalog" in q.source


def test_spot_snapshot_does_not_displace_newer_on_demand_rows() -> None:
    # Azure ND96asr_v4: the 2024-08 snapshot carries spot; on-demand still comes from the 2026-11 row
    q = device_price_usd_per_s(get_chip("a100-40gb"), site_for_region("eastus"))
    assert q is not None and q.date == "2026-11" and q.usd_per_device_hour == pytest.approx(27.1968 / 8)
    # p6-b200: on-demand from the dated 2026-08 Vantage-derived row; same list price as the snapshot
    q = device_price_usd_per_s(get_chip("b200"), site_for_region("us-east-1"))
    assert q is not None and q.date == "2026-08" and q.usd_per_device_hour == pytest.approx(14.2416)


def test_new_on_demand_rows() -> None:
    q = device_price_usd_per_s(get_chip("a100-80gb"), site_for_region("eastus"))
    assert q is not None and q.instance == "Standard_ND96amsr_A100_v4"
    assert q.usd_per_device_hour == pytest.approx(32.77 / 8)
    q = device_price_usd_per_s(get_chip("v100-32gb"), site_for_region("eastus"))
    assert q is not None and q.usd_per_device_hour == pytest.approx(22.032 / 8)
    # b200 in another AWS region falls back to us-east-1 and says so
    q = device_price_usd_per_s(get_chip("b200"), site_for_region("us-west-2"))
    assert q is not None and q.region == "us-east-1" and "us-west-2" in q.source


def test_catalog_b200_price_is_the_p6_row_and_gaps_stay_unpriced() -> None:
    row = next(r for r in prices.cloud_prices() if r.instance == "p6-b200.48xlarge" and r.date == "2026-08")
    assert get_chip("b200").price_usd_per_s == pytest.approx(row.usd_per_device_s("on-demand"))
    assert get_chip("b200").price_usd_per_s * units.HOUR_S == pytest.approx(113.9328 / 8)
    # still no public on-demand price: the catalog says so rather than guessing
    assert not get_chip("mi300x").price_usd_per_s and not get_chip("h100-pcie").price_usd_per_s
    assert device_price_usd_per_s(get_chip("mi300x"), site_for_region("eastus")) is None


def test_new_zone_great_britain() -> None:
    assert exchange_rates()["GBP"] == pytest.approx(1.2782)
    usd, source, year = electricity_prices()["GBR"]
    assert usd == pytest.approx(0.243 * 1.2782) and year == 2025 and "non-domestic" in source.lower()
    for code in ("eu-west-2", "europe-west2", "uksouth"):  # the London regions of AWS, GCP and Azure
        assert get_region(code).electricity_usd_per_kwh == pytest.approx(usd)
    gaps = electricity_price_gaps()
    assert "GBR" not in gaps and len(gaps) == 12
    for zone, reason in gaps.items():
        assert "2026-11-21" in reason or "third" in reason, zone


def test_gap_file_rows_are_dated() -> None:
    for row in _rows("electricity_price_gaps.csv"):
        assert row["checked"] == "2026-11-21" and row["reason"].strip(), row


def test_catalog_b200_memory_is_the_driver_visible_capacity() -> None:
    # AWS p6-b200 GpuInfo (skypilot-catalog copy): 183,359 MiB per GPU, i.e. 179.06 GiB, not a binary 180 GiB
    assert get_chip("b200").memory_bytes == pytest.approx(183_359 * 2**20, rel=1e-5)
    assert get_chip("h200").memory_bytes == pytest.approx(144_384 * 2**20)  # 141 GiB exactly, same source
