"""Regions: grid zones (countries, US states, provinces) and cloud regions, from the CSVs in footprint/data.

Every row of every CSV names its source and year. A cloud region maps to the grid zone it sits in; its grid
intensity is the provider's own figure where one is published (GCP), else its zone's (location-based). Codes
are case-insensitive: ``FRA``, ``US-VA``, ``CA-QC``, ``us-east-1`` (AWS), ``eastus`` (Azure),
``us-central1`` (GCP).

Conventions (see docs/footprint.md):
- location-based: the average intensity of the grid the region draws from (GHG Protocol Scope 2 Guidance,
  2015);
- market-based: GCP only, as the grid intensity of the hours not covered by Google's carbon-free energy,
  ``grid x (1 - CFE%)`` (Google's "Google CFE" definition, region-carbon-info README). AWS and Azure
  publish no per-region figure, so their market-based value is left out.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass
from functools import cache
from importlib import resources

from greentrain import units
from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError, did_you_mean
from greentrain.footprint.site import DEFAULT_PUE, Site

KINDS = ("country", "state", "province", "cloud")
PROVIDERS = ("aws", "azure", "gcp")
_PUE_PROVIDER = {"aws": "aws", "azure": "microsoft", "gcp": "google"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    code: str
    name: str
    kind: str  # country, state, province or cloud
    provider: str  # "" for a grid zone; aws, azure or gcp
    grid_g_co2e_per_kwh: float  # location-based
    pue: float  # the provider's published PUE; DEFAULT_PUE (unknown operator) for a grid zone
    electricity_usd_per_kwh: float  # 0: unknown
    source: str
    year: int
    zone: str = ""  # the grid zone of a cloud region (its own code for a zone)
    market_g_co2e_per_kwh: float | None = None  # where the provider publishes the data for it

    def __post_init__(self) -> None:
        require(self.kind in KINDS, f"region({self.code}).kind", self.kind,
                f"must be one of {', '.join(KINDS)}")
        require(self.grid_g_co2e_per_kwh >= 0, f"region({self.code}).grid_g_co2e_per_kwh",
                self.grid_g_co2e_per_kwh, "must be >= 0")
        require(self.pue >= 1.0, f"region({self.code}).pue", self.pue, "must be >= 1")
        require(1990 <= self.year <= 2100, f"region({self.code}).year", self.year, "must be a plausible year")

    def site(self, pue: float | None = None, market_based: bool = False) -> Site:
        """This region as a Site; ``pue`` overrides the provider's PUE."""
        g = self.grid_g_co2e_per_kwh
        if market_based:
            if self.market_g_co2e_per_kwh is None:
                raise ConfigError("region", self.code, "no market-based intensity is published for it")
            g = self.market_g_co2e_per_kwh
        source = self.source if pue is None else self.source.rsplit("; PUE:", 1)[0] + "; PUE: given"
        return Site.from_intensity(g, pue=self.pue if pue is None else pue, region=self.code,
                                   electricity_usd_per_kwh=self.electricity_usd_per_kwh, source=source)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderPue:
    provider: str
    pue: float
    scope: str
    source: str
    year: int


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("greentrain.footprint").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


@cache
def provider_pues() -> dict[str, ProviderPue]:
    """PUE per operator (google, aws, microsoft, meta, unknown), data/pue.csv."""
    return {r["provider"]: ProviderPue(provider=r["provider"], pue=float(r["pue"]), scope=r["scope"],
                                       source=r["source"], year=int(r["year"])) for r in _rows("pue.csv")}


@cache
def exchange_rates() -> dict[str, float]:
    """Currency -> USD per unit, data/exchange_rates.csv (each row names its source and year)."""
    return {r["currency"]: float(r["usd_per_unit"]) for r in _rows("exchange_rates.csv")}


@cache
def electricity_prices() -> dict[str, tuple[float, str, int]]:
    """Zone -> (USD per kWh, source, year), data/electricity_prices.csv.

    Prices are stored in the currency their source publishes them in and converted here with
    data/exchange_rates.csv, so a figure can be checked against its source as written.
    """
    rates = exchange_rates()
    out = {}
    for r in _rows("electricity_prices.csv"):
        if r["currency"] not in rates:
            raise ConfigError(f"electricity_prices.csv({r['zone']}).currency", r["currency"],
                              "has no row in exchange_rates.csv")
        usd = float(r["price_per_kwh"]) * rates[r["currency"]]
        out[r["zone"]] = (usd, f"{r['source']} ({r['sector']}, {r['currency']})", int(r["year"]))
    return out


@cache
def electricity_price_gaps() -> dict[str, str]:
    """Zone -> why no electricity price is bundled for it, data/electricity_price_gaps.csv."""
    return {r["zone"]: r["reason"] for r in _rows("electricity_price_gaps.csv")}


# A sub-national zone without its own price takes its country's (US states: the EIA US average).
_PARENT = {"US-": "USA", "CA-": "CAN", "AU-": "AUS"}


def _price(zone: str) -> float:
    prices = electricity_prices()
    if zone in prices:
        return prices[zone][0]
    parent = _PARENT.get(zone[:3], "")
    return prices[parent][0] if parent in prices else 0.0


def _cite(pue: ProviderPue) -> str:
    return pue.source if str(pue.year) in pue.source else f"{pue.source} {pue.year}"


def _zones() -> dict[str, Region]:
    out = {}
    unknown = provider_pues()["unknown"]
    for r in _rows("grid_intensity.csv"):
        code = r["zone"]
        out[code] = Region(code=code, name=r["name"], kind=r["kind"], provider="",
                           grid_g_co2e_per_kwh=float(r["grid_g_co2e_per_kwh"]), pue=DEFAULT_PUE,
                           electricity_usd_per_kwh=_price(code),
                           source=f"{r['source']} [{r['basis']}]; PUE (operator unknown): {_cite(unknown)}",
                           year=int(r["year"]), zone=code)
    return out


def _cloud(r: dict[str, str], zones: dict[str, Region]) -> Region:
    code, zone_code = r["code"], r["zone"]
    if zone_code not in zones:
        raise ConfigError(f"cloud_regions.csv({code}).zone", zone_code, "is not a zone of grid_intensity.csv")
    zone = zones[zone_code]
    pue = provider_pues()[_PUE_PROVIDER[r["provider"]]]
    own = r["grid_g_co2e_per_kwh"].strip()
    market = None
    if own and r["google_cfe"].strip():
        # Google CFE% = share of hours on carbon-free energy (region-carbon-info README); the rest at grid.
        market = float(own) * (1.0 - float(r["google_cfe"]))
    source = f"{r['source']} {r['year']}"
    if not own:
        source += f"; grid: {zone.source.split('; PUE', 1)[0]} {zone.year}"
    source += f"; PUE: {_cite(pue)}"
    return Region(code=code, name=r["name"], kind="cloud", provider=r["provider"],
                  grid_g_co2e_per_kwh=float(own) if own else zone.grid_g_co2e_per_kwh, pue=pue.pue,
                  electricity_usd_per_kwh=zone.electricity_usd_per_kwh, source=source,
                  year=int(r["year"]) if own else zone.year, zone=zone_code, market_g_co2e_per_kwh=market)


@cache
def _table() -> dict[str, Region]:
    zones = _zones()
    table = {code.lower(): z for code, z in zones.items()}
    for r in _rows("cloud_regions.csv"):
        key = r["code"].lower()
        if key in table:
            raise ConfigError("cloud_regions.csv.code", r["code"], "is listed twice")
        table[key] = _cloud(r, zones)
    return table


def list_regions() -> tuple[Region, ...]:
    """Every grid zone and cloud region: countries, states, provinces, then clouds by provider."""
    order = {k: i for i, k in enumerate(KINDS)}
    return tuple(sorted(_table().values(), key=lambda r: (order[r.kind], r.provider, r.code)))


@cache
def country_aliases() -> dict[str, str]:
    """ISO 3166-1 alpha-2 code -> the country zone (alpha-3), data/country_codes.csv: ``fr`` is ``FRA``."""
    return {r["alpha_2"].lower(): r["alpha_3"].lower() for r in _rows("country_codes.csv")}


def get_region(code: str) -> Region:
    """A grid zone (ISO 3166-1 alpha-3 or alpha-2 country, US-XX state, CA-XX province) or cloud region."""
    key = code.strip().lower()
    table = _table()
    key = key if key in table else country_aliases().get(key, key)
    if key not in table:
        raise ConfigError("region", code, "unknown region" + did_you_mean(key, table, "greentrain catalog regions"))
    return table[key]


def codecarbon_location(code: str) -> dict[str, str]:
    """A region code in CodeCarbon's emissions.csv location columns (docs/output: country_name; country_iso_code,
    the 3-letter ISO code; region, the province/state where the infrastructure is hosted; on_cloud Y/N;
    cloud_provider aws/azure/gcp; cloud_region, the provider's region). All blank when no region is known."""
    out = dict.fromkeys(("country_name", "country_iso_code", "region", "cloud_provider", "cloud_region",
                         "on_cloud"), "")
    if not code:
        return out
    r = get_region(code)
    out["on_cloud"] = "Y" if r.kind == "cloud" else "N"
    if r.kind == "cloud":
        out["cloud_provider"], out["cloud_region"] = r.provider, r.code
    zone = get_region(r.zone) if r.zone and r.zone.lower() != r.code.lower() else r
    if zone.kind == "country":
        out["country_name"], out["country_iso_code"] = zone.name, zone.code.upper()
    elif zone.kind in ("state", "province"):  # US-VA, CA-QC: the country from the ISO 3166-2 prefix
        country = get_region(zone.code.split("-")[0])
        out["country_name"], out["country_iso_code"] = country.name, country.code.upper()
        out["region"] = zone.name.split(" (")[0].lower()  # CodeCarbon writes "virginia", "quebec"
    return out


def build_site(*, region: str | None = None, grid_g_co2e_per_kwh: float | None = None, pue: float | None = None,
               electricity_usd_per_kwh: float | None = None, market_based: bool = False) -> Site | None:
    """The one constructor of a Site, used by plan, search, simulate, footprint, track and the Tracker, so the
    same energy at the same site gives the same CO2e everywhere (None when neither a region nor an intensity
    is given).

    - ``grid_g_co2e_per_kwh`` given: that intensity (``region`` is then only a label), PUE ``pue`` else
      DEFAULT_PUE (an unknown operator: Uptime Institute 2024 average);
    - else ``region``: its intensity and its own PUE (the provider's for a cloud region, else DEFAULT_PUE)
      unless ``pue`` is given;
    - ``electricity_usd_per_kwh`` replaces the region's price.
    """
    if pue is not None:
        BOUNDS["pue"].check(pue, "pue")
    if grid_g_co2e_per_kwh is not None:
        BOUNDS["grid_g_co2e_per_kwh"].check(grid_g_co2e_per_kwh, "grid_g_co2e_per_kwh")
        site = Site.from_intensity(grid_g_co2e_per_kwh, pue=DEFAULT_PUE if pue is None else pue,
                                   region=region or "", source="given")
    elif region:
        site = get_region(region).site(pue=pue, market_based=market_based)
    elif region is not None:  # "" (a scenario's "no region" label) only beside a given intensity
        raise ConfigError("region", region, "must be a region code (greentrain catalog regions), not empty")
    else:
        return None
    if electricity_usd_per_kwh is not None:
        site = with_electricity_price(site, electricity_usd_per_kwh)
    return site


def site_for_region(code: str, pue: float | None = None) -> Site:
    """The Site of a region code; ``pue`` None: the provider's PUE, else DEFAULT_PUE (unknown operator)."""
    if pue is not None:
        BOUNDS["pue"].check(pue, "pue")
    return get_region(code).site(pue=pue)


def with_electricity_price(site: Site, usd_per_kwh: float) -> Site:
    BOUNDS["electricity_usd_per_kwh"].check(usd_per_kwh, "electricity_usd_per_kwh")
    return dataclasses.replace(site, electricity_usd_per_j=units.usd_per_kwh_to_usd_per_j(usd_per_kwh))
