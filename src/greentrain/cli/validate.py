"""`greentrain validate RUNS.csv`: predict every run of a runs CSV and score the predictions against what was
measured (MFU error, rank correlation and best pick per group, ran/crashed, peak memory)."""

from __future__ import annotations

import argparse
import json

from greentrain.cli.argtypes import link_name
from greentrain.cli.scenario_args import add_profile_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", help="runs CSV (columns: docs/runs-csv.md)")
    add_profile_arguments(p, for_runs=True)
    p.add_argument("--intra-node-link", default="", type=link_name,
                   help="the runs' intra-node link (catalog name) if not the chip's")
    p.add_argument("--inter-node-link", default="", type=link_name,
                   help="the runs' network (catalog name, e.g. efa-400) if not the "
                   "chip's")
    p.add_argument("--json", action="store_true", help='print {"rows": [...], "summary": {...}}')


def _check_names(args: argparse.Namespace) -> None:
    from greentrain.errors import ConfigError, did_you_mean
    from greentrain.estimate.efficiency import framework_names
    from greentrain.hardware.catalog import get_link

    if args.framework and args.framework not in framework_names():
        raise ConfigError("framework", args.framework,
                          f"is not a known framework{did_you_mean(args.framework, framework_names())}")
    if args.attention_kernel or args.selective_recompute or args.loss_kernel:  # unknown names fail here, first
        from greentrain.cli.fields import KERNEL_FLAGS, fields_as_flags
        from greentrain.estimate.efficiency import efficiency_for

        with fields_as_flags(KERNEL_FLAGS):
            efficiency_for("", args.framework or "megatron", args.attention_kernel or "",
                           args.selective_recompute or "", loss_kernel=args.loss_kernel or "")
    for name in (args.intra_node_link, args.inter_node_link):
        if name:
            get_link(name)


def run(args: argparse.Namespace) -> int:
    from greentrain.calibrate.runs import read_runs
    from greentrain.calibrate.validate import validate
    from greentrain.estimate.efficiency import efficiency_for, with_calibration

    _check_names(args)
    from greentrain.estimate.efficiency import framework_names

    runs = read_runs(args.runs, intra_node_link=args.intra_node_link, inter_node_link=args.inter_node_link,
                     frameworks=() if args.framework else framework_names())
    if args.attention_kernel:  # a fused kernel beside a row's flash_attention=false would be ignored for it
        from greentrain.cli.scenario_args import check_attention_kernel

        for r in runs:
            if not r.strategy.flash_attention:
                check_attention_kernel(args.attention_kernel, args.framework or "megatron", False,
                                       f"runs[{r.run_id}].flash_attention=false")
    if args.calibration:  # checked before any prediction
        with_calibration(efficiency_for(runs[0].scenario.cluster.chip.name), args.calibration)
    preds, summary = validate(runs, framework=args.framework, calibration=args.calibration or "",
                              attention_kernel=args.attention_kernel or "",
                              selective_recompute=args.selective_recompute or "",
                              loss_kernel=args.loss_kernel or "")
    settings = {"runs": args.runs, "framework": args.framework or None, "calibration": args.calibration or None,
                "attention_kernel": args.attention_kernel or None,
                "selective_recompute": args.selective_recompute or None, "loss_kernel": args.loss_kernel or None,
                "intra_node_link": args.intra_node_link or None, "inter_node_link": args.inter_node_link or None}
    from greentrain.calibrate.bands import check_bands

    bands = check_bands(runs, preds, args.framework or "")
    if args.json:
        from greentrain.report.validate import validation_to_dict

        print(json.dumps(validation_to_dict(runs, preds, summary, settings, bands), indent=1))
        return 0
    from greentrain.report.console import default_console
    from greentrain.report.validate import render_validation

    render_validation(summary, settings, default_console(), bands)
    return 0
