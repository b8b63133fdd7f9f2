"""`greentrain track [--region CODE | --grid-g-per-kwh X] [--pue X] [--out DIR] -- python train.py ...`

Runs the command as a child process under measurement and writes measurement.json, emissions.csv and (with
CO2e) model_card_co2.yaml into --out; exits with the child's status. SIGTERM, SIGHUP or SIGINT go to the
command's process group; after --grace-s the group is killed, the outputs are written from what was
recorded (status "incomplete (SIGTERM)") and the exit status is 128 + the signal (measure/preempt.py).

`greentrain track --summarize DIR [--region CODE ...]` writes the same outputs from the JSONL records a
``greentrain.Tracker`` left in DIR (one per rank under torchrun): for a job that crashed or was killed
before rank 0 could gather them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from greentrain import files
from greentrain.cli.argtypes import bounded, finite_float, path_text
from greentrain.cli.fields import SUMMARIZE_FLAGS, TRACK_FLAGS, fields_as_flags
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.measure.distributed import merge_rank_files
from greentrain.measure.outputs import write_outputs
from greentrain.measure.preempt import DEFAULT_GRACE_S, MAX_GRACE_S, Supervisor
from greentrain.measure.summary import Measurement, make_site
from greentrain.measure.track import check_inputs, merge, run_tracked
from greentrain.report.track import render_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--region", help="grid region code for CO2e (e.g. fr, us-ca); no default")
    parser.add_argument("--grid-g-per-kwh", type=bounded("grid_g_co2e_per_kwh"),
                        help="grid carbon intensity, g CO2e per kWh")
    parser.add_argument("--pue", type=bounded("pue"),
                        help="power usage effectiveness (default: the region's; 1.56 with --grid-g-per-kwh)")
    parser.add_argument("--out", default="greentrain-out", help="output directory (default greentrain-out)",
                        type=path_text)
    parser.add_argument("--cpu-tdp-w", type=bounded("cpu_tdp_w"),
                        help="CPU package TDP in W for the CPU energy estimate")
    parser.add_argument("--interval-s", type=finite_float, default=0.5, help="sampling interval (default 0.5 s)")
    parser.add_argument("--grace-s", type=finite_float, default=DEFAULT_GRACE_S,
                        help="on SIGTERM/SIGHUP/SIGINT: seconds the command gets to stop before SIGKILL "
                             f"(default {DEFAULT_GRACE_S:g}); the outputs are then written, marked incomplete")
    parser.add_argument("--depth", default="1", help="module-hook depth: 1 = top-level blocks, 'leaf' = all")
    parser.add_argument("--no-hooks", action="store_true", help="process-level sampling only")
    parser.add_argument("--project-name", default="greentrain", help="project_name in emissions.csv")
    parser.add_argument("--json", action="store_true", help="print measurement JSON instead of a table (the "
                        "command's own stdout then goes to stderr)")
    parser.add_argument("--summarize", metavar="DIR", help="no command: merge the records in DIR (of an "
                        "earlier `track` run, or greentrain.Tracker's per-rank files) and write the outputs there",
                        type=path_text)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")


def run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.summarize is not None:
        require(not command, "command", " ".join(command), "--summarize takes no command")
        return _summarize(args)
    require(bool(command), "command", "", "give the command to run after --, e.g. -- python train.py")
    require(args.depth == "leaf" or (args.depth.isdigit() and int(args.depth) >= 1), "--depth", args.depth,
            "must be a positive integer or 'leaf'")
    site = make_site(args.region, args.grid_g_per_kwh, args.pue)  # bad input fails before anything runs
    require(0 <= args.grace_s <= MAX_GRACE_S, "--grace-s", args.grace_s, f"must be in [0, {MAX_GRACE_S:g}] s")
    # the command, --cpu-tdp-w, --interval-s and --out are checked before anything is created
    out = Path(args.out)
    with fields_as_flags(TRACK_FLAGS):
        check_inputs(command, args.cpu_tdp_w, args.interval_s)
    files.check_output_dir(out, "--out")
    created = not out.exists()
    try:  # one run per folder at a time (as `experiment run`): two runs would merge into one run's figures
        with files.folder_lock(out, "--out", "greentrain track run"):
            return _run_locked(command, out, site, args)
    except ConfigError:
        if created and not (out / "track.jsonl").exists():  # nothing ran: leave no empty folder behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def _run_locked(command: list[str], out: Path, site: Site | None, args: argparse.Namespace) -> int:
    # the supervisor spans the outputs too: a signal during the writing sets the exit status only
    with Supervisor(args.grace_s) as sup, fields_as_flags(TRACK_FLAGS):  # measure/ names fields (track.interval_s)
        done = run_tracked(command, out, hooks=not args.no_hooks, depth=args.depth, cpu_tdp_w=args.cpu_tdp_w,
                           interval_s=args.interval_s, stdout_to_stderr=args.json, supervisor=sup)
        lost = (f"{done.write_error} while writing {out / 'track.jsonl'} at {done.write_error_at_s:.1f} s into "
                "the run" if done.write_error else "")
        try:
            m = merge(out, site, pue=args.pue)
        except ConfigError as e:
            if not lost:
                raise
            raise ConfigError("--out", str(out), f"{lost}; no record could be read back ({e.rule})") from None
        if sup.signum is not None:
            m = replace(m, notes=(*m.notes, f"{m.status}: the figures cover the {m.num_steps} steps recorded "
                                            "before the signal"))
        if lost:
            m = replace(m, notes=(*m.notes, f"{lost}: the figures cover the records written before it"))
        written = _report(m, out, args, lost)
    if not written:
        return 1
    if lost:
        print(f"greentrain track: error: {lost}; the command ran to its end (exit {done.code}); the "
              f"measurement covers the records written before it", file=sys.stderr)
        return 1
    return done.code


def _summarize(args: argparse.Namespace) -> int:
    site = make_site(args.region, args.grid_g_per_kwh, args.pue)
    out = Path(args.summarize)
    require(out.is_dir(), "--summarize", str(out), "must be the folder of an earlier run (it is not a folder)")
    # track.jsonl: an earlier `greentrain track -- CMD`; else greentrain.Tracker's (per-rank) files
    by_track = (out / "track.jsonl").is_file()
    if by_track:  # an empty or binary track.jsonl gave a 0 s, 0 J measurement
        from greentrain.measure.records import read_jsonl

        require(bool(read_jsonl(out / "track.jsonl")), "--summarize", str(out / "track.jsonl"),
                "holds no complete record of a run")
    with fields_as_flags(SUMMARIZE_FLAGS), files.folder_lock(out, "--summarize", "greentrain track run"):
        m = merge(out, site, pue=args.pue) if by_track else merge_rank_files(out, site, pue=args.pue)
        return 0 if _report(m, out, args) else 1


def _report(m: Measurement, out: Path, args: argparse.Namespace, lost: str = "") -> bool:
    """Write and print the outputs; False (after one line on stderr) when they could not be written: a full
    disk or an I/O error at the end is a fault of the machine, exit 1, not bad input (2)."""
    try:
        paths = write_outputs(m, out, project_name=args.project_name)
    except ConfigError as e:  # a full disk at the end: the records stay, a later --summarize writes the outputs
        kept = f" (and {lost})" if lost else ""
        print(f"greentrain track: error: {e}{kept}; the run's records are kept in {out}: "
              f"`greentrain track --summarize {out}` writes the outputs once there is room", file=sys.stderr)
        return False
    try:
        if args.json:
            print(json.dumps(m.to_json(), indent=2))
        else:
            render_table(m)
        print(f"greentrain: wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    except OSError:  # the terminal went away (SIGHUP): the files are written, which is what matters
        pass
    return True
