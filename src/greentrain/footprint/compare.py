"""Rank regions for one run by CO2e and by cost; the Hugging Face model-card ``co2_eq_emissions`` block."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.footprint.model import Footprint, footprint
from greentrain.footprint.prices import device_price_usd_per_s
from greentrain.footprint.regions import Region, get_region
from greentrain.footprint.site import Site


@dataclass(frozen=True, slots=True, kw_only=True)
class RegionFootprint:
    region: Region
    footprint: Footprint
    co2e_rank: int  # 1 = least CO2e (TIE_RULE)
    cost_rank: int  # 1 = cheapest (TIE_RULE)


# equal values never rank in the order they were listed: the other measure decides, then the region code
TIE_RULE = "ties: by the other measure (cost for the CO2e rank, CO2e for the cost rank), then by region code"


def compare_regions(codes: list[str], *, pue: float | None = None,
                    **kwargs: Any) -> tuple[RegionFootprint, ...]:
    """The same run (``footprint`` keyword arguments but ``site``) in each region, sorted by CO2e."""
    if not codes:
        raise ConfigError("compare_regions", codes, "give at least one region code")
    if len(set(c.lower() for c in codes)) != len(codes):
        raise ConfigError("compare_regions", ",".join(codes), "a region is listed twice")
    regions = [get_region(c) for c in codes]
    fps = [_footprint_in(r.site(pue=pue), kwargs) for r in regions]
    by_co2 = sorted(range(len(regions)), key=lambda i: (fps[i].emissions_kg_co2e, fps[i].cost_usd, regions[i].code))
    by_cost = sorted(range(len(regions)), key=lambda i: (fps[i].cost_usd, fps[i].emissions_kg_co2e, regions[i].code))
    cost_rank = {i: n + 1 for n, i in enumerate(by_cost)}
    return tuple(RegionFootprint(region=regions[i], footprint=fps[i], co2e_rank=n + 1, cost_rank=cost_rank[i])
                 for n, i in enumerate(by_co2))


def _footprint_in(site: Site, kwargs: dict[str, Any]) -> Footprint:
    """The run at ``site``; a cloud run without a given price pays that region's instance price (prices.py)."""
    chip = kwargs.get("chip")
    if chip is not None and kwargs.get("price_usd_per_device_s") is None and not kwargs.get("hardware_usd_per_chip"):
        quote = device_price_usd_per_s(chip, site)
        if quote is not None:
            fp = footprint(site=site, **{**kwargs, "price_usd_per_device_s": quote.usd_per_device_s})
            return dataclasses.replace(fp, notes=(*fp.notes, quote.note()))
    return footprint(site=site, **kwargs)


# the Hub's co2_eq_emissions.training_type: "pre-training or fine-tuning" (huggingface.co/docs/hub/model-cards-co2)
TRAINING_TYPES = ("pre-training", "fine-tuning")


def model_card_block(fp: Footprint, *, site: Site, hardware: str, training_type: str = "pre-training",
                     source: str = "greentrain") -> dict[str, Any]:
    """The ``co2_eq_emissions`` metadata of a Hugging Face model card (emissions in grams).

    Keys as documented in huggingface_hub's model-card metadata (``emissions``, ``source``, ``training_type``,
    ``geographical_location``, ``hardware_used``); ``training_type`` is one of TRAINING_TYPES.
    """
    if training_type not in TRAINING_TYPES:
        raise ConfigError("training_type", training_type, f"must be one of {', '.join(TRAINING_TYPES)}")
    location = site.region or f"grid {site.grid_g_co2e_per_kwh:.0f} gCO2e/kWh"
    if site.region:
        with contextlib.suppress(ConfigError):
            location = f"{get_region(site.region).name} ({site.region})"
    return {"co2_eq_emissions": {
        "emissions": round(units.kg_to_g(fp.emissions_kg_co2e), 1),
        "source": source,
        "training_type": training_type,
        "geographical_location": location,
        "hardware_used": f"{fp.num_chips} x {hardware}" if hardware else f"{fp.num_chips} devices",
    }}
