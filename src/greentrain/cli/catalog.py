"""`greentrain catalog chips|models|regions|links|frameworks|schedules [--json]`: what greentrain knows, as Rich
tables or JSON.

The tables show human units (TFLOP/s, GiB, TB/s, $/h); --json prints a list of objects with the SI,
unit-named fields of the dataclasses themselves. The listing is greentrain.report.catalog's.
"""

from __future__ import annotations

import argparse
import json
import sys

from greentrain.report.catalog import KINDS, catalog_listing
from greentrain.report.console import stdout_console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, help="what to list")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list of objects (SI units in the keys)")


def run(args: argparse.Namespace) -> int:
    records, table = catalog_listing(args.kind)
    if args.json:
        json.dump(records, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        stdout_console().print(table)
    return 0
