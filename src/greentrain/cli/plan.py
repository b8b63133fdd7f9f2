"""`greentrain plan`: time, memory, MFU, energy, cost and CO2e of a training run (analytical)."""

from __future__ import annotations

import argparse
import json

from greentrain.cli.scenario_args import (
    add_scenario_arguments,
    batch_is_default,
    profile_from_args,
    scenario_from_args,
    with_resolved_strategy,
)
from greentrain.results.view import stamp


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_arguments(p)
    p.add_argument("--json", action="store_true", help="print the estimate as JSON")


def run(args: argparse.Namespace) -> int:
    from greentrain.estimate.run import estimate_run
    from greentrain.report.plan import plan_to_dict

    profile = profile_from_args(args)
    sc, chosen = with_resolved_strategy(args, scenario_from_args(args))
    result = estimate_run(sc, chosen=chosen, eff=profile.for_chip(sc.cluster.chip.name))
    default_batch = batch_is_default(args)
    if args.json:
        print(json.dumps(stamp("plan", plan_to_dict(result, default_batch=default_batch)), indent=2))
        return 0
    from greentrain.report.console import default_console
    from greentrain.report.plan import render_plan

    render_plan(result, default_console(), default_batch=default_batch)
    return 0
