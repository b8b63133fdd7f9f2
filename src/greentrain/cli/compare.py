"""`greentrain compare PREDICTED.json MEASURED.json`: prediction errors (plan --json against a measurement)."""

from __future__ import annotations

import argparse
import json

from greentrain.config import load_mapping
from greentrain.report.compare import (
    check_kinds,
    compare,
    comparison_to_dict,
    mismatch_warnings,
    render_comparison,
)
from greentrain.report.results import stamp


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("predicted", help="JSON from `greentrain plan --json`")
    parser.add_argument("measured", help="measurement.json from `greentrain track` or a Tracker")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    # config.load_mapping: one reader for every file a user names (a directory, a binary file, a key given
    # twice: one-line errors naming the argument)
    predicted = load_mapping(args.predicted, field="predicted")
    measured = load_mapping(args.measured, field="measured")
    check_kinds(predicted, measured, args.measured)
    rows, warnings = compare(predicted, measured), mismatch_warnings(predicted, measured)
    if args.json:
        print(json.dumps(stamp("compare", comparison_to_dict(rows, warnings)), indent=2))
        return 0
    render_comparison(rows, warnings)
    return 0
