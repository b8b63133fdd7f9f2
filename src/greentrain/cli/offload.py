"""`greentrain offload plan|heatmap|train`: training under host- and device-memory caps (seed 002).

plan     what lives where, per-layer times and the bound, for one model, chip, sequence length and caps
heatmap  the planner over model x chip x sequence length x device cap x host cap (PNG and/or JSON)
train    run the PyTorch executor (or a stock one: --executor fsdp2|torchao|deepspeed) for a few steps under
         the caps (the seed's argument order: HOST_GIB DEVICE_GIB SEQ_LEN MODEL_B), next to the planner's
         prediction
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from greentrain.cli.argtypes import path_text
from greentrain.config import BOUNDS, split_list
from greentrain.errors import ConfigError
from greentrain.offload.config import EXECUTORS

if TYPE_CHECKING:
    from greentrain.offload.config import OffloadFramework, OffloadPolicy
    from greentrain.offload.plan import OffloadPlan
    from greentrain.scenario import Scenario

SEED_MODELS = {"1": "llama3.2-1b", "8": "llama3-8b"}  # ml_dataflow's MODEL_B argument


def _model(name: str) -> str:
    return SEED_MODELS.get(name.strip(), name.strip())


def _numbers(text: str, field: str) -> list[float]:
    """``16,24,32`` or ``16:80:8`` (start:stop:step, stop included)."""
    if ":" in text:
        parts = text.split(":")
        try:
            lo, hi, step = (float(p) for p in parts) if len(parts) == 3 else (float("nan"),) * 3
        except ValueError:
            raise ConfigError(field, text, "must be start:stop:step numbers") from None
        if not all(math.isfinite(x) for x in (lo, hi, step)) or step <= 0:
            raise ConfigError(field, text, "must be start:stop:step with finite numbers and step > 0")
        if hi < lo:
            raise ConfigError(field, text, "is reversed: stop must be >= start")
        n = math.floor((hi - lo) / step + 1e-9) + 1
        if n > 10_000:
            raise ConfigError(field, text, "has more than 10,000 values")
        return [round(lo + i * step, 9) for i in range(n)]
    out = []
    for item in split_list(text, field):
        try:
            out.append(float(item))
        except ValueError:
            raise ConfigError(field, item, "must be a number") from None
    return out


def _ints(text: str, field: str) -> list[int]:
    vals = _numbers(text, field)
    for v in vals:
        if not v.is_integer() or v < 1:  # a whole number said as one (0, not 0.0)
            raise ConfigError(field, int(v) if v.is_integer() else v, "must be a whole number >= 1")
    return [int(v) for v in vals]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--chip", default="h100-sxm", help="catalog chip(s) (default h100-sxm)")
    p.add_argument("--framework", default="pytorch",
                   help="a framework whose efficiency.yaml entry has an offload block (`greentrain catalog "
                   "frameworks`): pytorch, greentrain's executor; ml_dataflow, the seed system's own order "
                   "(default pytorch)")
    p.add_argument("--host-link", default="", help="host link name from links.yaml (default: the chip's)")
    p.add_argument("--state", choices=("mixed", "bf16"), default="mixed",
                   help="mixed: the framework's precision recipe (pytorch: an fp32 master, the estimator's bytes; "
                   "ml_dataflow: bf16) or bf16 (every state bf16, no master); "
                   "train follows the model dtype (fp32 on CPU, bf16 on CUDA)")
    p.add_argument("--no-downgrade", action="store_true",
                   help="keep every host upgrade even where the link is slower than the recompute it saves")
    p.add_argument("--json", action="store_true", help="print JSON")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="{plan,heatmap,train}")
    pl = sub.add_parser("plan", help="placement, per-layer times and bound for one cell")
    pl.add_argument("--model", required=True, help="preset, model file, or 1 / 8 (Llama 3.2 1B / Llama 3 8B)")
    pl.add_argument("--seq-len", "--seq", dest="seq_len", required=True, help="tokens per sequence")
    pl.add_argument("--device-gib", required=True, help="device memory cap, GiB")
    pl.add_argument("--host-gib", required=True, help="host memory cap, GiB")
    pl.add_argument("--micro-batches", help="micro-batches (rounds) per optimizer step, as `train` runs them "
                    "(default: as many as keep the optimizer near 1 %% of the step)")
    pl.add_argument("--host-threads", help="CPU threads of the host optimizer (default 8; `train` uses its "
                    "machine's torch.get_num_threads())")
    _common(pl)
    hm = sub.add_parser("heatmap", help="the planner over a grid; PNG panels and/or JSON")
    hm.add_argument("--model", required=True, help="comma list of models")
    hm.add_argument("--seq-len", "--seq", dest="seq_len", required=True, help="comma list or start:stop:step")
    hm.add_argument("--device-gib", required=True, help="comma list or start:stop:step, GiB")
    hm.add_argument("--host-gib", required=True, help="comma list or start:stop:step, GiB")
    hm.add_argument("--metric", default="tokens_per_s",
                    choices=("tokens_per_s", "mfu", "step_time_s", "joules_per_token", "kg_co2e_per_mtok"))
    hm.add_argument("-o", "--output", type=path_text, help="heatmap image (PNG, PDF or SVG)")
    hm.add_argument("--measured", help="recorded sweep CSV (ml_dataflow columns) to overlay, with the error",
                    type=path_text)
    hm.add_argument("--html", metavar="PATH.html", help="write the grid and its heatmap as one self-contained page "
                    "(as `greentrain report` draws it)", type=path_text)
    _common(hm)
    tr = sub.add_parser("train", help="train a llama under the caps with the PyTorch executor")
    tr.add_argument("caps", nargs="*", metavar="HOST_GIB DEVICE_GIB SEQ_LEN MODEL_B",
                    help="the seed's order (transformerDemo 80 20 16384 1); or the flags below")
    tr.add_argument("--host-gib")
    tr.add_argument("--device-gib")
    tr.add_argument("--seq-len")
    tr.add_argument("--model", help="preset, model file, 1 / 8, or tiny (a 4-layer llama for CPU)")
    tr.add_argument("--steps", default="3", help="optimizer steps (default 3)")
    tr.add_argument("--micro-batches", default="2", help="micro-batches per step (default 2)")
    tr.add_argument("--device", default="auto", help="cuda, cpu (the device is emulated by byte accounting) or auto")
    tr.add_argument("--seed", default="0")
    tr.add_argument("--executor", choices=EXECUTORS, default="greentrain",
                    help="greentrain (its planned streaming executor, default) or the offload people run, each "
                    "with the planner's price of its own placement: fsdp2 (FSDP2 CPUOffloadPolicy), torchao "
                    "(CPUOffloadOptimizer, CUDA) or deepspeed (ZeRO-Offload, CUDA), where installed")
    _common(tr)


def run(args: argparse.Namespace) -> int:
    from greentrain.cli.fields import OFFLOAD_FLAGS, fields_as_flags

    with fields_as_flags(OFFLOAD_FLAGS):  # offload/'s errors name fields (cluster.host_link, measured)
        if args.action == "plan":
            return _plan(args)
        if args.action == "heatmap":
            return _heatmap(args)
        return _train(args)


def _policy(args: argparse.Namespace) -> OffloadPolicy:
    from greentrain.offload.config import OffloadPolicy

    rounds = getattr(args, "micro_batches", None)
    threads = getattr(args, "host_threads", None)
    try:  # the policy's bounds, named by the flag that gave the value
        return OffloadPolicy(downgrade=not args.no_downgrade,
                             rounds_per_step=_int_one(rounds, "--micro-batches") if rounds is not None else None,
                             host_threads=_int_one(threads, "--host-threads") if threads is not None else None)
    except ConfigError as e:
        flag = {"offload.rounds_per_step": "--micro-batches", "offload.host_threads": "--host-threads"}.get(e.field)
        if flag is None:
            raise
        raise ConfigError(flag, e.value, e.rule) from None


def _scenario(model: str, chip: str, seq_len: int, host_link: str, batch: int = 1) -> Scenario:
    from greentrain.scenario import scenario_from_dict

    cluster = {"chip": chip, "num_chips": 1} | ({"host_link": host_link} if host_link else {})
    return scenario_from_dict({"model": model, "cluster": cluster,
                               "workload": {"seq_len": seq_len, "global_batch_size": batch}})


def _plan(args: argparse.Namespace) -> int:
    from greentrain.offload.config import OffloadCaps, offload_framework
    from greentrain.offload.plan import plan_offload
    from greentrain.report.offload import plan_to_dict, render_plan

    seq = _int_one(args.seq_len, "offload.seq_len")
    caps = OffloadCaps.from_gib(device_gib=_one(args.device_gib, "offload.device_gib"),
                                host_gib=_one(args.host_gib, "offload.host_gib"))
    sc = _scenario(_model(args.model), args.chip, seq, args.host_link)
    profile = offload_framework(args.framework, args.state)
    plan = plan_offload(sc, caps, _policy(args), profile)
    # `plan` on the same step: the sequences this plan's step holds, one per micro-batch, all on the device
    same_step = _scenario(_model(args.model), args.chip, seq, args.host_link, max(1, plan.tokens_per_step // seq))
    compared = compare_with_plan(plan, profile, same_step)
    if args.json:
        extra = {"host_copy_time_s": plan.host_copy_time_s, "compared_with_plan": compared}
        print(json.dumps(plan_to_dict(plan) | extra, indent=2))
    else:
        render_plan(plan)
        print(compared["summary"])
    return 0


def compare_with_plan(plan: OffloadPlan, profile: OffloadFramework, sc: Scenario) -> dict[str, Any]:
    """What `greentrain plan` answers for the same model, chip, sequence and tokens per step (``sc``; everything
    on the device, its default kernel profile), and why this plan's tokens/s differs: kernels, element-wise ops,
    placement. One question, two numbers, the reasons printed beside them."""
    from greentrain.errors import InfeasibleError
    from greentrain.estimate.efficiency import DEFAULT_FRAMEWORK
    from greentrain.estimate.run import estimate_run
    from greentrain.parallel.strategy import Strategy

    try:
        ref: float | None = estimate_run(sc, Strategy()).step.tokens_per_s
    except InfeasibleError:
        ref = None
    reasons = [f"kernels: framework '{profile.framework}' (matmul x{profile.matmul_scale:.3g}, attention "
               f"x{profile.attention_scale:.3g} of the chip's efficiency; its entry's fixed costs), `plan` uses "
               f"'{DEFAULT_FRAMEWORK}'"]
    if profile.eager_ops:
        reasons.append(f"element-wise ops ({', '.join(profile.eager_ops)}) as eager PyTorch kernels, "
                       "`plan` fuses them")
    if plan.chunk_tokens != sc.workload.seq_len:
        reasons.append(f"chunks of {plan.chunk_tokens:,} tokens per round")
    reasons.append(f"placement: optimizer on the {plan.optimizer_on} ({plan.optimizer_time_s:.3g} s per step of "
                   f"{plan.step_time_s:.3g} s), {plan.resident_layers} layers resident, recompute "
                   f"{100 * plan.recompute_fraction:.1f} % of FLOPs, bound by {plan.bound}")
    if plan.host_copy_time_s > 0:
        reasons.append(f"the executor's synchronous host gradient copies ({plan.host_copy_time_s:.3g} s per step, "
                       f"{plan.num_rounds} micro-batches)")
    shown = f"{ref:,.0f} tokens/s" if ref is not None else "does not fit on the device"
    summary = (f"`greentrain plan` for this model, chip, sequence and step (everything on the device): {shown}; this "
               f"plan's {plan.tokens_per_s:,.0f} differs by " + "; ".join(reasons))
    return {"plan_tokens_per_s": ref, "tokens_per_s": plan.tokens_per_s, "reasons": reasons, "summary": summary}


def _int_one(text: str, field: str) -> int:
    vals = _ints(text, field)
    if len(vals) != 1:
        raise ConfigError(field, text, "must be one whole number")
    return vals[0]


def _one(text: str, field: str) -> float:
    vals = _numbers(text, field)
    if len(vals) != 1:
        raise ConfigError(field, text, "must be one number")
    return vals[0]


def _heatmap(args: argparse.Namespace) -> int:
    from greentrain.offload.grid import check_grid, offload_grid

    models = [_model(m) for m in split_list(args.model, "offload.model")]
    chips = split_list(args.chip, "offload.chip")
    seqs = _ints(args.seq_len, "offload.seq_len")
    devs = _numbers(args.device_gib, "offload.device_gib")
    hosts = _numbers(args.host_gib, "offload.host_gib")
    for kind, field, values in (("device_memory_gib", "offload.device_gib", devs),
                                ("host_memory_gib", "offload.host_gib", hosts)):  # ranges: config.BOUNDS
        for v in values:
            BOUNDS[kind].check(v, field)
    check_grid(models, chips, seqs, devs, hosts)
    if args.output:
        from greentrain.report.files import check_plot_path

        check_plot_path(args.output, "--output")
    if args.html:
        from greentrain.report.files import check_output_path

        if not args.html.lower().endswith((".html", ".htm")):
            raise ConfigError("--html", args.html, "must end in .html or .htm")
        check_output_path(args.html, "--html", (".html", ".htm"))
    measured = None
    if args.measured:
        from greentrain.offload.calibrate import read_recorded

        measured = read_recorded(args.measured)
    if not args.output and not args.json and not args.html:
        raise ConfigError("--output", None, "give -o FILE.png, --html PAGE.html and/or --json")
    from greentrain.offload.config import offload_framework

    if args.host_link:
        raise ConfigError("--host-link", args.host_link, "is taken from the chip's catalog entry in a heatmap")
    cells = offload_grid(models, chips, seqs, devs, hosts, offload_framework(args.framework, args.state), _policy(args))
    if measured is not None:
        from greentrain.offload.grid import attach_measured

        cells = attach_measured(cells, measured)
    if args.output:
        from greentrain.report.offload import write_heatmap

        path = write_heatmap(cells, args.metric, args.output, args.framework)
        if not args.json:
            print(f"wrote {path} ({len(cells)} cells, {sum(c.fits for c in cells)} fit)")
    doc = {"metric": args.metric, "framework": args.framework, "cells": [c.to_dict() for c in cells]}
    if args.json:
        from greentrain.results.view import stamp

        json.dump(stamp("offload_heatmap", doc), sys.stdout, indent=1)
        print()
    if args.html:
        from greentrain.report.html import write_command_page

        write_command_page(args.html, [("greentrain offload heatmap", "offload_heatmap", doc)])
    return 0


def _train(args: argparse.Namespace) -> int:
    pos = list(args.caps)
    if pos and len(pos) != 4:
        raise ConfigError("offload.train", " ".join(pos), "takes HOST_GIB DEVICE_GIB SEQ_LEN MODEL_B (four values)")
    given = [f for f, v in (("--host-gib", args.host_gib), ("--device-gib", args.device_gib),
                            ("--seq-len", args.seq_len), ("--model", args.model)) if v is not None]
    if pos and given:  # the positional values would win without a word
        raise ConfigError(given[0], getattr(args, given[0][2:].replace("-", "_")),
                          "conflicts with the positional HOST_GIB DEVICE_GIB SEQ_LEN MODEL_B: give one of them")
    host = pos[0] if pos else args.host_gib
    dev = pos[1] if pos else args.device_gib
    seq = pos[2] if pos else args.seq_len
    model = pos[3] if pos else args.model
    for field, v in (("offload.host_gib", host), ("offload.device_gib", dev), ("offload.seq_len", seq),
                     ("offload.model", model)):
        if v is None:
            raise ConfigError(field, None, "is required (positional or flag)")
    from greentrain.offload.config import OffloadCaps

    caps = OffloadCaps.from_gib(device_gib=_one(str(dev), "offload.device_gib"),
                                host_gib=_one(str(host), "offload.host_gib"))
    seq_len = _int_one(str(seq), "offload.seq_len")
    steps = _int_one(args.steps, "offload.steps")
    micro = _int_one(args.micro_batches, "offload.micro_batches")
    if not 1 <= micro <= 100_000:  # the planner's bound (offload/config.py OffloadPolicy.rounds_per_step)
        raise ConfigError("offload.micro_batches", micro, "must be a whole number from 1 to 100,000")
    try:
        seed = int(args.seed)
    except ValueError:
        raise ConfigError("offload.seed", args.seed, "must be a whole number") from None
    if args.device not in ("auto", "cpu", "cuda"):
        raise ConfigError("offload.device", args.device, "must be auto, cpu or cuda")
    from greentrain.offload.launch import train_command

    result = train_command(model=_model(str(model)), caps=caps, seq_len=seq_len, steps=steps, micro_batches=micro,
                           device=args.device, seed=seed, chip=args.chip, framework=args.framework,
                           host_link=args.host_link, downgrade=not args.no_downgrade, executor=args.executor)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from greentrain.report.offload import render_train

        render_train(result)
    return 0
