"""`greentrain report FILE.json... -o report.html`: plan, search, simulate (and its --trace), track, compare,
footprint, traffic, batch-time, offload-heatmap and experiment results as one self-contained static HTML page
(inline SVG plots, HTML tables, no script; docs/report.md)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.json",
                   help="result files: the --json output of plan, search, simulate, compare, footprint, traffic, "
                        "batch-time or offload heatmap, a simulate --trace, a track measurement.json, an "
                        "experiment's results.json (any mix, in the order the page shows them)")
    p.add_argument("-o", "--output", required=True, metavar="REPORT.html", help="the page to write (.html)")


def run(args: argparse.Namespace) -> int:
    from greentrain.files import check_not_an_input
    from greentrain.report.html import write_report

    check_not_an_input(args.output, args.files, "-o")  # -o LINK.html -> plan.json overwrote the plan
    done = write_report(args.files, args.output)
    print(f"greentrain report: wrote {done.path} ({done.size_bytes / 1e3:,.0f} kB, {done.num_sections} "
          f"section(s), {done.seconds:.2f} s)")
    return 0
