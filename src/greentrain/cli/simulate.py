"""`greentrain simulate swarm|step`: discrete-event simulation of a device swarm or a cluster step."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from greentrain.cli.argtypes import bounded, nonneg_int, path_text, positive_float, positive_int
from greentrain.errors import ConfigError
from greentrain.results.view import stamp

PROGRESS_MIN_TASKS = 200_000  # show a progress bar when a run has at least this many tasks


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="mode", metavar="MODE", required=True)
    s = sub.add_parser("swarm", help="seed 000: a heterogeneous device swarm trains a model round by round",
                       description="Simulate a swarm of heterogeneous devices that share a model's "
                                   "tensor-parallel tiles, round by round (seed 000's Simulation Guide).")
    s.add_argument("--devices", required=True, metavar="DEVICES.yaml",
                   help="devices or groups (see docs/simulate.md)")
    s.add_argument("--model", required=True, help="preset name, model YAML or Hugging Face config.json")
    s.add_argument("--rounds", type=positive_int, default=1, help="training rounds to simulate (default 1)")
    s.add_argument("--min-tp-size", type=positive_int, default=128, help="smallest tile dimension (default 128)")
    s.add_argument("--tp-depth", type=nonneg_int, default=2, help="halving levels per matrix (default 2)")
    s.add_argument("--batch-tokens", type=positive_int, default=2048,
                   help="tokens trained per round (default 2048)")
    s.add_argument("--seq-len", type=positive_int, default=None, help="sequence length (default: --batch-tokens)")
    s.add_argument("--precision", default="bf16", help="fp32, tf32, bf16, fp16 or fp8 (default bf16)")
    s.add_argument("--scheduler", default="greedy", help="greedy, fastest or bandwidth (default greedy)")
    s.add_argument("--backup-tasks", action="store_true",
                   help="idle devices run backup copies of straggling tasks")
    s.add_argument("--seed", type=int, default=0, help="random seed for dropouts (default 0)")
    _outputs(s)
    c = sub.add_parser("step", help="one training step of a scenario, event by event (GPipe, 1F1B, VPP)",
                       description="Simulate one training step of a scenario event by event.")
    from greentrain.cli.scenario_args import add_scenario_arguments

    add_scenario_arguments(c)
    c.add_argument("--straggler", action="append", default=[], metavar="STAGE=FACTOR",
                   help="pipeline stage STAGE computes FACTOR times slower (repeatable)")
    c.add_argument("--link-slowdown", type=positive_float, default=1.0, metavar="FACTOR",
                   help="inter-node links are FACTOR times slower than the catalog says")
    c.add_argument("--bucket-mb", type=bounded("bucket_mb"), default=0.0,
                   help="DP gradient bucket size in MB (default: the framework's: megatron one bucket, ddp 25 MiB)")
    _outputs(c)


def _outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--trace", type=path_text, metavar="PATH", help="write a Chrome trace-event JSON (open in Perfetto)")
    p.add_argument("--gantt", type=path_text, metavar="PATH.png", help="write a Gantt chart (PNG)")
    p.add_argument("--html", metavar="PATH.html", help="write the result and its Gantt chart as one self-contained "
                   "HTML page (as greentrain report)", type=path_text)


def _check_output(flag: str, path: str | None, suffixes: tuple[str, ...]) -> None:
    if path is None:
        return
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise ConfigError(flag, path, f"must end in {' or '.join(suffixes)}")
    from greentrain.report.files import check_output_path  # the folder exists and a file can be created in it

    check_output_path(p, flag, suffixes)


def run(args: argparse.Namespace) -> int:
    from greentrain.cli.fields import STEP_FLAGS, fields_as_flags

    with fields_as_flags(STEP_FLAGS):  # the simulator's errors name its fields (step.bucket_mb)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    for flag, path in (("--gantt", args.gantt), ("--html", args.html)):
        if path:  # before any work or file (issue 16 item 12): the light install has no matplotlib
            from greentrain.config import require_extra

            require_extra("matplotlib", "plot", flag, path)
    _check_output("--trace", args.trace, (".json",))
    _check_output("--gantt", args.gantt, (".png",))
    _check_output("--html", args.html, (".html", ".htm"))
    from greentrain.files import check_not_an_input

    inputs = [getattr(args, name, None) for name in ("scenario", "devices", "model", "chip", "calibration")]
    for flag, path in (("--trace", args.trace), ("--gantt", args.gantt), ("--html", args.html)):
        if path:  # --trace LINK.json -> the scenario overwrote it
            check_not_an_input(path, inputs, flag)
    if args.mode == "swarm":
        return _run_swarm(args)
    return _run_step(args)


def _run_swarm(args: argparse.Namespace) -> int:
    from greentrain.model.load import load_model
    from greentrain.sim.devices import load_devices
    from greentrain.sim.run_swarm import SwarmWorkload, run_swarm, swarm_tasks
    from greentrain.sim.swarm import SwarmOptions
    from greentrain.sim.trace import Trace

    opts = SwarmOptions(scheduler=args.scheduler, seed=args.seed, backup_tasks=args.backup_tasks)
    wl = SwarmWorkload(batch_tokens=args.batch_tokens, seq_len=args.seq_len or 0, precision=args.precision,
                       tp_depth=args.tp_depth, min_tp_size=args.min_tp_size)
    devices = load_devices(args.devices)
    model = load_model(args.model)
    seq = args.seq_len or args.batch_tokens
    if model.max_seq_len and seq > model.max_seq_len:
        raise ConfigError("--seq-len" if args.seq_len else "--batch-tokens", seq,
                          f"must be <= {model.max_seq_len}: {model.name} has learned positions for "
                          f"{model.max_seq_len} tokens (a sequence is --seq-len, default --batch-tokens)")
    num_tasks = swarm_tasks(model, wl).num_tasks  # validates the tiling before anything runs
    trace = Trace() if (args.trace or args.gantt or args.html) else None
    total = num_tasks * args.rounds
    from greentrain.report.sim import progress

    with progress(total, "simulating", enabled=total >= PROGRESS_MIN_TASKS) as advance:
        res = run_swarm(devices, model, rounds=args.rounds, workload=wl, options=opts, trace=trace,
                        progress=(lambda r, done: advance(r * num_tasks + done)) if advance else None)
    _write_outputs(args, trace, f"swarm of {res.num_devices} devices, {res.model}")
    _write_html(args, "swarm", res.to_dict(), trace)
    if args.json:
        print(json.dumps(stamp("simulate", res.to_dict()), indent=2))
        return 0
    from greentrain.report.sim import render_swarm

    render_swarm(res)
    return 0


def _run_step(args: argparse.Namespace) -> int:
    from greentrain.cli.scenario_args import profile_from_args, scenario_from_args, with_resolved_strategy
    from greentrain.sim.cluster import StepOptions, simulate_step
    from greentrain.sim.trace import Trace

    sc, _ = with_resolved_strategy(args, scenario_from_args(args))
    opts = StepOptions(stragglers=_stragglers(args.straggler), inter_node_slowdown=args.link_slowdown,
                       bucket_mb=args.bucket_mb)
    trace = Trace() if (args.trace or args.gantt or args.html) else None
    eff = profile_from_args(args).for_chip(sc.cluster.chip.name)
    res = simulate_step(sc, opts, trace=trace, eff=eff)
    _write_outputs(args, trace, f"one step, {sc.model.name}")
    from greentrain.estimate.state_dtypes import workload_grad_dtype

    doc = {**res.to_dict(), "scenario": f"{sc.model.name} on {sc.cluster.num_chips} x {sc.cluster.chip.name}; "
                                        f"{sc.strategy.describe() if sc.strategy else ''}",
           "grad_dtype": workload_grad_dtype(sc.workload, eff)}  # what the DP reduction moves
    _write_html(args, "step", doc, trace)
    if args.json:
        print(json.dumps(stamp("simulate", doc), indent=2))
        return 0
    from greentrain.report.sim import render_step

    render_step(res)
    return 0


def _stragglers(items: list[str]) -> dict[int, float]:
    out: dict[int, float] = {}
    for item in items:
        stage_text, _, factor_text = item.partition("=")
        try:
            stage, factor = int(stage_text), float(factor_text)
        except ValueError:
            raise ConfigError("--straggler", item, "must be STAGE=FACTOR, e.g. 3=1.5") from None
        if stage in out:
            raise ConfigError("--straggler", item, f"stage {stage} is already given ({stage}={out[stage]:g}); "
                              "give each stage once")
        out[stage] = factor
    return out


def _write_html(args: argparse.Namespace, mode: str, result: dict[str, Any], trace: Any) -> None:
    """--html: the result and its trace (a Gantt chart) as one page, as `greentrain report` draws them."""
    if not args.html:
        return
    from greentrain.report.html import write_command_page
    from greentrain.report.trace import to_chrome

    write_command_page(args.html, [(f"greentrain simulate {mode}", "simulate", result),
                                   (f"greentrain simulate {mode} --trace", "trace", to_chrome(trace))])


def _write_outputs(args: argparse.Namespace, trace: Any, title: str) -> None:
    if trace is None:
        return
    if args.trace:
        from greentrain.report.trace import write_chrome

        write_chrome(trace, args.trace)
        print(f"greentrain: wrote {args.trace}", file=sys.stderr)
    if args.gantt:
        from greentrain.report.sim import write_gantt

        write_gantt(trace, args.gantt, title=title)
        print(f"greentrain: wrote {args.gantt}", file=sys.stderr)

