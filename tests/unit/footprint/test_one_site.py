"""Issue 16 item 6: one Site constructor; the same energy at the same site gives the same CO2e through plan
(scenario files and flags), footprint, track and the Tracker; --compare-regions gives each region its PUE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.footprint.model import footprint
from greentrain.footprint.regions import build_site, get_region
from greentrain.footprint.site import DEFAULT_PUE, Site
from greentrain.measure.summary import make_site
from greentrain.scenario import site_from_dict


def _key(site: Site | None) -> tuple[object, ...]:
    assert site is not None
    return (site.region, site.carbon_intensity_kg_co2e_per_j, site.pue, site.electricity_usd_per_j)


@pytest.mark.parametrize("given", [{"grid_g_co2e_per_kwh": 400.0}, {"grid_g_co2e_per_kwh": 400.0, "pue": 1.2},
                                   {"region": "DEU"}, {"region": "us-east-1"}, {"region": "fr", "pue": 1.1}])
def test_plan_and_track_build_the_same_site(given: dict[str, object]) -> None:
    region, grid, pue = given.get("region"), given.get("grid_g_co2e_per_kwh"), given.get("pue")
    tracked = make_site(region, grid, pue)
    planned = site_from_dict(dict(given))
    assert _key(tracked) == _key(planned) == _key(build_site(**given))


def test_a_given_intensity_without_pue_takes_the_default_pue_everywhere() -> None:
    """track used PUE 1.0 where plan and footprint used 1.56: 56 % apart for the same energy."""
    assert make_site(None, 400.0) is not None and make_site(None, 400.0).pue == DEFAULT_PUE


def test_same_energy_same_co2e_through_footprint_cli_and_track(capsys: pytest.CaptureFixture[str]) -> None:
    # 8 chips x 500 W x 10 h = 40 kWh of device energy, no host power, at 400 g/kWh and the default PUE
    assert main(["footprint", "--chip", "h100-sxm", "--num-chips", "8", "--hours", "10", "--power-w", "500",
                 "--grid-g-per-kwh", "400", "--host-w-per-chip", "0", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    site = make_site(None, 400.0)
    assert site is not None
    fp = footprint(num_chips=1, duration_s=36000.0, site=site, power_w=8 * 500.0)  # how track computes it
    assert cli["operational_kg_co2e"] == pytest.approx(fp.operational_kg_co2e, rel=1e-12)
    assert fp.operational_kg_co2e == pytest.approx(40 * DEFAULT_PUE * 0.4)


def test_compare_regions_gives_each_region_its_own_pue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Germany's CO2e is the same whether the plan was made in us-east-1 or in Germany."""
    out = {}
    for region, pue in (("us-east-1", get_region("us-east-1").pue), ("DEU", get_region("DEU").pue)):
        path = tmp_path / f"{region}.json"
        path.write_text(json.dumps({"num_chips": 8, "run_time_s": 36000, "chip": "h100-sxm", "region": region,
                                    "pue": pue, "power_w_per_chip": 500}))
        assert main(["footprint", str(path), "--compare-regions", "DEU,us-east-1", "--json"]) == 0
        rows = {r["region"].upper(): r for r in json.loads(capsys.readouterr().out)["regions"]}
        out[region] = rows
        assert rows["DEU"]["pue"] == get_region("DEU").pue and rows["US-EAST-1"]["pue"] == get_region("us-east-1").pue
    assert out["us-east-1"]["DEU"]["emissions_kg_co2e"] == out["DEU"]["DEU"]["emissions_kg_co2e"]
