"""`greentrain compare PREDICTED.json MEASURED.json`: prediction errors (plan --json against a measurement)."""

from __future__ import annotations

import argparse
import json

from greentrain.config import load_mapping
from greentrain.measure.compare import check_kinds, compare, mismatch_warnings


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
        print(json.dumps({"rows": [{"quantity": r.quantity, "predicted": r.predicted, "measured": r.measured,
                                    "relative_error": r.relative_error} for r in rows],
                          "warnings": warnings}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="predicted vs measured")
    for col in ("quantity", "predicted", "measured", "error"):
        table.add_column(col, justify="left" if col == "quantity" else "right")
    for r in rows:
        err = "n/a" if r.relative_error is None else f"{r.relative_error:+.1%}"
        table.add_row(r.quantity, f"{r.predicted:.4g}", f"{r.measured:.4g}", err)
    console = Console()
    console.print(table)
    for w in warnings:
        console.print(f"warning: {w}")
    return 0
