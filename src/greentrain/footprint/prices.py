"""Cloud prices per device-second from data/cloud_prices.csv: the seam between a (chip, site) and its cost.

The rule (docs/footprint.md, "Cloud prices"):
1. the site's region must be a cloud region (aws, azure or gcp); a grid zone (``FRA``, ``US-VA``) or a site
   given by its intensity has no instance price, and the caller keeps the chip's catalog price;
2. rows are dated (``date``, ``YYYY-MM`` or ``YYYY-MM-DD``, the date of the price list): of the rows for one
   (instance, region) only the NEWEST carrying a price in the asked market counts, so a list price that was cut
   (AWS P4/P5, June 2025) is superseded by its newer row while the old row stays in the table as history;
3. among that provider's instances carrying the chip in that region, take the one with the most chips per
   instance (the training shape), ties to the cheapest per device-hour;
4. if the region lists none, take the same provider's instance from its other regions by the same rule
   (ties to the cheapest), and say so in the quote's ``source``;
5. ``market="spot"`` uses the instance's published spot price (spot prices move: each row's source says when it
   was read); an instance without one gives no quote.
Price per device-second = instance price per hour / chips per instance / 3,600.

The CSV is read once (cached); a lookup is a dict access plus a cached per-(chip, region, market) result, so
the vectorised search can call ``device_price_usd_per_s`` for every (chip, site) it enumerates.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.footprint.regions import get_region
from greentrain.footprint.site import Site
from greentrain.hardware.chip import Chip

MARKETS = ("on-demand", "spot")
_DATE = re.compile(r"^(19|20)\d\d-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")  # YYYY-MM or YYYY-MM-DD


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudPrice:
    """One row of data/cloud_prices.csv: an instance type's published price in one region."""

    provider: str
    instance: str
    chip: str  # catalog name
    chips_per_instance: int
    region: str
    on_demand_usd_per_s: float  # the whole instance
    spot_usd_per_s: float | None  # the whole instance; None: no published spot price
    source: str
    date: str

    def __post_init__(self) -> None:
        where = f"cloud_prices.csv({self.instance}, {self.region})"
        require(bool(_DATE.match(self.date)), f"{where}.date", self.date, "must be YYYY-MM or YYYY-MM-DD")
        require(self.chips_per_instance >= 1, f"{where}.chips_per_instance", self.chips_per_instance, "must be >= 1")
        require(self.on_demand_usd_per_s > 0, f"{where}.on_demand_usd_per_hour",
                self.on_demand_usd_per_s * units.HOUR_S, "must be > 0")
        if self.spot_usd_per_s is not None:
            require(0 < self.spot_usd_per_s <= self.on_demand_usd_per_s, f"{where}.spot_usd_per_hour",
                    self.spot_usd_per_s * units.HOUR_S, "must be in (0, on-demand]")

    def usd_per_device_s(self, market: str) -> float | None:
        price = self.on_demand_usd_per_s if market == "on-demand" else self.spot_usd_per_s
        return None if price is None else price / self.chips_per_instance


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceQuote:
    usd_per_device_s: float
    instance: str
    provider: str
    region: str  # the region the price was published for (may differ from the site's: see source)
    market: str
    source: str
    date: str = ""  # the date of the price list the quote comes from

    @property
    def usd_per_device_hour(self) -> float:
        return self.usd_per_device_s * units.HOUR_S

    def note(self) -> str:
        """One line for a Footprint's notes: which instance priced the run."""
        return (f"cloud price: {self.provider} {self.instance} ({self.region}, {self.market}), "
                f"{self.usd_per_device_hour:.4f} USD per device-hour; {self.source}")


def _hourly(text: str) -> float | None:
    text = text.strip()
    return float(text) / units.HOUR_S if text else None


@cache
def cloud_prices() -> tuple[CloudPrice, ...]:
    """Every row of data/cloud_prices.csv."""
    text = resources.files("greentrain.footprint").joinpath("data", "cloud_prices.csv").read_text(encoding="utf-8")
    rows = []
    for r in csv.DictReader(text.splitlines()):
        on_demand = _hourly(r["on_demand_usd_per_hour"])
        if on_demand is None:
            raise ConfigError(f"cloud_prices.csv({r['instance']}).on_demand_usd_per_hour", None, "is required")
        rows.append(CloudPrice(provider=r["provider"], instance=r["instance"], chip=r["chip"],
                               chips_per_instance=int(r["chips_per_instance"]), region=r["region"].lower(),
                               on_demand_usd_per_s=on_demand, spot_usd_per_s=_hourly(r["spot_usd_per_hour"]),
                               source=f"{r['source']} [{r['date']}]", date=r["date"]))
    return tuple(rows)


@cache
def _index() -> dict[tuple[str, str], tuple[CloudPrice, ...]]:
    """(provider, chip) -> its rows."""
    out: dict[tuple[str, str], list[CloudPrice]] = {}
    for row in cloud_prices():
        out.setdefault((row.provider, row.chip), []).append(row)
    return {k: tuple(v) for k, v in out.items()}


def _newest(rows: list[CloudPrice], market: str) -> list[CloudPrice]:
    """Per (instance, region), the newest row with a price in ``market`` (rule 2 of the module docstring)."""
    newest: dict[tuple[str, str], CloudPrice] = {}
    for r in rows:
        if r.usd_per_device_s(market) is None:
            continue
        key = (r.instance, r.region)
        if key not in newest or r.date > newest[key].date:  # ISO dates compare as strings
            newest[key] = r
    return list(newest.values())


def _best(rows: list[CloudPrice], market: str) -> CloudPrice | None:
    """Newest row per instance, then most chips per instance, then cheapest per device-second."""
    priced = [(r, p) for r in _newest(rows, market) if (p := r.usd_per_device_s(market)) is not None]
    if not priced:
        return None
    return min(priced, key=lambda rp: (-rp[0].chips_per_instance, rp[1]))[0]


@cache
def _quote(chip_name: str, region_code: str, market: str) -> PriceQuote | None:
    try:
        region = get_region(region_code)
    except ConfigError:
        return None  # not a region of the bundled tables: no instance price
    if region.kind != "cloud":
        return None
    rows = _index().get((region.provider, chip_name), ())
    here = _best([r for r in rows if r.region == region.code.lower()], market)
    best = here or _best(list(rows), market)
    if best is None:
        return None
    source = best.source
    if here is None:
        source = (f"no {market} price listed for {region.provider} {chip_name} in {region.code}; "
                  f"the {best.region} price is used: {source}")
    price = best.usd_per_device_s(market)
    assert price is not None  # _best only returns rows priced in this market
    return PriceQuote(usd_per_device_s=price, instance=best.instance, provider=best.provider, region=best.region,
                      market=market, source=source, date=best.date)


def device_price_usd_per_s(chip: Chip, site: Site, market: str = "on-demand") -> PriceQuote | None:
    """The cloud price per device-second of ``chip`` at ``site``'s cloud region, or None (use the catalog price).

    ``market``: ``on-demand`` or ``spot``. See the module docstring for the rule.
    """
    if market not in MARKETS:
        raise ConfigError("market", market, f"must be one of {', '.join(MARKETS)}")
    if not site.region:
        return None
    return _quote(chip.name, site.region.strip().lower(), market)
