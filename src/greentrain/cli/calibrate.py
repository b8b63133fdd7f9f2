"""`greentrain calibrate RUNS.csv|TRACK_DIR... -o PROFILE.yaml`: fit the few constants of one chip and framework
from measured runs, report the error on runs held back, and write a profile with its provenance."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.cli.argtypes import link_name

if TYPE_CHECKING:
    from greentrain.calibrate.runs import Run


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="RUNS.csv|TRACK_DIR",
                   help="runs CSVs (columns: docs/runs-csv.md) and `greentrain track` directories")
    p.add_argument("-o", "--out", required=True, metavar="PROFILE.yaml", help="where to write the profile")
    p.add_argument("--framework", default="", help="framework the runs used (default: the runs' framework column, "
                   "else megatron)")
    p.add_argument("--scenario", default="", help="scenario YAML (with its strategy) of track directories that "
                   "have no scenario.yaml")
    p.add_argument("--fit", default="kernel_efficiency,host_layer_s,fragmentation",
                   help="constants to fit (of kernel_efficiency, host_layer_s, host_layer_s_per_tp_pp_nodes, "
                   "inter_node_link, fragmentation)")
    p.add_argument("--holdout", type=float, default=0.25, help="fraction of the runs held back to score the fit")
    p.add_argument("--seed", type=int, default=0, help="seed of the hold-out draw")
    p.add_argument("--intra-node-link", default="", type=link_name,
                   help="the runs' intra-node link if not the chip's")
    p.add_argument("--inter-node-link", default="", type=link_name,
                   help="the runs' network if not the chip's (e.g. efa-400)")
    p.add_argument("--json", action="store_true", help="print the profile as JSON too")


def _runs(args: argparse.Namespace) -> list[Run]:
    from greentrain.calibrate.profile import read_track_run
    from greentrain.calibrate.runs import read_runs
    from greentrain.errors import ConfigError
    from greentrain.estimate.efficiency import framework_names

    runs: list[Run] = []
    seen: set[Path] = set()
    for item in args.inputs:
        path = Path(item)
        if path.exists() and path.resolve() in seen:  # its runs would be fitted twice, or fitted and held out
            raise ConfigError("inputs", item, "is given twice")
        seen.add(path.resolve())
        if path.is_dir():
            runs.append(read_track_run(path, args.scenario))
        elif path.is_file():
            runs += read_runs(path, intra_node_link=args.intra_node_link, inter_node_link=args.inter_node_link,
                              frameworks=() if args.framework else framework_names())
        elif not path.exists():
            raise ConfigError("inputs", item, "does not exist (give a runs CSV or a track directory)")
        else:
            raise ConfigError("inputs", item, "is neither a runs CSV nor a track directory")
    if args.scenario and not any(Path(i).is_dir() and not (Path(i) / "scenario.yaml").is_file()
                                 for i in args.inputs):  # a flag that would be silently ignored
        raise ConfigError("--scenario", args.scenario, "is used only for track directories without a "
                          "scenario.yaml, and no input is one")
    return runs


def run(args: argparse.Namespace) -> int:
    from greentrain.calibrate.fit import calibrate
    from greentrain.calibrate.profile import profile_dict, write_profile
    from greentrain.cli.fields import fields_as_flags
    from greentrain.errors import ConfigError
    from greentrain.estimate.efficiency import DEFAULT_FRAMEWORK, Profile
    from greentrain.files import check_not_an_input, check_output_path

    out = check_output_path(args.out, "-o", (".yaml", ".yml"))  # before the fit: the folder takes a new file
    check_not_an_input(out, [*args.inputs, args.scenario], "-o")  # -o runs.csv overwrote the runs
    names = tuple(n.strip() for n in args.fit.split(",") if n.strip())
    runs = _runs(args)
    frameworks = sorted({r.framework for r in runs if r.framework})
    framework = args.framework or (frameworks[0] if len(frameworks) == 1 else DEFAULT_FRAMEWORK)
    if not args.framework and len(frameworks) > 1:
        raise ConfigError("framework", ", ".join(frameworks), "the runs mix frameworks: give --framework")
    kernels = {}  # one profile is fitted: the rows' attention and loss kernels must agree (empty: the framework's)
    for col in ("attention_kernel", "loss_kernel"):
        named = sorted({getattr(r, col) for r in runs})
        if len(named) > 1:
            raise ConfigError(col, ", ".join(n or "(the framework's)" for n in named),
                              "the runs mix kernels: one profile is fitted for all of them")
        kernels[col] = named[0] if named else ""
    eff = Profile(framework=framework, **kernels).for_chip(runs[0].scenario.cluster.chip.name)
    with fields_as_flags({"fit": "--fit", "holdout": "--holdout"}):
        result = calibrate(runs, eff, holdout=args.holdout, seed=args.seed, names=names)
    data = profile_dict(result, [str(x) for x in args.inputs], args.holdout, args.seed)
    write_profile(data, out)
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    from greentrain.report.calibrate import render_calibration
    from greentrain.report.console import default_console

    render_calibration(result, str(out), default_console())
    return 0
