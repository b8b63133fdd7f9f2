"""The footprint arithmetic: energy from power x time x PUE, CO2e from grid intensity, cost.

Patterson et al. 2021 ("Carbon Emissions and Large Neural Network Training", §2 and Table 4):
    kWh = hours x n_processors x avg_power_W x PUE / 1000;  tCO2e = kWh x kgCO2e/kWh / 1000.
Power of a chip between idle and TDP, linear in utilization (the usual first-order model, e.g.
Lacoste et al. 2019 / ML CO2 Impact uses TDP x utilization; the idle floor follows CodeCarbon's GPU note).
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.hardware.chip import Chip


@dataclass(frozen=True, slots=True, kw_only=True)
class Footprint:
    duration_s: float
    num_chips: int
    device_hours: float
    power_w_per_chip: float  # average device power (measured or modelled)
    device_energy_j: float  # chips only, before PUE
    host_energy_j: float  # host CPU, RAM, network share, before PUE
    energy_j: float  # facility energy: (device + host) x PUE
    operational_kg_co2e: float
    embodied_kg_co2e: float
    emissions_kg_co2e: float
    cost_usd: float
    power_measured: bool = False

    @property
    def energy_kwh(self) -> float:
        return units.j_to_kwh(self.energy_j)


def chip_power_w(chip: Chip, utilization: float) -> float:
    """Average power of one chip busy a fraction ``utilization`` of the time: idle + (TDP - idle) x u."""
    require(0.0 <= utilization <= 1.0, "utilization", utilization, "must be in [0, 1]")
    if chip.tdp_w <= 0:
        raise ConfigError("chip", chip.name, "has no tdp_w in the catalog; give --power-w")
    return chip.idle_w + (chip.tdp_w - chip.idle_w) * utilization


def embodied_kg_co2e(chip: Chip | None, device_s: float, lifetime_s: float) -> float:
    """Embodied carbon amortized linearly over the chip's service lifetime."""
    if chip is None or chip.embodied_kg_co2e <= 0:
        return 0.0
    return chip.embodied_kg_co2e * device_s / lifetime_s


def footprint(*, num_chips: int, duration_s: float, site: Site, chip: Chip | None = None,
              utilization: float = 1.0, power_w: float | None = None, host_power_w_per_chip: float = 0.0,
              price_usd_per_device_s: float | None = None, lifetime_s: float = 4 * 365 * units.DAY_S) -> Footprint:
    """Energy, CO2e and cost of ``num_chips`` devices for ``duration_s`` seconds at ``site``.

    Cost: cloud price per device-second when known (argument, else the chip's catalog price), otherwise
    facility energy x the site's electricity price.
    """
    require(num_chips >= 1, "num_chips", num_chips, "must be >= 1")
    require(duration_s >= 0, "duration_s", duration_s, "must be >= 0")
    if power_w is None:
        if chip is None:
            raise ConfigError("chip", None, "a chip (for its TDP) or a measured power is needed")
        power_w = chip_power_w(chip, utilization)
    require(power_w >= 0, "power_w", power_w, "must be >= 0")
    device_s = num_chips * duration_s
    device_energy_j = power_w * device_s
    host_energy_j = host_power_w_per_chip * device_s
    energy_j = (device_energy_j + host_energy_j) * site.pue
    operational = energy_j * site.carbon_intensity_kg_co2e_per_j
    embodied = embodied_kg_co2e(chip, device_s, lifetime_s)
    price = price_usd_per_device_s if price_usd_per_device_s is not None else (chip.price_usd_per_s if chip else 0.0)
    cost = price * device_s if price > 0 else energy_j * site.electricity_usd_per_j
    return Footprint(duration_s=duration_s, num_chips=num_chips, device_hours=device_s / units.HOUR_S,
                     power_w_per_chip=power_w, device_energy_j=device_energy_j, host_energy_j=host_energy_j,
                     energy_j=energy_j, operational_kg_co2e=operational, embodied_kg_co2e=embodied,
                     emissions_kg_co2e=operational + embodied, cost_usd=cost)
