"""Cost and CO2e of a measured variant at a site, through footprint/ (the formulas live there, not here).

CO2e: measured IT energy x PUE x the grid intensity of the site (footprint.footprint with ``device_energy_j``).
$: billed time (the worker's wall time, whatever the utilisation) x the machine's price per hour; without a
price, facility energy x the site's electricity price. The basis is recorded so that rankings never mix them.
Beside it, always when the region has an electricity price: the electricity bill of the run there (facility energy
x the region's $/kWh, the catalog's region data), so that re-pricing in another region shows a regional $. Storage:
the bytes a variant keeps x a $/GB-month price x the months they are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.experiment.job import SiteSpec
from greentrain.footprint.model import embodied_kg_co2e, footprint
from greentrain.footprint.site import Site
from greentrain.hardware.chip import Chip


@dataclass(frozen=True, slots=True, kw_only=True)
class Pricing:
    region: str
    grid_g_co2e_per_kwh: float | None
    pue: float
    facility_energy_j: float
    emissions_kg_co2e: float | None  # operational + embodied; None without a region or grid intensity
    embodied_kg_co2e: float
    cost_usd: float | None
    cost_basis: str  # cloud | electricity | unknown
    electricity_cost_usd: float | None = None  # facility energy x the region's electricity price; None: unknown
    electricity_usd_per_kwh: float | None = None  # the site's price (catalog region data); None: unknown


def site_of(spec: SiteSpec, region: str | None = None) -> Site | None:
    """The Site of ``spec`` (or of ``region`` for a re-pricing); None when neither a region nor an intensity."""
    from greentrain.measure.summary import make_site

    try:
        if region is not None:
            return make_site(region, None, spec.pue)
        return make_site(spec.region or None, spec.grid_g_co2e_per_kwh, spec.pue)
    except ConfigError as e:
        raise ConfigError("site.reprice" if region is not None else f"site.{e.field}", e.value, e.rule) from None


def reprice_regions(spec: SiteSpec, regions: Sequence[str], field: str) -> tuple[str, ...]:
    """The regions to re-price in, checked before any work: each a known region, named once (``--reprice FRA
    FRA`` summed the variants twice in F10; ``--reprice ''`` re-priced nowhere without a word)."""
    seen: dict[str, str] = {}
    for region in regions:
        text = str(region)
        require(bool(text.strip()), field, text, "must name a region (`greentrain catalog regions`)")
        try:
            s = site_of(spec, text)
        except ConfigError as e:
            raise ConfigError(field, text, e.rule) from None
        key = (s.region if s is not None else text).casefold()
        require(key not in seen, field, text, f"is the region of {seen.get(key)!r} again: name each region once")
        seen[key] = text
    return tuple(seen.values())


def price(*, energy_j: float, wall_s: float, site: Site | None, usd_per_hour: float | None,
          chip: Chip | None = None) -> Pricing:
    """CO2e and $ of ``energy_j`` of IT energy used over ``wall_s`` billed seconds at ``site``. With the
    ``chip`` it ran on, CO2e includes the chip's embodied carbon over ``wall_s``, as ``plan`` counts it
    (footprint.model.embodied_kg_co2e); the cost basis does not change with it (never the chip's catalog price)."""
    per_s = usd_per_hour / units.HOUR_S if usd_per_hour is not None else None
    if site is None:
        cost = per_s * wall_s if per_s is not None else None
        return Pricing(region="", grid_g_co2e_per_kwh=None, pue=1.0, facility_energy_j=energy_j,
                       emissions_kg_co2e=None, embodied_kg_co2e=0.0, cost_usd=cost,
                       cost_basis="cloud" if cost is not None else "unknown")
    fp = footprint(num_chips=1, duration_s=wall_s, site=site, device_energy_j=energy_j, host_power_w_per_chip=0.0,
                   price_usd_per_device_s=per_s)
    # the same run billed by its electricity (footprint's electricity basis: no device price given)
    bill = fp if per_s is None else footprint(num_chips=1, duration_s=wall_s, site=site, device_energy_j=energy_j,
                                              host_power_w_per_chip=0.0)
    embodied = embodied_kg_co2e(chip, wall_s, fp.lifetime_s)
    known = site.electricity_usd_per_j > 0
    return Pricing(region=site.region, grid_g_co2e_per_kwh=site.grid_g_co2e_per_kwh, pue=site.pue,
                   facility_energy_j=fp.energy_j, emissions_kg_co2e=fp.operational_kg_co2e + embodied,
                   embodied_kg_co2e=embodied, cost_usd=fp.cost_usd if fp.cost_basis != "unknown" else None,
                   cost_basis=fp.cost_basis,
                   electricity_cost_usd=bill.cost_usd if known and bill.cost_basis == "electricity" else None,
                   electricity_usd_per_kwh=site.electricity_usd_per_j * units.KWH_J if known else None)


def storage_cost_usd(stored_bytes: float, usd_per_gb_month: float | None, months: float) -> float | None:
    """$ of keeping ``stored_bytes`` for ``months`` at ``usd_per_gb_month`` (object storage bills GB-months,
    1 GB = 1e9 bytes, e.g. Azure Blob Storage's price list); None without a price."""
    if usd_per_gb_month is None:
        return None
    return stored_bytes / units.GB * usd_per_gb_month * months
