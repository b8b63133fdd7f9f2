"""`greentrain SUBCOMMAND ...`: dispatch to one thin module per subcommand.

Each subcommand module defines ``add_arguments(parser)`` and ``run(args) -> int``. Only the chosen module is
imported, so `greentrain plan --json` starts fast. Whatever stops a command is one line on stderr, never a
traceback, with the exit status saying what kind of stop it was:

  2    input the user can fix (GreentrainError: a field, its value, the rule), an output path that cannot be
       written, or an optional library that is not installed (the line names the extra to install);
  1    the machine failed the command while it worked (an OSError: disk full, I/O error, permission lost),
       or a command's own failure (experiment variants that failed);
  130  interrupted by Ctrl-C (SIGINT), 143 terminated by SIGTERM (128 + the signal, as a shell reports it).
       Outputs are written whole or not at all (greentrain.files), so an interrupted command leaves no half
       file; `experiment run` and `track` resume or start clean on the next run.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from greentrain._version import __version__
from greentrain.errors import GreentrainError
from greentrain.files import all_or_none

# name -> (module, one-line help). Add a line here for a new subcommand.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("greentrain.cli.plan", "time, memory, MFU, energy, cost and CO2e of a training run"),
    "simulate": ("greentrain.cli.simulate", "discrete-event simulation: a device swarm (seed 000) or a cluster step"),
    "catalog": ("greentrain.cli.catalog", "list the chips, models, regions, links, frameworks, schedules it knows"),
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


# optional library (top-level module) -> the extra that installs it (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, str] = {
    "torch": "torch", "matplotlib": "plot", "pynvml": "gpu", "transformers": "experiment",
    "accelerate": "experiment", "tokenizers": "experiment", "rouge_score": "experiment", "optuna": "search",
    "mlflow": "mlflow", "sqlalchemy": "mlflow", "alembic": "mlflow", "lightning": "torch",
}
# what an interrupted subcommand leaves, said after "no output was left half-written"
RESUME: dict[str, str] = {
    "experiment": "; `experiment run` again resumes: finished variants are kept, the interrupted one reruns",
    "track": "; the records so far are kept: `greentrain track --summarize DIR` writes their outputs",
}
# commands whose files must appear while they run (per-variant results to resume from; a run's records):
# they write each file whole as it goes; every other command's files are committed together at its end
WRITES_AS_IT_GOES = frozenset({"experiment", "track"})
SIGINT_STATUS = 128 + signal.SIGINT  # 130
SIGTERM_STATUS = 128 + signal.SIGTERM  # 143


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like KeyboardInterrupt so that ``finally`` blocks (temporary files,
    locks) run before the exit. A BaseException: ``except Exception`` does not swallow it."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Terminated while the command runs (a command with its own handler, `track`'s
    supervisor, replaces it for its run and puts it back)."""

    def handler(signum: int, frame: object) -> None:
        raise Terminated

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (main() called from a thread): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def missing_extra(exc: ImportError) -> str:
    """The one-line rule for a missing optional library, or "" when ``exc`` is not about one."""
    top = (exc.name or "").split(".")[0]
    if top not in EXTRAS:
        return ""
    return f"needs {top}, which is not installed: pip install \"greentrain[{EXTRAS[top]}]\""


def _os_error_line(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return f"{reason}{where}"


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


def _plug_closed_streams() -> None:
    """Started with stdout or stderr closed (`>&-`), Python sets sys.stdout to None: print() drops its text
    but json.dump(..., sys.stdout) raises. Both get /dev/null instead (it takes the lowest free descriptor, the
    closed one when no lower one is closed too)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (the process's stream)


def main(argv: Sequence[str] | None = None) -> int:
    _plug_closed_streams()
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
    try:
        with _sigterm_raises():
            return _run(name, args[1:])
    except KeyboardInterrupt:
        print(f"greentrain {name}: interrupted (Ctrl-C); no output was left half-written{RESUME.get(name, '')}",
              file=sys.stderr)
        return SIGINT_STATUS
    except Terminated:
        print(f"greentrain {name}: terminated (SIGTERM); no output was left half-written{RESUME.get(name, '')}",
              file=sys.stderr)
        return SIGTERM_STATUS


def _run(name: str, argv: list[str]) -> int:
    try:
        module = importlib.import_module(SUBCOMMANDS[name][0])
        parser = _Parser(prog=f"greentrain {name}", description=SUBCOMMANDS[name][1])
        module.add_arguments(parser)
        ns = parser.parse_args(argv)
        if name in WRITES_AS_IT_GOES:
            return int(module.run(ns))
        with all_or_none():  # the command's output files appear together when it ends, or none of them
            try:
                return int(module.run(ns))
            except BrokenPipeError:  # the reader of stdout left (`| head`): the files are still written
                return 0
            except SystemExit as e:  # Rich answers a closed stdout with SystemExit(1): the same case
                if isinstance(e.__context__, BrokenPipeError):
                    return 0
                raise
    except GreentrainError as e:
        print(f"greentrain {name}: error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse
        return int(e.code) if isinstance(e.code, int) else 2
    except BrokenPipeError:
        return 0
    except ImportError as e:
        rule = missing_extra(e)
        if not rule:
            raise
        print(f"greentrain {name}: error: {rule}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"greentrain {name}: error: {_os_error_line(e)}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"greentrain {name}: error: out of memory (the machine could not give the memory asked for)",
              file=sys.stderr)
        return 1

if __name__ == "__main__":
    raise SystemExit(main())
