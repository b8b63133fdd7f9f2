"""`greentrain compare PREDICTED.json MEASURED.json`: prediction errors (plan --json against a measurement)."""

from __future__ import annotations

import argparse
import json

from greentrain.report.compare import compare, comparison_to_dict, load_inputs, mismatch_warnings, render_comparison
from greentrain.results.view import stamp


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("predicted", help="JSON from `greentrain plan --json`")
    parser.add_argument("measured", help="measurement.json from `greentrain track` or a Tracker")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    # config.load_mapping reads each file (a directory, a binary file, a key given twice: one line naming the
    # argument), results/codec.py types it (an unknown kind, a newer schema, a malformed field: one line naming
    # the file and the field); a plan given as the measurement is refused
    predicted, measured = load_inputs(args.predicted, args.measured)
    rows, warnings = compare(predicted, measured), mismatch_warnings(predicted, measured)
    if args.json:
        print(json.dumps(stamp("compare", comparison_to_dict(rows, warnings)), indent=2))
        return 0
    render_comparison(rows, warnings)
    return 0
