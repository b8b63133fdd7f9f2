"""`greentrain search`: rank every parallel strategy of a run by time, cost, CO2e or energy (vectorised
estimator), over one or several chip types, chip counts and regions, under a budget, a deadline and a memory
headroom; top-k table, Pareto front, JSON, plot."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any

from greentrain import units
from greentrain.cli.argtypes import bounded, finite_float, path_text
from greentrain.cli.scenario_args import add_scenario_arguments, profile_from_args, scenario_from_args
from greentrain.config import split_list
from greentrain.errors import ConfigError
from greentrain.results.view import stamp
from greentrain.scenario import Scenario
from greentrain.search.engine import DEFAULT_MEMORY_HEADROOM, OBJECTIVES, Constraints

if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Profile


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p, strategy=False)
    g = p.add_argument_group("search")
    g.add_argument("--objective", choices=OBJECTIVES, default="time", help="what to minimise (default: time)")
    g.add_argument("--top", type=_count, default=10, help="rows of the ranked table (default 10)")
    g.add_argument("--pareto", action="store_true", help="also show the Pareto front over run time, cost, CO2e")
    g.add_argument("--max-tp", type=_count, help="largest tensor-parallel degree (default: the node size)")
    g.add_argument("--max-micro-batch", type=_count, help="largest micro-batch size (default: no limit)")
    g.add_argument("--no-interleave", action="store_true", help="leave out interleaved schedules (vpp > 1)")
    g.add_argument("--no-offload", action="store_true", help="leave out optimizer offloading")
    g.add_argument("--workers", type=_count, default=1, help="processes to split the candidates over (default 1; "
                   "the same result as one, search/workers.py)")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    g.add_argument("--plot", metavar="PATH", help="scatter of run time x cost (CO2e as colour), Pareto front "
                   "marked (needs matplotlib; PNG, PDF or SVG by the file's suffix)", type=path_text)
    g.add_argument("--html", metavar="PATH.html", help="write the result (tables, run time x cost plot) as one "
                   "self-contained HTML page (as greentrain report)", type=path_text)
    c = p.add_argument_group("constraints")
    c.add_argument("--max-chips", type=_count, help="try every power of two up to N chips (and N) instead of "
                   "--num-chips alone; with --num-chips M (the cluster's chips), N <= M: the search uses up to N of "
                   "the M and says so")
    c.add_argument("--memory-headroom", type=finite_float, default=DEFAULT_MEMORY_HEADROOM,
                   help=f"fraction of device memory to leave free, in [0, 1) (default {DEFAULT_MEMORY_HEADROOM}: "
                        "real runs avoid the last few percent; 0 packs to the limit)")
    c.add_argument("--budget-usd", type=bounded("budget_usd"), help="most the run may cost (USD)")
    c.add_argument("--deadline-days", type=bounded("deadline_days"), help="longest the run may take")


def _scenarios(args: argparse.Namespace) -> tuple[list[Scenario], list[Any]]:
    """One scenario per chip type (--chip a,b) and one site per region (--region x,y)."""
    from greentrain.hardware.catalog import get_chip
    from greentrain.scenario import build_cluster, site_from_dict

    chips = split_list(args.chip, "--chip") if args.chip is not None else []
    regions = split_list(args.region, "--region") if args.region is not None else []
    args.chip = chips[0] if chips else None
    args.region = regions[0] if regions else None
    base = scenario_from_args(args)
    limit = getattr(args, "power_limit_w", None)  # every chip type at the same board power limit
    others = [get_chip(c) if limit is None else get_chip(c).power_limited(limit, "--power-limit-w") for c in chips[1:]]
    scs = [base] + [dataclasses.replace(base, cluster=build_cluster(chip, base.cluster.num_chips, args.chips_per_node))
                    for chip in others]
    extra = {"pue": args.pue} if args.pue is not None else {}
    sites = [site_from_dict({"region": r, **extra}) for r in regions] if len(regions) > 1 else []
    _once("--chip", chips, [sc.cluster.chip.name for sc in scs])
    _once("--region", regions, [site.region for site in sites])
    return scs, sites


def _once(flag: str, given: list[str], names: list[str]) -> None:
    """Each chip type or region once: a name and its alias (h100, h100-sxm) are one entry, a row each twice."""
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise ConfigError(flag, ",".join(given), f"lists {twice} twice (an alias counts as its name)")


def run(args: argparse.Namespace) -> int:
    from greentrain.cli.fields import SEARCH_FLAGS, fields_as_flags

    with fields_as_flags(SEARCH_FLAGS):  # the search's errors name its fields (constraints.max_chips)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from greentrain.files import check_not_an_input
    from greentrain.report.search import search_progress
    from greentrain.search.pins import file_pins, pinned_space
    from greentrain.search.space import SearchSpace
    from greentrain.search.workers import search_parallel

    for flag, path in (("--plot", args.plot), ("--html", args.html)):
        if path:  # --html LINK.html -> the scenario overwrote it
            check_not_an_input(path, [args.scenario, args.model, args.chip, args.calibration], flag)
    chip_note = _chip_range(args)
    scs, sites = _scenarios(args)
    profile = profile_from_args(args)
    # a scenario file's strategy: the fields it sets are pinned, the others searched (search/pins.py)
    pins = file_pins(args.scenario, scs[0].strategy) if args.scenario else {}
    space = pinned_space(pins, SearchSpace(max_tp=args.max_tp or 0, max_micro_batch=args.max_micro_batch or 0,
                                           interleave=not args.no_interleave,
                                           offload=(False,) if args.no_offload else (False, True)))
    if pins:
        fixed = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in pins.items())
        print(f"note: the scenario's strategy pins {fixed}; the rest is searched", file=sys.stderr)
    cons = Constraints(max_chips=args.max_chips or 0, memory_headroom=args.memory_headroom,
                       budget_usd=args.budget_usd or 0.0, deadline_s=units.days_to_s(args.deadline_days or 0.0))
    if args.plot:
        from greentrain.report.files import check_plot_path

        check_plot_path(args.plot)
    if args.html:
        from greentrain.report.html import check_html_path

        check_html_path(args.html)
    with search_progress() as tick:
        result = search_parallel(scs, workers=args.workers, objective=args.objective, top_k=args.top, space=space,
                                 sites=sites, constraints=cons, progress=tick, profile=profile,
                                 points=bool(args.plot))
    result = dataclasses.replace(result, notes=chip_note + result.notes + _trust_notes(result, cons, profile,
                                                                                    scs))
    if args.plot:
        from greentrain.report.search import plot_search

        print(f"greentrain: wrote {plot_search(result, args.plot)}", file=sys.stderr)
    if args.json or args.html:
        from greentrain.report.search import search_to_dict

        doc = search_to_dict(result, scs, sites, profile)
        if args.html:
            from greentrain.report.html import write_command_page

            write_command_page(args.html, [("greentrain search", "search", doc)])
        if args.json:
            print(json.dumps(stamp("search", doc), indent=2))
            return 0
    from greentrain.report.console import stdout_console
    from greentrain.report.search import precision_note, render_search

    render_search(result, stdout_console(), pareto=args.pareto, precision=precision_note(scs, profile))
    return 0



def _chip_range(args: argparse.Namespace) -> tuple[str, ...]:
    """--max-chips N with a cluster of M chips (--num-chips M, or the scenario file's cluster.num_chips): N is the
    most of them the search uses. N < M is a search within the cluster (the result says so); N > M asks for more
    chips than the cluster has: refused, whichever way M was given."""
    n, m, given = args.max_chips, args.num_chips, "--num-chips"
    if m is None and args.scenario:
        from greentrain.config import load_mapping

        cluster = load_mapping(args.scenario, field="scenario").get("cluster")
        m, given = (cluster.get("num_chips") if isinstance(cluster, dict) else None), "the scenario's cluster.num_chips"
    if not n or not isinstance(m, int) or n == m:
        return ()
    if n > m:
        raise ConfigError("--max-chips", n, f"exceeds {given} {m}, the chips of the cluster: give --max-chips "
                          f"<= {m}, or leave out {given} to try every power of two up to {n}")
    return (f"searched 1 to {n} chips (the powers of two and {n}) of the {m}-chip cluster: --max-chips {n} < "
            f"{given} {m}",)


def _trust_notes(result: Any, cons: Constraints, profile: Profile, scs: list[Scenario]) -> tuple[str, ...]:
    """What the ranking leaves room for, and how far to trust the best candidate (calibrate/bands.py: its class,
    with the regime of its predicted step)."""
    from greentrain.calibrate.bands import scenario_band
    from greentrain.errors import InfeasibleError
    from greentrain.estimate.step import estimate_step
    from greentrain.search.feasibility import with_chips

    out = [f"memory headroom: {cons.memory_headroom:.0%} of each device left free (--memory-headroom); "
           f"objectives within {cons.tie_tolerance:.0%} of the best are ties, ranked by the most free memory, "
           "then the least CO2e"]
    if result.ranked:
        best = result.ranked[0]
        sc = with_chips(next((s for s in scs if s.cluster.chip.name == best.chip), scs[0]), best.num_chips)
        try:  # its regime: the search ranked it, so it runs; a refusal here would only lose the note
            step = estimate_step(sc, best.strategy, check_fit=False, eff=profile.for_chip(best.chip))
        except (InfeasibleError, ConfigError):
            return tuple(out)
        out.append(f"expected error of the best candidate's time: "
                   f"{scenario_band(sc, profile.framework, step.compute_share).describe()}")
    return tuple(out)
