"""`greentrain footprint`: energy, operational and embodied CO2e, and cost of a run (thin: no arithmetic).

    greentrain footprint plan.json
    greentrain footprint --chip a100-80gb --num-chips 64 --days 3 --region us-east-1 [--json]
    greentrain footprint --power-w 330 --num-chips 10000 --days 14.8 --pue 1.1 --grid-g-per-kwh 429
    greentrain footprint ... --compare-regions us-east-1,europe-north1,FRA
    greentrain footprint --chip h100 --num-chips 8 --hours 24 --region us-east-1 [--spot]   # instance price
    greentrain footprint ... --model-card
    greentrain footprint ... --intensity-csv hourly.csv      # best start time for this job length
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from greentrain import units
from greentrain.cli.argtypes import bounded, finite_float, name_text, path_text, positive_float, positive_int
from greentrain.config import BOUNDS, as_float, as_int, load_mapping, require, split_list
from greentrain.errors import ConfigError
from greentrain.footprint.compare import TRAINING_TYPES, compare_regions, model_card_block
from greentrain.footprint.inputs import RunFile, RunInputs, run_inputs
from greentrain.footprint.model import DEFAULT_LIFETIME_S, Footprint, footprint
from greentrain.footprint.prices import MARKETS, device_price_usd_per_s
from greentrain.footprint.regions import build_site
from greentrain.footprint.schedule import best_start, load_intensity_csv
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.hardware.chip import Chip
from greentrain.report import footprint as render
from greentrain.results.codec import SIGNATURES, from_dict
from greentrain.results.kinds import PlanResult, TrackResult
from greentrain.results.view import stamp

MAX_POWER_TDP_RATIO = 1.5  # the most a measured average power per chip may exceed the chip's TDP by


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_json", nargs="?", help="a `plan --json` or `track` JSON file")
    parser.add_argument("--chip", help="catalog chip (TDP, idle power, embodied CO2e, price)")
    parser.add_argument("--num-chips", type=positive_int)
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--hours", type=positive_float, help="wall-clock run time")
    when.add_argument("--days", type=positive_float, help="wall-clock run time")
    power = parser.add_mutually_exclusive_group()
    power.add_argument("--power-w", type=bounded("chip_power_w"),
                       help=f"measured average power per chip (W), at most {MAX_POWER_TDP_RATIO:g} x the chip's TDP")
    power.add_argument("--utilization", type=finite_float,
                       help="chip power between idle (0) and TDP (1); default 1")
    parser.add_argument("--host-w-per-chip", type=bounded("chip_power_w"),
                        help="host CPU/RAM/network power per chip (W); default: DGX-derived, see docs")
    parser.add_argument("--pue", type=bounded("pue"),
                        help="facility energy / IT energy (default: provider's, or 1.56)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--region", type=name_text, help="country (ISO3), US-XX state, or cloud region code")
    where.add_argument("--grid-g-per-kwh", type=bounded("grid_g_co2e_per_kwh"), help="grid intensity, g CO2e per kWh")
    parser.add_argument("--market-based", action="store_true",
                        help="GCP regions: intensity net of Google CFE")
    cost = parser.add_mutually_exclusive_group()
    cost.add_argument("--price-usd-per-hour", type=bounded("usd_per_chip_hour"),
                        help="cloud price per chip-hour (on-demand or spot); default: the instance price of "
                             "the region (footprint/data/cloud_prices.csv), else the chip catalog's")
    parser.add_argument("--market", default=None,
                        help=f"cloud price market: {', '.join(MARKETS)} (default on-demand)")
    parser.add_argument("--spot", action="store_true", help="same as --market spot")
    parser.add_argument("--electricity-usd-per-kwh", type=bounded("electricity_usd_per_kwh"),
                        help="override the region's electricity price")
    cost.add_argument("--hardware-usd-per-chip", type=bounded("hardware_usd_per_chip"),
                        help="on-premises: purchase price per chip (with its server share); cost = "
                             "energy x electricity price + hardware amortized over the lifetime")
    parser.add_argument("--lifetime-years", type=bounded("lifetime_years"),
                        help="hardware service life for amortization (default 4)")
    parser.add_argument("--compare-regions", help="comma-separated region codes, ranked by CO2e and by cost")
    parser.add_argument("--intensity-csv", help="hourly grid intensity CSV: best start time for this job",
                        type=path_text)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--model-card", action="store_true", help="print the Hugging Face co2_eq_emissions YAML")
    parser.add_argument("--training-type", default="pre-training", choices=TRAINING_TYPES,
                        help="model-card training_type")
    out.add_argument("--json", action="store_true", help="print JSON (units in the keys)")


# A hand-written run file with these keys and no meters is a plan: its power per chip is modelled
PLAN_KEYS = ("step_time_s", "mfu")


def read_run_file(path: str) -> RunFile:
    """RUN.json: a plan or track result (a ``kind``, or the keys of one kind) is read through results/codec.py
    as its typed view (an unknown kind, a newer schema version, a malformed field: one line naming the file
    and the field); any other mapping is a hand-written run, its keys checked one by one."""
    data = load_mapping(path, field="run_json")
    if "kind" in data or any(signature(data) for _, signature in SIGNATURES):
        view = from_dict(data, path)
        if not isinstance(view, (PlanResult, TrackResult)):
            raise ConfigError("run_json", path, f"is a {view.KIND} result, not a run: give the JSON of "
                                                f"greentrain plan --json or a measurement.json")
        values = view.to_dict()
        if isinstance(view, TrackResult):  # a measurement names its ranks and its span its own way
            values = {**values, "num_chips": values.get("num_chips") or values.get("world_size"),
                      "run_time_s": values.get("run_time_s") or values.get("duration_s")}
        return _run_file(values, Path(path).name, predicted=isinstance(view, PlanResult))
    return _run_file(data, Path(path).name, predicted=all(k in data for k in PLAN_KEYS) and "meters" not in data)


def _run_file(values: Mapping[str, Any], where: str, *, predicted: bool) -> RunFile:
    def num(key: str) -> float | None:  # an integer stays one, so a range error quotes the file's value
        value = values.get(key)
        if value is None:
            return None
        number = as_float(value, f"{where}.{key}")
        return value if isinstance(value, int) else number

    chip = values.get("chip") or ""
    if isinstance(chip, dict):
        chip = chip.get("name", "")
    count = values.get("num_chips")
    return RunFile(where=where, num_chips=None if count is None else as_int(count, f"{where}.num_chips"),
                   run_time_s=num("run_time_s"), device_hours=num("device_hours"), chip=str(chip),
                   region=str(values.get("region") or ""), pue=num("pue"), device_energy_kwh=num("device_energy_kwh"),
                   power_w_per_chip=num("power_w_per_chip"), utilization=num("utilization"), mfu=num("mfu"),
                   energy_kwh=num("energy_kwh"), predicted=predicted)


def _run_inputs(args: argparse.Namespace) -> RunInputs:
    base = run_inputs(read_run_file(args.run_json)) if args.run_json else None
    num_chips = args.num_chips if args.num_chips is not None else (base.num_chips if base else None)
    if num_chips is None:
        raise ConfigError("--num-chips", None, "is required (or a plan/track JSON file)")
    require(num_chips >= 1, "--num-chips", num_chips, "must be >= 1")
    for flag, value, to_s in (("--hours", args.hours, units.hours_to_s), ("--days", args.days, units.days_to_s)):
        if value is not None:  # range and reason: config.BOUNDS["duration_s"]
            require(value >= 0, flag, value, "must be >= 0")
            require(BOUNDS["duration_s"].ok(to_s(value)), flag, value, "must be at most "
                    f"{units.s_to_days(BOUNDS['duration_s'].hi):,.0f} days: {BOUNDS['duration_s'].reason}")
    if args.hours is not None:
        duration = units.hours_to_s(args.hours)
    elif args.days is not None:
        duration = units.days_to_s(args.days)
    elif base is not None:
        duration = base.duration_s
    else:
        raise ConfigError("--hours", None, "is required (or --days, or a plan/track JSON file)")
    if args.utilization is not None:
        require(0.0 <= args.utilization <= 1.0, "--utilization", args.utilization, "must be in [0, 1]")
    if args.power_w is not None:
        require(args.power_w >= 0, "--power-w", args.power_w, "must be >= 0")
    measured = args.power_w is not None or args.utilization is not None
    return RunInputs(num_chips=num_chips, duration_s=duration, chip=args.chip or (base.chip if base else ""),
                     region=args.region or (base.region if base else ""),
                     utilization=args.utilization if args.utilization is not None else (
                         base.utilization if base else None),
                     # a flag replaces the file's device power: --utilization drops a measured power_w
                     power_w=args.power_w if args.power_w is not None else (
                         base.power_w if base and args.utilization is None else None),
                     device_energy_j=None if measured or base is None else base.device_energy_j,
                     pue=args.pue if args.pue is not None else (base.pue if base else None),
                     mfu_as_utilization=(args.utilization is None and base is not None
                                         and base.mfu_as_utilization),
                     power_predicted=not measured and base is not None and base.power_predicted)


def _site(args: argparse.Namespace, run: RunInputs) -> Site:
    """footprint.regions.build_site, the one Site constructor (plan, track and the Tracker use it too)."""
    if run.pue is not None:
        require(run.pue >= 1.0, "--pue", run.pue, "must be >= 1 (facility energy / IT energy)")
    if args.grid_g_per_kwh is not None:
        require(args.grid_g_per_kwh >= 0, "--grid-g-per-kwh", args.grid_g_per_kwh, "must be >= 0")
        require(not args.market_based, "--market-based", True, "applies to a --region's grid, not --grid-g-per-kwh")
    require(args.grid_g_per_kwh is not None or bool(run.region), "--region", None,
            "is required (or --grid-g-per-kwh)")
    site = build_site(region=None if args.grid_g_per_kwh is not None else run.region,
                      grid_g_co2e_per_kwh=args.grid_g_per_kwh, pue=run.pue,
                      electricity_usd_per_kwh=args.electricity_usd_per_kwh, market_based=args.market_based)
    assert site is not None
    return site


def _chip(run: RunInputs) -> Chip | None:
    return get_chip(run.chip) if run.chip else None


def _check_power(run: RunInputs, chip: Chip | None, from_flag: bool) -> None:
    """A measured average power per chip cannot be far above the chip's TDP: NVML holds the board to its power
    limit (the catalog's TDP), so an average over a run above MAX_POWER_TDP_RATIO x TDP is not one chip's
    power (host power goes in --host-w-per-chip). The margin leaves room for a raised limit and meter error."""
    if run.power_w is None or chip is None or chip.tdp_w <= 0:
        return
    limit = MAX_POWER_TDP_RATIO * chip.tdp_w
    require(run.power_w <= limit, "--power-w" if from_flag else "power_w_per_chip", run.power_w,
            f"must be <= {limit:g} W ({MAX_POWER_TDP_RATIO:g} x the {chip.name} TDP of {chip.tdp_w:g} W); "
            "host power goes in --host-w-per-chip")


def _check_compare_flags(args: argparse.Namespace) -> None:
    """--compare-regions prints a ranking of regions: flags about one site or one output would be ignored."""
    for flag, value in (("--region", args.region), ("--grid-g-per-kwh", args.grid_g_per_kwh),
                        ("--model-card", args.model_card or None), ("--intensity-csv", args.intensity_csv),
                        ("--market-based", args.market_based or None)):
        if value is not None:
            raise ConfigError(flag, value, "conflicts with --compare-regions (which ranks the listed regions)")


def _footprint_kwargs(args: argparse.Namespace, run: RunInputs, chip: Chip | None) -> dict[str, Any]:
    if chip is None and run.power_w is None and run.device_energy_j is None:
        raise ConfigError("--chip", None, "is required unless --power-w (a measured power per chip) is given")
    _check_power(run, chip, from_flag=args.power_w is not None)
    price = None
    if args.price_usd_per_hour is not None:
        require(args.price_usd_per_hour >= 0, "--price-usd-per-hour", args.price_usd_per_hour, "must be >= 0")
        price = args.price_usd_per_hour / units.HOUR_S
    lifetime = DEFAULT_LIFETIME_S
    if args.lifetime_years is not None:
        require(args.lifetime_years > 0, "--lifetime-years", args.lifetime_years, "must be > 0")
        lifetime = units.years_to_s(args.lifetime_years)
    hardware = args.hardware_usd_per_chip or 0.0
    require(hardware >= 0, "--hardware-usd-per-chip", hardware, "must be >= 0")
    return {"num_chips": run.num_chips, "duration_s": run.duration_s, "chip": chip,
            "utilization": 1.0 if run.utilization is None else run.utilization, "power_w": run.power_w,
            "device_energy_j": run.device_energy_j, "host_power_w_per_chip": args.host_w_per_chip,
            "price_usd_per_device_s": price, "lifetime_s": lifetime, "hardware_usd_per_chip": hardware,
            "power_predicted": run.power_predicted}


def _market(args: argparse.Namespace) -> str:
    if args.spot and args.market not in (None, "spot"):
        raise ConfigError("--market", args.market, "conflicts with --spot (which means --market spot)")
    market = "spot" if args.spot else ("on-demand" if args.market is None else args.market)  # "" is not a market
    require(market in MARKETS, "--market", market, f"must be one of {', '.join(MARKETS)}")
    return str(market)


def _priced_footprint(args: argparse.Namespace, site: Site, chip: Chip | None,
                      kwargs: dict[str, Any]) -> Footprint:
    """The footprint at ``site``, costed at the region's instance price when no price was given."""
    market = _market(args)
    explicit = kwargs["price_usd_per_device_s"] is not None or kwargs["hardware_usd_per_chip"] > 0
    quote = None if explicit or chip is None else device_price_usd_per_s(chip, site, market)
    if market == "spot" and quote is None and not explicit:
        raise ConfigError("--spot", chip.name if chip else None,
                          f"no published spot price for this chip in region {site.region or '(none)'}; "
                          "give --price-usd-per-hour")
    if quote is None:
        return footprint(site=site, **kwargs)
    fp = footprint(site=site, **{**kwargs, "price_usd_per_device_s": quote.usd_per_device_s})
    return dataclasses.replace(fp, notes=(*fp.notes, quote.note()))


def run(args: argparse.Namespace) -> int:
    run_in = _run_inputs(args)
    chip = _chip(run_in)
    kwargs = _footprint_kwargs(args, run_in, chip)
    if args.compare_regions:
        if _market(args) != "on-demand":
            raise ConfigError("--spot", "--compare-regions", "spot prices are not ranked across regions yet")
        _check_compare_flags(args)
        codes = split_list(args.compare_regions, "--compare-regions")
        # each region at its own PUE unless --pue was given: a run file's PUE is its own site's
        ranked = compare_regions(codes, pue=args.pue, **kwargs)
        as_json = json.dumps(stamp("footprint", render.compare_dict(ranked)), indent=2)
        print(as_json if args.json else render.compare_table(ranked))
        return 0
    site = _site(args, run_in)
    fp = _priced_footprint(args, site, chip, kwargs)
    start = None
    if args.intensity_csv:
        start = best_start(load_intensity_csv(args.intensity_csv), units.s_to_hours(run_in.duration_s))
    if args.model_card:
        block = model_card_block(fp, site=site, hardware=chip.name if chip else "",
                                 training_type=args.training_type)
        print(yaml.safe_dump(block, sort_keys=False), end="")
    elif args.json:
        print(json.dumps(stamp("footprint", render.footprint_dict(fp, start)), indent=2))
    else:
        print(render.footprint_table(fp, site, chip, start, mfu=run_in.mfu_as_utilization))
    return 0
