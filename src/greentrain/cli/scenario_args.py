"""Scenario options shared by `plan`, `search` and `simulate step`: one way to describe a run on the CLI."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from greentrain.cli.argtypes import finite_float, positive_float
from greentrain.cli.argtypes import positive_int as _positive
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.parallel.strategy import RECOMPUTE, SCHEDULES, Strategy
from greentrain.scenario import (
    DEFAULT_SCENARIO,
    Scenario,
    build_cluster,
    check_schedule,
    check_sequence,
    load_scenario,
    scenario_from_dict,
    site_from_dict,
)
from greentrain.workload import OPTIMIZERS

STRATEGY_FLAGS = ("dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "recompute", "micro_batch", "offload_optimizer",
                  "schedule", "flash_attention", "stage_layers")


def add_scenario_arguments(p: argparse.ArgumentParser, strategy: bool = True) -> None:
    p.add_argument("scenario", nargs="?", help="scenario YAML (default: Llama 3 8B on 64 H100 for 1T tokens in "
                   "us-east-1; a file's missing parts take these defaults too)")
    g = p.add_argument_group("model and cluster")
    g.add_argument("--model", help="preset name, model YAML or Hugging Face config.json")
    g.add_argument("--chip", help="chip name from `greentrain catalog chips`, or a chip YAML")
    g.add_argument("--num-chips", type=_positive)
    g.add_argument("--chips-per-node", type=_positive)
    g = p.add_argument_group("workload")
    g.add_argument("--global-batch", type=_positive, help="sequences per optimizer step")
    g.add_argument("--seq-len", type=_positive)
    g.add_argument("--target-seq-len", type=_positive, help="decoder length of an encoder-decoder model")
    g.add_argument("--tokens", type=positive_float, help="training tokens of the whole run")
    g.add_argument("--steps", type=_positive, help="optimizer steps of the whole run (instead of --tokens)")
    g.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16", "fp8"))
    g.add_argument("--optimizer", choices=OPTIMIZERS)
    g = p.add_argument_group("site")
    g.add_argument("--region", help="grid region: country (FRA), US state (US-CA) or cloud region (us-east-1)")
    g.add_argument("--grid-g-per-kwh", type=finite_float, help="grid carbon intensity, g CO2e per kWh")
    g.add_argument("--pue", type=finite_float, help="data-centre power usage effectiveness (>= 1)")
    g.add_argument("--electricity-usd-per-kwh", type=finite_float)
    g = p.add_argument_group("prediction")
    g.add_argument("--framework", default="megatron",
                   help="training framework profile: megatron (default), megatron-overlap, nanotron, deepspeed, "
                   "fsdp2, torchtitan, ddp (what overlaps, fixed costs; estimate/efficiency.yaml)")
    g.add_argument("--calibration", default="", metavar="PROFILE.yaml",
                   help="constants fitted by `greentrain calibrate` on your own runs")
    if strategy:
        g = p.add_argument_group("strategy (omit all to let greentrain choose)")
        for name in ("dp", "tp", "pp", "vpp", "cp", "ep"):
            g.add_argument(f"--{name}", type=_positive)
        g.add_argument("--sp", action=argparse.BooleanOptionalAction, default=None, help="sequence parallelism")
        g.add_argument("--zero", type=int, choices=(0, 1, 2, 3))
        g.add_argument("--recompute", choices=RECOMPUTE)
        g.add_argument("--micro-batch", type=_positive)
        g.add_argument("--offload-optimizer", action=argparse.BooleanOptionalAction, default=None)
        g.add_argument("--schedule", choices=SCHEDULES)
        g.add_argument("--flash-attention", action=argparse.BooleanOptionalAction, default=None)
        g.add_argument("--stage-layers", type=_layer_list, metavar="N,N,...",
                       help="layers of each pipeline stage, first to last (default: the framework places them)")


def _layer_list(text: str) -> tuple[int, ...]:
    """--stage-layers 7,8,8,...: whole numbers >= 0, one per pipeline stage."""
    try:
        counts = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be comma-separated whole numbers") from None
    if any(n < 0 for n in counts):
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return counts


def _base(args: argparse.Namespace) -> Scenario:
    if args.scenario:
        return load_scenario(args.scenario)
    return scenario_from_dict(DEFAULT_SCENARIO)


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario file (or the default) with every given flag applied on top."""
    sc = _base(args)
    from greentrain.hardware.catalog import get_chip
    from greentrain.model.load import load_model

    model = load_model(args.model) if args.model else sc.model
    cl = sc.cluster
    if args.chip or args.num_chips or args.chips_per_node:
        chip = get_chip(args.chip) if args.chip else cl.chip
        cpn = args.chips_per_node or (cl.chips_per_node if not args.chip else None)
        cl = build_cluster(chip, args.num_chips or cl.num_chips, cpn)
    w = sc.workload
    changes: dict[str, Any] = {}
    for flag, field in (("global_batch", "global_batch_size"), ("seq_len", "seq_len"),
                        ("target_seq_len", "target_seq_len"), ("precision", "precision"),
                        ("optimizer", "optimizer")):
        if getattr(args, flag) is not None:
            changes[field] = getattr(args, flag)
    if args.tokens is not None and args.steps is not None:
        raise ConfigError("--steps", args.steps, f"conflicts with --tokens {args.tokens:g}: give one run length")
    if args.tokens is not None:  # a flag's run length replaces the file's
        changes.update(train_tokens=args.tokens, num_steps=0, num_epochs=0.0)
    if args.steps is not None:
        changes.update(num_steps=args.steps, train_tokens=0.0, num_epochs=0.0)
    w = dataclasses.replace(w, **changes) if changes else w
    from_flags = not args.scenario  # the defaults are fixed with flags; a file's values in the file
    check_sequence(model, w, "--seq-len" if from_flags or args.seq_len is not None else "workload.seq_len",
                   "--target-seq-len" if from_flags or args.target_seq_len is not None
                   else "workload.target_seq_len")
    return Scenario(model=model, cluster=cl, workload=w, site=_site(args, sc.site),
                    strategy=_strategy(args, sc, cl.num_chips))


def _site(args: argparse.Namespace, site: Site) -> Site:
    data: dict[str, Any] = {}
    if args.region is not None:
        data["region"] = args.region
    if args.grid_g_per_kwh is not None:
        data["grid_g_co2e_per_kwh"] = args.grid_g_per_kwh
    if args.pue is not None:
        data["pue"] = args.pue
    if args.electricity_usd_per_kwh is not None:
        data["electricity_usd_per_kwh"] = args.electricity_usd_per_kwh
    if not data:
        return site
    if "region" not in data and "grid_g_co2e_per_kwh" not in data:  # keep the file's site, change PUE/price
        data["grid_g_co2e_per_kwh"] = site.grid_g_co2e_per_kwh
        data["region"] = site.region
        data.setdefault("pue", site.pue)
    return site_from_dict(data)


def _strategy_flags(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for flag in STRATEGY_FLAGS:
        value = getattr(args, flag, None)
        if value is not None:
            kw["micro_batch_size" if flag == "micro_batch" else flag] = value
    return kw


if TYPE_CHECKING:
    from greentrain.estimate.efficiency import Profile
    from greentrain.search.space import SearchSpace

# With these given the flags are a whole strategy (cp, vpp and ep default to 1, sp to tp > 1); fewer flags
# only pin what they name and the search chooses the rest (strategy_pins).
_WHOLE = {"tp", "pp", "zero", "recompute", "micro_batch_size"}


def _pins_only(kw: dict[str, Any], sc: Scenario) -> bool:
    return (bool(kw) and sc.strategy is None and "schedule" not in kw and "stage_layers" not in kw
            and not set(kw) >= _WHOLE)


def flags_strategy(args: argparse.Namespace, sc: Scenario) -> Strategy:
    """The strategy flags as a whole strategy, defaults for the rest (when the pinned search finds nothing,
    estimating this names the rule it breaks)."""
    s = _strategy(args, sc, sc.cluster.num_chips, whole=True)
    assert s is not None
    return s


def strategy_pins(args: argparse.Namespace, sc: Scenario) -> SearchSpace | None:
    """The search space the strategy flags leave when they do not make a whole strategy (e.g. `--tp 8`
    alone: the fastest strategy with tp = 8); None when there are no such flags."""
    kw = _strategy_flags(args)
    if not _pins_only(kw, sc):
        return None
    from greentrain.search.space import SearchSpace

    pins = {k: int(v) for k, v in kw.items() if k in ("dp", "tp", "pp", "vpp", "cp", "ep")}
    if {"dp", "tp", "pp"} <= set(pins):  # the user sized the mesh: context parallelism only if asked for
        pins.setdefault("cp", 1)
    return SearchSpace(dp=pins.get("dp", 0), tp=pins.get("tp", 0), pp=pins.get("pp", 0), vpp=pins.get("vpp", 0),
                       cp=pins.get("cp", 0), ep=pins.get("ep", 0), sp=kw.get("sp"),
                       micro_batch=int(kw.get("micro_batch_size", 0)),
                       zero=(int(kw["zero"]),) if "zero" in kw else (0, 1, 2, 3),
                       recompute=(str(kw["recompute"]),) if "recompute" in kw else RECOMPUTE,
                       offload=(bool(kw["offload_optimizer"]),) if "offload_optimizer" in kw else (False, True),
                       flash_attention=bool(kw.get("flash_attention", True)))


def _strategy(args: argparse.Namespace, sc: Scenario, num_chips: int, whole: bool = False) -> Strategy | None:
    kw = _strategy_flags(args)
    if not kw or (_pins_only(kw, sc) and not whole):
        return sc.strategy
    base = sc.strategy or Strategy()
    if "schedule" in kw:
        vpp = int(kw.get("vpp", base.vpp))
        vpp_field = "--vpp" if "vpp" in kw or sc.strategy is None else "strategy.vpp"
        check_schedule(str(kw["schedule"]), vpp, "--schedule", vpp_field)
    tp, pp, cp = int(kw.get("tp", base.tp)), int(kw.get("pp", base.pp)), int(kw.get("cp", base.cp))
    if "dp" not in kw:
        if num_chips % (tp * pp * cp):
            raise ConfigError("--tp/--pp/--cp", f"{tp}*{pp}*{cp}", f"must divide the number of chips ({num_chips})")
        kw["dp"] = num_chips // (tp * pp * cp)
    if "sp" not in kw and "tp" in kw:
        kw["sp"] = kw["tp"] > 1
    return dataclasses.replace(base, **kw)


def profile_from_args(args: argparse.Namespace) -> Profile:
    """The efficiency profile of --framework and --calibration (checked here, before any work)."""
    from greentrain.estimate.efficiency import Profile

    return Profile(framework=getattr(args, "framework", "megatron") or "megatron",
                   calibration=getattr(args, "calibration", "") or "")


def with_resolved_strategy(args: argparse.Namespace, sc: Scenario) -> tuple[Scenario, bool]:
    """``sc`` with its strategy: the given one, or the search's fastest (within the degrees the flags pin);
    True when the search chose it. When nothing fits the pins, the flags as a whole strategy (defaults for
    the rest) are returned so that estimating it names the rule it breaks."""
    if sc.strategy is not None:
        return sc, False
    from greentrain.errors import InfeasibleError
    from greentrain.search.engine import best_strategy

    pins = strategy_pins(args, sc)
    try:
        return sc.with_strategy(best_strategy(sc, pins, profile_from_args(args))), True
    except InfeasibleError:
        if pins is None:
            raise
        return sc.with_strategy(flags_strategy(args, sc)), False
