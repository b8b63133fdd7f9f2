"""`greentrain experiment plan|run|status|report`: variants of a fine-tuning job, predicted, run, compared
(seed 004; design/experiment.md). Thin: parsing and printing only.

    greentrain experiment plan   EXP.yaml [--json]
    greentrain experiment run    EXP.yaml [--out DIR] [--only ID,..] [--isolation process|inline] [--fresh]
                                          [--over-budget-ok] [--executor local|ray|slurm] [--jobs N]
                                          [--max-retries N] [--ray-address A] [--storage URL] [--slurm K=V]
    greentrain experiment status DIR [--json]
    greentrain experiment report DIR [DIR ...] [--reprice REGION ...] [--plot DIR] [--json] [--mlflow [URI]]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.cli.argtypes import path_text
from greentrain.cli.fields import EXPERIMENT_RUN_FLAGS, fields_as_flags
from greentrain.config import MAX_PATH_CHARS, as_float, as_int, require, split_list
from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from greentrain.experiment.results import VariantResult
    from greentrain.experiment.runner import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="plan|run|status|report")
    p = sub.add_parser("plan", help="expand the variants, predict each, check the budget (no torch)")
    p.add_argument("experiment", help="experiment YAML file")
    p.add_argument("--json", action="store_true")
    r = sub.add_parser("run", help="run every variant (resumes; finished variants are not run again)")
    r.add_argument("experiment", help="experiment YAML file")
    r.add_argument("--out", type=path_text, help="output folder (default: experiments/<name>)")
    r.add_argument("--only", help="comma-separated variant ids")
    r.add_argument("--isolation", choices=("process", "inline"), default="process",
                   help="one worker process per variant (default), or all in this process")
    r.add_argument("--fresh", action="store_true", help="forget earlier results in the folder")
    r.add_argument("--over-budget-ok", action="store_true", help="run even when the plan exceeds the budget")
    r.add_argument("--no-plot", action="store_true", help="skip the plots")
    _executor_arguments(r)
    s = sub.add_parser("status", help="done, failed, pending and not applicable variants")
    s.add_argument("dir", help="output folder of `experiment run`")
    s.add_argument("--json", action="store_true")
    q = sub.add_parser("report", help="table, Pareto set, findings, re-pricing, files and plots")
    q.add_argument("dir", nargs="+", help="output folder(s) of `experiment run`; several: one merged report "
                   "(printed, --plot DIR for plots), of the same experiment")
    q.add_argument("--reprice", nargs="+", metavar="REGION", help="price the measurements in these regions")
    q.add_argument("--plot", type=path_text, help="folder for the plots (default: DIR)")
    q.add_argument("--json", action="store_true", help='print {"variants": [...], ...}')
    q.add_argument("--mlflow", nargs="?", const=True, metavar="URI",
                   help="log one MLflow run per finished variant, none twice (default URI: sqlite:///DIR/mlflow.db)")


def _executor_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("--executor", choices=("local", "ray", "slurm"), default="local",
                   help="local worker processes (default), Ray tasks (greentrain[ray]) or a Slurm job array "
                   "through submitit (greentrain[slurm])")
    r.add_argument("--jobs", type=int, default=1, metavar="N", help="local: variants at once, one worker "
                   "process, device group or share of the cores each (default 1)")
    r.add_argument("--max-retries", type=int, default=0, metavar="N", help="run a variant whose worker was "
                   "killed (OOM, preemption) again, up to N times; its attempt is counted as waste")
    r.add_argument("--ray-address", default="", metavar="ADDRESS",
                   help="ray: the cluster's address (default: a local cluster)")
    r.add_argument("--storage", default="", metavar="URL", help="search: Optuna storage shared by several runners: "
                   "sqlite:///PATH, any SQLAlchemy URL, or journal:PATH (default DIR/optuna.journal)")
    r.add_argument("--pruner", choices=("none", "median", "hyperband"), help="search: Optuna's pruner over the "
                   "trials' evaluations inside training (single objective eval_loss or perplexity; default: the "
                   "file's search.pruner)")
    r.add_argument("--slurm", action="append", default=[], metavar="KEY=VALUE",
                   help="slurm: a submitit parameter (partition=gpu, gpus_per_node=1, timeout_min=60; repeat)")


# submitit's generic numeric parameters: (least, most); a node holds <= 64 devices (job.MAX_DEVICES), <= 4,096
# threads and <= 1e5 GiB (config.BOUNDS), a job runs <= 1,024 nodes (job.MAX_NODES) for <= a year
SLURM_NUMBERS = {"timeout_min": (1, 525_600), "nodes": (1, 1024), "cpus_per_task": (1, 4096),
                 "gpus_per_node": (0, 64), "tasks_per_node": (1, 64), "mem_gb": (0, 100_000)}


def _slurm_pairs(given: list[str], executor: str) -> list[tuple[str, str]]:
    """--slurm KEY=VALUE pairs, each checked where it enters (submitit checks them only when the jobs are made)."""
    slurm: list[tuple[str, str]] = []
    for kv in given:
        require(executor == "slurm", "--slurm", kv, f"applies to --executor slurm (not {executor})")
        key, eq, value = kv.partition("=")
        if not eq or not key.strip() or not value.strip() or any(not c.isprintable() for c in kv):
            raise ConfigError("--slurm", kv, "must be KEY=VALUE, both given, on one line (e.g. partition=gpu)")
        require(len(kv) <= MAX_PATH_CHARS, "--slurm", kv, f"must be at most {MAX_PATH_CHARS:,} characters")
        require(key not in dict(slurm), "--slurm", kv, f"sets {key} again (to {dict(slurm).get(key)!r}): once each")
        if key in SLURM_NUMBERS:  # submitit asserts their types: "-5" or "nan" was an AssertionError traceback
            number = as_float(value, f"--slurm {key}") if key == "mem_gb" else as_int(value, f"--slurm {key}")
            least, most = SLURM_NUMBERS[key]
            require(least <= number <= most, f"--slurm {key}", value, f"must be in [{least}, {most:,}]")
            value = str(number)
        slurm.append((key, value))
    return slurm


def _run_options(args: argparse.Namespace, out: Path) -> RunOptions:
    from greentrain.experiment.cluster import check_ray_address, reach_ray_address
    from greentrain.experiment.pruning import check_storage
    from greentrain.experiment.runner import RunOptions

    slurm = _slurm_pairs(args.slurm, args.executor)
    require(not args.ray_address or args.executor == "ray", "--ray-address", args.ray_address,
            f"applies to --executor ray (not {args.executor})")
    if args.executor == "ray":  # before any work: ray.init retries an unreachable address for minutes
        reach_ray_address(check_ray_address(args.ray_address))
    return RunOptions(out_dir=out, only=tuple(split_list(args.only, "only")) if args.only is not None else (),
                      isolation=args.isolation, fresh=args.fresh, over_budget_ok=args.over_budget_ok,
                      executor=args.executor, jobs=args.jobs, max_retries=args.max_retries,
                      ray_address=check_ray_address(args.ray_address), storage=check_storage(args.storage),
                      slurm=tuple(slurm))


def _report(out: Path, regions: list[str] | None, plot_dir: Path | None, as_json: bool, files: bool,
            show: bool = True) -> None:
    from greentrain.experiment.report import build_report
    from greentrain.report.experiment import render_report, write_report_files

    rep = build_report(out, regions)
    if files:
        write_report_files(out, rep)
        if plot_dir is not None:
            from greentrain.report.experiment import write_plots

            write_plots(rep, plot_dir)
    if not show:
        return
    if as_json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        render_report(rep, findings=files)


def run(args: argparse.Namespace) -> int:
    if args.action == "plan":
        from greentrain.experiment.plan import plan_experiment
        from greentrain.experiment.spec import load_experiment

        plan = plan_experiment(load_experiment(args.experiment), lengths=True)
        if args.json:
            print(json.dumps(plan.to_dict(), indent=1))
        else:
            from greentrain.report.experiment import render_plan

            render_plan(plan)
        return 0
    if args.action == "run":
        with fields_as_flags(EXPERIMENT_RUN_FLAGS):
            return _run(args)
    if args.action == "status":
        _report(Path(args.dir), [], None, args.json, False)
        return 0
    if isinstance(args.mlflow, str) and not args.mlflow.strip():  # was no MLflow run at all, without a word
        raise ConfigError("--mlflow", args.mlflow, "must be a tracking URI, or --mlflow alone for sqlite:///DIR/mlflow.db")
    if len(args.dir) > 1:
        return _merged_report(args)
    out = Path(args.dir[0])
    if args.mlflow:
        from greentrain.experiment.tracking import require_mlflow

        require_mlflow("--mlflow", args.mlflow)
    import importlib.util

    has_plot = importlib.util.find_spec("matplotlib") is not None
    if args.plot:  # before the report is built: matplotlib is there, the folder can be made and written in
        from greentrain.files import check_output_dir

        if not has_plot:
            raise ConfigError("--plot", args.plot, "needs matplotlib, which is not installed: "
                              "pip install 'greentrain[plot]'")
        check_output_dir(args.plot, "--plot")
    elif not has_plot:  # the default plots are left out on a light install; the tables and files are not
        print("greentrain experiment: no plots (matplotlib is not installed: pip install 'greentrain[plot]')",
              file=sys.stderr)
    _report(out, args.reprice, Path(args.plot) if args.plot else (out if has_plot else None), args.json, True)
    if args.mlflow:
        _mlflow(out, args.mlflow)
    return 0


def _merged_report(args: argparse.Namespace) -> int:
    """`report A B ...`: the merged report printed (nothing written into the folders); plots with --plot DIR."""
    from greentrain.experiment.report import build_report
    from greentrain.report.experiment import render_report, write_plots

    if args.mlflow:
        raise ConfigError("--mlflow", " ".join(args.dir), "logs one folder's variants: give one DIR")
    if args.plot:
        from greentrain.files import check_output_dir

        check_output_dir(args.plot, "--plot")
    rep = build_report([Path(d) for d in args.dir], args.reprice)
    if args.plot:
        write_plots(rep, Path(args.plot))
    if args.json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        render_report(rep)
    return 0


def _run(args: argparse.Namespace) -> int:
    """`experiment run`: the variants (or the search's trials), the report files after each, then the report."""
    from greentrain.experiment import ranks
    from greentrain.experiment.runner import run_experiment
    from greentrain.experiment.spec import load_experiment

    ranks.own_process()  # the command's process: its inline variants may freeze the imports (worker.py)
    exp = load_experiment(args.experiment)
    if getattr(args, "pruner", None):
        from greentrain.experiment.search_spec import with_pruner

        if exp.search is None:
            raise ConfigError("--pruner", args.pruner, "applies to a search (the file has no search section)")
        exp = dataclasses.replace(exp, search=with_pruner(exp.search, args.pruner, exp.base_raw, "--pruner"))
    from greentrain.files import check_output_dir, confined

    # the name comes from the file: it may only name a folder inside experiments/
    out = Path(args.out) if args.out else confined("experiments", exp.name, "name")
    check_output_dir(out, "--out")
    if args.fresh and out.is_dir() and any(out.iterdir()) and not (out / "experiment.json").is_file():
        raise ConfigError("--fresh", str(out), "is not an experiment's results folder (no experiment.json): "
                          "nothing is deleted; give an --out of its own")
    opts = _run_options(args, out)
    plot_dir = None if args.no_plot else out
    # the report files are rewritten after every variant (an interrupted run still has them)
    progress = None
    if sys.stderr.isatty():
        from greentrain.report.experiment import RichProgress

        progress = RichProgress
    runner: Callable[..., list[VariantResult]] = run_experiment
    if exp.search is not None:  # Optuna's trials instead of the axes
        from greentrain.experiment.search import run_search

        runner = run_search
    elif opts.executor != "local":  # Ray tasks or a Slurm job array
        from functools import partial

        from greentrain.experiment.cluster import run_on_cluster

        runner = partial(run_experiment, cluster=run_on_cluster)
    try:
        results = runner(exp, opts, progress=progress,
                         after_variant=lambda d: _after_variant(d, exp.base.mlflow))
    except ConfigError as e:  # the core names the option's field; here it is a flag
        raise ConfigError(e.field, e.value, e.rule.replace("RunOptions.over_budget_ok", "--over-budget-ok")) \
            from None
    _report(out, None, plot_dir, False, True)
    if exp.base.mlflow:
        _mlflow(out, exp.base.mlflow)
    print(f"results in {out}", file=sys.stderr)
    return 1 if any(r.status == "failed" for r in results) else 0


def _after_variant(out: Path, mlflow: str | bool | None) -> None:
    """After each variant: the report rewritten, and the variant in MLflow while the rest still run."""
    _report(out, None, None, False, True, show=False)
    if mlflow:
        _mlflow(out, mlflow)


def _mlflow(out: Path, setting: str | bool) -> None:
    from greentrain.experiment.report import load_results
    from greentrain.experiment.tracking import log_variants, tracking_uri

    man, results = load_results(out)
    created, present = log_variants(str(man["name"]), results, out, setting)
    print(f"mlflow: {created} run(s) logged, {present} already there ({tracking_uri(out, setting)})", file=sys.stderr)
