"""`greentrain SUBCOMMAND ...`: dispatch to one thin module per subcommand.

Each subcommand module defines ``add_arguments(parser)`` and ``run(args) -> int``. Only the chosen module is
imported, so `greentrain plan --json` starts fast. Errors the user can fix (GreentrainError) are printed as
one line on stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from greentrain._version import __version__
from greentrain.errors import GreentrainError

# name -> (module, one-line help). Add a line here for a new subcommand.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("greentrain.cli.plan", "time, memory, MFU, energy, cost and CO2e of a training run"),
    "simulate": ("greentrain.cli.simulate", "discrete-event simulation: a device swarm (seed 000) or a cluster step"),
    "catalog": ("greentrain.cli.catalog", "list the chips, models and regions greentrain knows"),
    "emulate": ("greentrain.cli.emulate", "run sharded matmul/FFN/MLP/pipeline on torch.distributed ranks, count it"),
    "track": ("greentrain.cli.track", "measure a training script: time, FLOPs, memory, energy, CO2e"),
    "compare": ("greentrain.cli.compare", "predicted (plan --json) against measured (track) with errors"),
    "footprint": ("greentrain.cli.footprint", "energy, operational and embodied CO2e, and cost of a run"),
    "traffic": ("greentrain.cli.traffic", "FLOP and network traffic of a run over six parallel axes (seed 001)"),
    "batch-time": ("greentrain.cli.batch_time", "per-batch time of a pipelined MoE run (seed 001 simple model)"),
    "search": ("greentrain.cli.search", "rank every parallel strategy by time, cost, CO2e or energy; Pareto front"),
    "experiment": ("greentrain.cli.experiment", "fine-tuning variants run, measured, priced and compared (seed 004)"),
    "validate": ("greentrain.cli.validate", "score predictions against measured runs (runs CSV): MFU, ranking, memory"),
    "calibrate": ("greentrain.cli.calibrate", "fit a chip/framework profile from measured runs or track outputs"),
    "offload": ("greentrain.cli.offload", "train under host/device memory caps: plan, heatmap, train (seed 002)"),
    "report": ("greentrain.cli.report", "result JSON files (plan, search, simulate, track, ...) as one HTML page"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (its default also exits 2, but prints the usage first)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _top_help() -> str:
    width = max(len(n) for n in SUBCOMMANDS)
    lines = [f"greentrain {__version__}: predict, check and measure what a training run costs.", "",
             "usage: greentrain SUBCOMMAND [options]   (greentrain SUBCOMMAND --help for its options)", ""]
    lines += [f"  {name:<{width}}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_top_help())
        return 0
    if args[0] == "--version":
        print(__version__)
        return 0
    name = args[0]
    if name not in SUBCOMMANDS:
        from greentrain.errors import did_you_mean

        print(f"greentrain: error: unknown subcommand {name!r}{did_you_mean(name, SUBCOMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    parser = _Parser(prog=f"greentrain {name}", description=SUBCOMMANDS[name][1])
    module.add_arguments(parser)
    try:
        ns = parser.parse_args(args[1:])
        return int(module.run(ns))
    except GreentrainError as e:
        print(f"greentrain {name}: error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse
        return int(e.code) if isinstance(e.code, int) else 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
