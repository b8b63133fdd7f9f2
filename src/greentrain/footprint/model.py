"""The footprint arithmetic: energy from power x time x PUE, CO2e from grid intensity, cost.

Patterson et al. 2021 ("Carbon Emissions and Large Neural Network Training", §2 and Table 4):
    kWh = hours x n_processors x avg_power_W x PUE / 1000;  tCO2e = kWh x kgCO2e/kWh / 1000.
Power of a chip between idle and TDP, linear in utilization (the usual first-order model, e.g.
Lacoste et al. 2019 / ML CO2 Impact uses TDP x utilization; the idle floor follows CodeCarbon's GPU note).
Host overhead (CPU, RAM, network) per chip: footprint/host.py. Embodied carbon: the chip's catalog figure
amortized linearly over its service lifetime (the per-device-hour convention of Luccioni et al. 2022, BLOOM).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.footprint.host import default_host_power_w_per_chip
from greentrain.footprint.site import Site
from greentrain.hardware.chip import Chip
from greentrain.num import FloatArray, Num, all_true

# Service lifetime over which embodied carbon and on-premises hardware are amortized: 4 years, a conservative
# convention (a shorter life gives each hour a larger share). Hyperscalers depreciate servers over 6 years
# (Microsoft FY2023 and Alphabet 2023 annual reports); pass lifetime_s to use that instead.
DEFAULT_LIFETIME_S = units.years_to_s(4.0)
COST_BASES = ("cloud", "on-premises", "electricity", "unknown")


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
    host_power_w_per_chip: float = 0.0
    pue: float = 1.0
    grid_g_co2e_per_kwh: float = 0.0
    region: str = ""
    cost_basis: str = "unknown"  # cloud (device-hours x price), on-premises (energy + hardware), electricity
    lifetime_s: float = DEFAULT_LIFETIME_S
    notes: tuple[str, ...] = ()

    @property
    def energy_kwh(self) -> float:
        return units.j_to_kwh(self.energy_j)

    @property
    def energy_basis(self) -> str:
        """"measured" (a meter's power or energy) or "predicted" (a plan's, or the chip's power line)."""
        return "measured" if self.power_measured else "predicted"

    def to_dict(self) -> dict[str, Any]:
        """JSON form, the unit in every key."""
        return {
            "energy_kwh": self.energy_kwh,
            "device_energy_kwh": units.j_to_kwh(self.device_energy_j),
            "host_energy_kwh": units.j_to_kwh(self.host_energy_j),
            "emissions_kg_co2e": self.emissions_kg_co2e,
            "operational_kg_co2e": self.operational_kg_co2e,
            "embodied_kg_co2e": self.embodied_kg_co2e,
            "cost_usd": self.cost_usd,
            "cost_basis": self.cost_basis,
            "device_hours": self.device_hours,
            "num_chips": self.num_chips,
            "run_time_s": self.duration_s,
            "power_w_per_chip": self.power_w_per_chip,
            "power_measured": self.power_measured,
            "energy_basis": self.energy_basis,
            "host_power_w_per_chip": self.host_power_w_per_chip,
            "pue": self.pue,
            "grid_g_co2e_per_kwh": self.grid_g_co2e_per_kwh,
            "region": self.region,
            "lifetime_years": self.lifetime_s / units.years_to_s(1.0),
            "notes": list(self.notes),
        }


def chip_power_w(chip: Chip, utilization: Num) -> Num:
    """Average power of one chip busy a fraction ``utilization`` of the time: idle + (TDP - idle) x u."""
    require(all_true((utilization >= 0.0) & (utilization <= 1.0)), "utilization", utilization, "must be in [0, 1]")
    if chip.tdp_w <= 0:
        raise ConfigError("chip", chip.name, "has no tdp_w in the catalog; give a measured power per chip (power_w)")
    return chip.idle_w + (chip.tdp_w - chip.idle_w) * utilization


def embodied_kg_co2e(chip: Chip | None, device_s: Num, lifetime_s: float) -> Num:
    """Embodied carbon amortized linearly over the chip's service lifetime."""
    if chip is None or chip.embodied_kg_co2e <= 0:
        return 0.0 * device_s
    return chip.embodied_kg_co2e * device_s / lifetime_s


def _device_power_w(chip: Chip | None, utilization: float, power_w: float | None,
                    device_energy_j: float | None, device_s: float) -> tuple[float, bool]:
    """Average power per chip and whether it was measured (a power, or an energy over the run)."""
    require(0.0 <= utilization <= 1.0, "utilization", utilization, "must be in [0, 1]")
    if device_energy_j is not None:
        require(device_energy_j >= 0, "device_energy_j", device_energy_j, "must be >= 0")
        return (device_energy_j / device_s if device_s > 0 else 0.0), True
    if power_w is not None:
        require(power_w >= 0, "power_w", power_w, "must be >= 0")
        return power_w, True
    if chip is None:
        raise ConfigError("chip", None, "a chip (for its TDP) or a measured power is needed")
    return chip_power_w(chip, utilization), False


def _cost(device_s: Num, energy_j: Num, site: Site, chip: Chip | None,
          price_usd_per_device_s: float | None, hardware_usd_per_chip: float,
          lifetime_s: float) -> tuple[Num, str]:
    """Cloud: device-seconds x price. On-premises: energy x electricity price + hardware amortized."""
    if hardware_usd_per_chip > 0:
        hardware = hardware_usd_per_chip * device_s / lifetime_s
        return energy_j * site.electricity_usd_per_j + hardware, "on-premises"
    price = price_usd_per_device_s
    if price is None:
        price = chip.price_usd_per_s if chip else 0.0
    if price > 0:
        return price * device_s, "cloud"
    if site.electricity_usd_per_j > 0:
        return energy_j * site.electricity_usd_per_j, "electricity"
    return 0.0 * device_s, "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Amounts:
    """The footprint's figures for a device time and power (floats, or a column per run)."""

    device_energy_j: Num
    host_energy_j: Num
    energy_j: Num
    operational_kg_co2e: Num
    embodied_kg_co2e: Num
    cost_usd: Num
    cost_basis: str


def _amounts(*, device_s: Num, power_w: Num, host_power_w: Num, site: Site, chip: Chip | None,
             price_usd_per_device_s: float | None, hardware_usd_per_chip: float, lifetime_s: float) -> _Amounts:
    """Energy (Patterson et al. 2021 §2: power x time x PUE), CO2e (x the grid's kgCO2e per kWh, + embodied)
    and cost of ``device_s`` device-seconds at ``power_w`` per chip and ``host_power_w`` of host per chip."""
    dev_energy_j = power_w * device_s
    host_energy_j = host_power_w * device_s
    energy_j = (dev_energy_j + host_energy_j) * site.pue  # Patterson et al. 2021 §2: x PUE
    cost, basis = _cost(device_s, energy_j, site, chip, price_usd_per_device_s, hardware_usd_per_chip, lifetime_s)
    return _Amounts(device_energy_j=dev_energy_j, host_energy_j=host_energy_j, energy_j=energy_j,
                    operational_kg_co2e=energy_j * site.carbon_intensity_kg_co2e_per_j,  # Patterson et al. §2
                    embodied_kg_co2e=embodied_kg_co2e(chip, device_s, lifetime_s), cost_usd=cost, cost_basis=basis)


def footprint(*, num_chips: int, duration_s: float, site: Site, chip: Chip | None = None,
              utilization: float = 1.0, power_w: float | None = None,
              host_power_w_per_chip: float | None = 0.0,
              price_usd_per_device_s: float | None = None, lifetime_s: float = DEFAULT_LIFETIME_S,
              device_energy_j: float | None = None, hardware_usd_per_chip: float = 0.0,
              power_predicted: bool = False) -> Footprint:
    """Energy, CO2e and cost of ``num_chips`` devices for ``duration_s`` seconds at ``site``.

    Device power: a measured ``device_energy_j`` (all chips), else a measured ``power_w`` per chip, else the
    chip's idle-to-TDP line at ``utilization``. Cost: on-premises when ``hardware_usd_per_chip`` is given,
    else the cloud price per device-second (argument, else the chip's catalog price), else facility energy x
    the site's electricity price. ``host_power_w_per_chip`` None: the DGX-derived default (footprint/host.py).
    ``power_predicted``: ``power_w`` / ``device_energy_j`` come from a prediction (a plan), not a meter.
    """
    require(num_chips >= 1, "num_chips", num_chips, "must be >= 1")
    require(duration_s >= 0, "duration_s", duration_s, "must be >= 0")
    require(lifetime_s > 0, "lifetime_s", lifetime_s, "must be > 0")
    require(hardware_usd_per_chip >= 0, "hardware_usd_per_chip", hardware_usd_per_chip, "must be >= 0")
    if price_usd_per_device_s is not None:
        require(price_usd_per_device_s >= 0, "price_usd_per_hour", price_usd_per_device_s * units.HOUR_S,
                "must be >= 0")
    device_s = num_chips * duration_s
    power, measured = _device_power_w(chip, utilization, power_w, device_energy_j, device_s)
    measured = measured and not power_predicted
    if host_power_w_per_chip is None:
        host_power_w_per_chip = default_host_power_w_per_chip(chip, power)
    require(host_power_w_per_chip >= 0, "host_power_w_per_chip", host_power_w_per_chip, "must be >= 0")
    a = _amounts(device_s=device_s, power_w=power, host_power_w=host_power_w_per_chip, site=site, chip=chip,
                 price_usd_per_device_s=price_usd_per_device_s, hardware_usd_per_chip=hardware_usd_per_chip,
                 lifetime_s=lifetime_s)
    notes = []
    if chip is None:
        notes.append("embodied carbon not counted: no chip given (a chip's embodied_kg_co2e)")
    elif chip.embodied_kg_co2e <= 0:
        notes.append(f"embodied carbon not counted: chip {chip.name} has no embodied_kg_co2e in the catalog")
    if a.cost_basis == "unknown":
        notes.append("cost unknown: give a cloud price, or an electricity price (region or value)")
    return Footprint(duration_s=duration_s, num_chips=num_chips, device_hours=device_s / units.HOUR_S,
                     power_w_per_chip=power, device_energy_j=a.device_energy_j, host_energy_j=a.host_energy_j,
                     energy_j=a.energy_j, operational_kg_co2e=a.operational_kg_co2e,
                     embodied_kg_co2e=a.embodied_kg_co2e,
                     emissions_kg_co2e=a.operational_kg_co2e + a.embodied_kg_co2e, cost_usd=a.cost_usd,
                     power_measured=measured, host_power_w_per_chip=host_power_w_per_chip, pue=site.pue,
                     grid_g_co2e_per_kwh=site.grid_g_co2e_per_kwh, region=site.region, cost_basis=a.cost_basis,
                     lifetime_s=lifetime_s, notes=tuple(notes))


@dataclass(frozen=True, slots=True, kw_only=True)
class FootprintArrays:
    """footprint()'s figures for many runs of one chip type, chip count and site (the vectorised search)."""

    device_hours: FloatArray
    energy_j: FloatArray
    operational_kg_co2e: FloatArray
    embodied_kg_co2e: FloatArray
    emissions_kg_co2e: FloatArray
    cost_usd: FloatArray
    cost_basis: str


def footprint_arrays(*, num_chips: int, duration_s: FloatArray, utilization: FloatArray, site: Site, chip: Chip,
                     price_usd_per_device_s: float | None = None,
                     lifetime_s: float = DEFAULT_LIFETIME_S) -> FootprintArrays:
    """footprint() with the modelled chip power (idle-to-TDP line at ``utilization``) and the default host
    overhead, as estimate_run calls it, over arrays of durations and utilizations: the same formulas."""
    device_s = num_chips * np.asarray(duration_s, dtype=np.float64)
    power = chip_power_w(chip, np.asarray(utilization, dtype=np.float64))
    a = _amounts(device_s=device_s, power_w=power, host_power_w=default_host_power_w_per_chip(chip, power),
                 site=site, chip=chip, price_usd_per_device_s=price_usd_per_device_s, hardware_usd_per_chip=0.0,
                 lifetime_s=lifetime_s)
    return FootprintArrays(device_hours=device_s / units.HOUR_S, energy_j=a.energy_j,
                           operational_kg_co2e=a.operational_kg_co2e, embodied_kg_co2e=a.embodied_kg_co2e,
                           emissions_kg_co2e=a.operational_kg_co2e + a.embodied_kg_co2e, cost_usd=a.cost_usd,
                           cost_basis=a.cost_basis)
