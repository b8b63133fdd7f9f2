"""Regions: lookup, PUE defaults, market-based intensity, ranking, best start time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.footprint.compare import compare_regions, model_card_block
from greentrain.footprint.model import footprint
from greentrain.footprint.regions import get_region, list_regions, site_for_region
from greentrain.footprint.schedule import best_start, load_intensity_csv, window_means
from greentrain.footprint.site import DEFAULT_PUE


def test_cloud_region_uses_provider_pue_and_zone_grid() -> None:
    aws = get_region("us-east-1")
    assert aws.provider == "aws" and aws.zone == "US-VA"
    assert aws.pue == pytest.approx(1.15)
    assert aws.grid_g_co2e_per_kwh == pytest.approx(get_region("US-VA").grid_g_co2e_per_kwh)
    assert get_region("EASTUS").pue == pytest.approx(1.18)  # case-insensitive, Microsoft's PUE


def test_gcp_own_figure_and_market_based() -> None:
    r = get_region("europe-west9")
    assert r.grid_g_co2e_per_kwh == pytest.approx(16.30)  # GCP 2024 yearly data, Paris
    assert r.market_g_co2e_per_kwh == pytest.approx(16.30 * (1 - 0.96))
    assert r.site(market_based=True).grid_g_co2e_per_kwh == pytest.approx(16.30 * 0.04)
    with pytest.raises(ConfigError, match="market-based"):
        get_region("us-east-1").site(market_based=True)


def test_site_for_region_pue_rules() -> None:
    assert site_for_region("FRA").pue == pytest.approx(DEFAULT_PUE)
    assert site_for_region("us-central1").pue == pytest.approx(1.10)
    assert site_for_region("us-central1", pue=1.3).pue == pytest.approx(1.3)
    with pytest.raises(ConfigError, match="pue"):
        site_for_region("FRA", pue=0.95)


def test_site_source_names_the_pue_it_uses() -> None:
    """The last ';' part of a Site's source is its PUE's (the footprint table's 'how' column shows it)."""
    last = {code: site_for_region(code).source.split(";")[-1] for code in ("JPN", "us-east-1", "FRA")}
    assert "operator unknown" in last["JPN"] and "Uptime Institute" in last["JPN"]
    assert "AWS" in last["us-east-1"] and "operator unknown" not in site_for_region("us-east-1").source
    assert site_for_region("FRA", pue=1.2).source.split(";")[-1].strip() == "PUE: given"
    assert site_for_region("us-east-1", pue=1.3).source.count("PUE") == 1


def test_unknown_region_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"did you mean.*us-east-1"):
        get_region("us-east-l")


def test_list_regions_shape() -> None:
    regions = list_regions()
    assert len(regions) > 300
    assert {r.kind for r in regions} == {"country", "state", "province", "cloud"}
    assert len({r.code.lower() for r in regions}) == len(regions)
    assert all(r.source and r.year for r in regions)


def test_compare_ranks_by_co2e_and_cost() -> None:
    ranked = compare_regions(["us-central1", "europe-north1", "FRA"], num_chips=8, duration_s=3600.0,
                             power_w=500.0, price_usd_per_device_s=0.0)
    co2 = [r.footprint.emissions_kg_co2e for r in ranked]
    assert co2 == sorted(co2)
    assert [r.co2e_rank for r in ranked] == [1, 2, 3]
    assert ranked[0].region.code == "europe-north1"
    assert sorted(r.cost_rank for r in ranked) == [1, 2, 3]
    with pytest.raises(ConfigError, match="twice"):
        compare_regions(["FRA", "fra"], num_chips=1, duration_s=1.0, power_w=1.0)


def test_compare_prices_each_cloud_region_at_its_instance_price() -> None:
    from greentrain.footprint.prices import device_price_usd_per_s
    from greentrain.hardware.catalog import get_chip

    chip = get_chip("a100-40gb")
    ranked = compare_regions(["us-central1", "FRA"], num_chips=8, duration_s=3600.0, chip=chip)
    by = {r.region.code: r.footprint for r in ranked}
    quote = device_price_usd_per_s(chip, site_for_region("us-central1"))
    assert quote is not None and by["us-central1"].cost_usd == pytest.approx(8 * 3600 * quote.usd_per_device_s)
    assert any(quote.instance in n for n in by["us-central1"].notes)
    assert by["FRA"].cost_usd == pytest.approx(8 * 3600 * chip.price_usd_per_s)  # no cloud region: catalog price
    fixed = compare_regions(["us-central1"], num_chips=8, duration_s=3600.0, chip=chip, price_usd_per_device_s=1e-3)
    assert fixed[0].footprint.cost_usd == pytest.approx(8 * 3600 * 1e-3)  # a given price wins


def test_model_card_in_grams() -> None:
    site = site_for_region("europe-west9")
    fp = footprint(num_chips=2, duration_s=units.hours_to_s(3), site=site, power_w=400.0)
    card = model_card_block(fp, site=site, hardware="h100-sxm")["co2_eq_emissions"]
    assert card["emissions"] == pytest.approx(units.kg_to_g(fp.emissions_kg_co2e), abs=0.05)
    assert card["hardware_used"] == "2 x h100-sxm"
    assert "europe-west9" in card["geographical_location"]


def test_window_means_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    g = rng.uniform(50, 500, size=48)
    for hours in (1.0, 5.0, 6.5):
        means = window_means(g, hours)
        n = int(np.ceil(hours))
        for i in range(len(g) - n + 1):
            w = np.ones(n)
            if hours % 1:
                w[-1] = hours % 1
            assert means[i] == pytest.approx(float((g[i:i + n] * w).sum() / hours))


def test_best_start_from_csv(tmp_path: Path) -> None:
    path = tmp_path / "hourly.csv"
    values = [400, 380, 300, 100, 90, 120, 350, 420]
    lines = ["timestamp,g_co2e_per_kwh"] + [f"2024-06-01T{h:02d}:00:00,{v}" for h, v in enumerate(values)]
    path.write_text("\n".join(lines) + "\n")
    start = best_start(load_intensity_csv(path), job_hours=3)
    assert start.start_index == 3 and start.start_time == "2024-06-01T03:00:00"
    assert start.best_mean_g_co2e_per_kwh == pytest.approx((100 + 90 + 120) / 3)
    assert start.saving_vs_now == pytest.approx(1 - 310 / 3 / (1080 / 3))


def test_intensity_csv_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,watts\n2024-01-01T00:00:00,3\n")
    with pytest.raises(ConfigError, match="intensity column"):
        load_intensity_csv(bad)
    gap = tmp_path / "gap.csv"
    gap.write_text("timestamp,g_co2e_per_kwh\n2024-01-01T00:00:00,3\n2024-01-01T02:00:00,4\n")
    with pytest.raises(ConfigError, match="1 h apart"):
        load_intensity_csv(gap)
    with pytest.raises(ConfigError, match="longer than"):
        window_means(np.ones(3), 5.0)


def test_iso_alpha2_country_codes() -> None:
    from greentrain.footprint.regions import _table, country_aliases

    assert get_region("fr") is get_region("FRA") and get_region(" De ").code == "DEU"
    assert get_region("US").code == "USA" and get_region("us-east-1").provider == "aws"
    aliases, table = country_aliases(), _table()
    assert len(aliases) >= 200 and not set(aliases) & set(table)  # an alias never shadows a code
    assert all(table[z].kind == "country" for z in aliases.values())
    assert len(list_regions()) == len(table)  # aliases are not listed twice
    with pytest.raises(ConfigError, match="unknown region"):
        get_region("zz")
