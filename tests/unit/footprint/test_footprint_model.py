"""footprint(): energy, CO2e and cost arithmetic, host overhead, embodied carbon, bad input."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.footprint.host import default_host_power_w_per_chip, host_max_w_per_chip
from greentrain.footprint.model import chip_power_w, footprint, footprint_arrays
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip

SITE = Site.from_intensity(400.0, pue=1.2, electricity_usd_per_kwh=0.10)


def test_energy_and_co2e_by_hand() -> None:
    fp = footprint(num_chips=4, duration_s=units.hours_to_s(10), site=SITE, power_w=500.0,
                   host_power_w_per_chip=100.0, price_usd_per_device_s=0.0)
    # (4 x 500 W + 4 x 100 W) x 10 h x 1.2 = 28.8 kWh; x 0.4 kg/kWh = 11.52 kg; x 0.10 USD = 2.88 USD
    assert fp.energy_kwh == pytest.approx(28.8)
    assert fp.operational_kg_co2e == pytest.approx(11.52)
    assert fp.cost_usd == pytest.approx(2.88)
    assert fp.cost_basis == "electricity"
    assert fp.device_hours == pytest.approx(40.0)


def test_power_between_idle_and_tdp() -> None:
    chip = get_chip("a100-80gb")
    assert chip_power_w(chip, 0.0) == pytest.approx(chip.idle_w)
    assert chip_power_w(chip, 1.0) == pytest.approx(chip.tdp_w)
    assert chip.idle_w < chip_power_w(chip, 0.5) < chip.tdp_w


def test_measured_energy_wins_over_utilization() -> None:
    chip = get_chip("h100-sxm")
    e = units.kwh_to_j(10.0)
    fp = footprint(num_chips=2, duration_s=units.hours_to_s(10), site=SITE, chip=chip, utilization=1.0,
                   device_energy_j=e)
    assert fp.power_measured
    assert fp.power_w_per_chip == pytest.approx(500.0)  # 10 kWh / 20 device-hours
    assert fp.device_energy_j == pytest.approx(e)


def test_host_default_from_dgx_a100() -> None:
    chip = get_chip("a100-80gb")
    # DGX A100 datasheet: 6.5 kW max, 8 x 400 W GPUs -> (6500 - 3200) / 8 = 412.5 W per GPU
    assert host_max_w_per_chip(chip) == pytest.approx(412.5)
    assert default_host_power_w_per_chip(chip, chip.tdp_w / 2) == pytest.approx(412.5 / 2)
    fp = footprint(num_chips=1, duration_s=3600, site=SITE, chip=chip, host_power_w_per_chip=None)
    assert fp.host_power_w_per_chip == pytest.approx(412.5)


def test_embodied_amortized_over_lifetime() -> None:
    chip = get_chip("a100-80gb")
    assert chip.embodied_kg_co2e > 0
    life = units.years_to_s(4)
    fp = footprint(num_chips=8, duration_s=life / 8, site=SITE, chip=chip, lifetime_s=life)
    assert fp.embodied_kg_co2e == pytest.approx(chip.embodied_kg_co2e)  # 8 chips x 1/8 of a life
    assert fp.emissions_kg_co2e == pytest.approx(fp.operational_kg_co2e + fp.embodied_kg_co2e)


def test_without_chip_embodied_is_zero_and_said() -> None:
    fp = footprint(num_chips=1, duration_s=3600, site=SITE, power_w=300.0)
    assert fp.embodied_kg_co2e == 0.0
    assert any("no chip given" in n for n in fp.notes) and not any("--" in n for n in fp.notes)


def test_cloud_and_on_premises_cost() -> None:
    chip = get_chip("h100-sxm")
    cloud = footprint(num_chips=8, duration_s=units.hours_to_s(2), site=SITE, chip=chip,
                      price_usd_per_device_s=2.0 / units.HOUR_S)
    assert cloud.cost_basis == "cloud"
    assert cloud.cost_usd == pytest.approx(32.0)
    life = units.years_to_s(5)
    onprem = footprint(num_chips=8, duration_s=units.hours_to_s(2), site=SITE, chip=chip,
                       hardware_usd_per_chip=30000.0, lifetime_s=life, host_power_w_per_chip=0.0)
    hardware = 30000.0 * 8 * units.hours_to_s(2) / life
    assert onprem.cost_basis == "on-premises"
    assert onprem.cost_usd == pytest.approx(onprem.energy_kwh * 0.10 + hardware)


def test_more_pue_more_energy() -> None:
    a = footprint(num_chips=1, duration_s=3600, site=SITE, power_w=300.0)
    b = footprint(num_chips=1, duration_s=3600, site=dataclasses.replace(SITE, pue=1.5), power_w=300.0)
    assert b.energy_j / a.energy_j == pytest.approx(1.5 / 1.2)


def test_to_dict_has_unit_keys() -> None:
    d = footprint(num_chips=1, duration_s=3600, site=SITE, power_w=300.0).to_dict()
    for key in ("energy_kwh", "emissions_kg_co2e", "operational_kg_co2e", "embodied_kg_co2e", "cost_usd",
                "device_hours"):
        assert key in d


@pytest.mark.parametrize("kwargs, field", [
    ({"utilization": 1.5}, "utilization"),
    ({"utilization": -0.1}, "utilization"),
    ({"duration_s": -1.0}, "duration_s"),
    ({"num_chips": 0}, "num_chips"),
    ({"power_w": -5.0}, "power_w"),
])
def test_bad_input(kwargs: dict[str, float], field: str) -> None:
    args: dict[str, Any] = {"num_chips": 1, "duration_s": 3600.0, "site": SITE, "chip": get_chip("a100-80gb"),
                            **kwargs}
    with pytest.raises(ConfigError) as e:
        footprint(**args)
    assert e.value.field == field


def test_pue_below_one_rejected() -> None:
    with pytest.raises(ConfigError, match="pue"):
        Site.from_intensity(300.0, pue=0.9)


def test_chip_without_tdp_needs_power() -> None:
    chip = dataclasses.replace(get_chip("a100-80gb"), tdp_w=0.0, idle_w=0.0)
    with pytest.raises(ConfigError, match="tdp_w"):
        footprint(num_chips=1, duration_s=3600.0, site=SITE, chip=chip)


@pytest.mark.parametrize("site, price", [
    (Site.from_intensity(400.0, pue=1.3, electricity_usd_per_kwh=0.1), None),  # the chip's catalog price
    (Site.from_intensity(50.0, pue=1.1, electricity_usd_per_kwh=0.1), 0.0),  # no price: electricity
    (Site.from_intensity(300.0, pue=1.2), 0.0),  # neither: unknown
])
def test_arrays_are_the_scalar_formula(site: Site, price: float | None) -> None:
    """One formula: each row of footprint_arrays is footprint() of that run with the modelled power and the
    default host overhead, to the bit."""
    chip = get_chip("h100-sxm")
    duration_s, utilization = np.array([10.0, 5e4, 3.6e6]), np.array([0.0, 0.45, 1.0])
    cols = footprint_arrays(num_chips=32, duration_s=duration_s, utilization=utilization, site=site, chip=chip,
                            price_usd_per_device_s=price)
    for i in range(len(duration_s)):
        one = footprint(num_chips=32, duration_s=float(duration_s[i]), site=site, chip=chip,
                        utilization=float(utilization[i]), host_power_w_per_chip=None, price_usd_per_device_s=price)
        assert cols.cost_basis == one.cost_basis
        assert (cols.energy_j[i], cols.operational_kg_co2e[i], cols.embodied_kg_co2e[i], cols.emissions_kg_co2e[i],
                cols.cost_usd[i], cols.device_hours[i]) == (one.energy_j, one.operational_kg_co2e,
                                                            one.embodied_kg_co2e, one.emissions_kg_co2e,
                                                            one.cost_usd, one.device_hours)
