"""`greentrain emulate matmul|ffn|mlp|pipeline`: run sharded maths on torch.distributed ranks and count it.

Examples:
  greentrain emulate matmul --mesh 2x4 --m 4096 --k 2048 --n 4096 --a 1x1,1x4 --b 1x4,1x1 --c 1x1,1x1
  greentrain emulate ffn --mesh 2x4 --batch 8 --seq 128 --d-model 1024 --d-ff 4096 --gspmd
  greentrain emulate pipeline --stages 4 --micro-batches 8 --units 256,512,1024,512,256 --schedule 1f1b
  greentrain emulate cases seed003.txt     # one case per line, e.g. "matmul --a 1x1,1x4 --b 1x4,1x1"
Every case is checked before any rank starts; torch is imported only once they are valid. At a terminal a
spinner on stderr names the phase (importing torch, starting the ranks, each case, stopping).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import NoReturn

from greentrain.config import BOUNDS, as_int, read_text, require, require_extra
from greentrain.emulate.cases import (
    Case,
    FfnCase,
    MatMulCase,
    MeshStepCase,
    MlpCase,
    PipelineCase,
    Schedule,
    parse_policy,
)
from greentrain.emulate.results import EmulationResult
from greentrain.emulate.sharding import Mesh2D, TensorSharding
from greentrain.errors import ConfigError
from greentrain.report.emulate import Spinner

MAX_CASES = 1000  # a cases file runs on one set of ranks per world size; thousands would be a slip
_DEFAULTS = {"backend": "gloo", "timeout_s": "60", "collectives": "native", "json": False}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default=_DEFAULTS["backend"], choices=("gloo", "nccl"), help="gloo (CPU) or nccl (GPU)")
    p.add_argument("--timeout-s", default=_DEFAULTS["timeout_s"],
                   help="fail if any rank has not finished by then (default 60)")
    p.add_argument("--collectives", default=_DEFAULTS["collectives"], choices=("native", "ring"),
                   help="torch.distributed's collectives, or explicit rings of send/recv whose bytes are counted")
    p.add_argument("--seed", default="0", help="random seed of the inputs")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="op", required=True, metavar="OP")
    mm = sub.add_parser("matmul", help="C = A @ B under a seed-003 sharding policy")
    mm.add_argument("--mesh", default="2x4", help="device mesh XxY (default 2x4)")
    for name, default in (("m", "4096"), ("k", "2048"), ("n", "4096")):  # --size-*: for torchrun, which
        mm.add_argument(f"--{name}", f"--size-{name}", dest=name, default=default)  # takes --m, --n as its own
    for name in ("a", "b", "c"):
        mm.add_argument(f"--{name}", default="1x1,1x1", help=f"sharding of {name.upper()}: XxY per dim, e.g. 1x4,1x1")
    mm.add_argument("--policy", default=None, help="assert the derived policy (unsharded, matched_inner, "
                    "unmatched_inner, outer, full)")
    ffn = sub.add_parser("ffn", help="feed-forward layer, GSPMD-sharded or unsharded")
    ffn.add_argument("--mesh", default="2x4")
    for name, default in (("batch", "8"), ("seq", "128"), ("d-model", "1024"), ("d-ff", "4096")):
        ffn.add_argument(f"--{name}", default=default)
    kind = ffn.add_mutually_exclusive_group()
    kind.add_argument("--gspmd", dest="gspmd", action="store_true", default=True, help="GSPMD sharding (default)")
    kind.add_argument("--unsharded", dest="gspmd", action="store_false", help="every rank computes everything")
    mlp = sub.add_parser("mlp", help="Megatron column-then-row parallel MLP, forward and backward")
    for name, default in (("tp", "8"), ("tokens", "1024"), ("d-model", "1024"), ("d-ff", "4096")):
        mlp.add_argument(f"--{name}", default=default)
    pp = sub.add_parser("pipeline", help="pipeline-parallel MLP: forward, backward and SGD")
    pp.add_argument("--stages", default=None, help="number of stages (= len(units) - 1)")
    pp.add_argument("--micro-batches", default="8")
    pp.add_argument("--units", default="256,512,1024,512,256", help="layer widths, comma-separated")
    pp.add_argument("--batch", default="4096", help="samples per step (default 4096, as the seed)")
    pp.add_argument("--schedule", default="gpipe", choices=[s.value for s in Schedule])
    pp.add_argument("--learning-rate", default="1e-3")
    ms = sub.add_parser("mesh", help="one training step on a tp x pp x dp mesh: Megatron MLP stages, 1F1B, "
                        "dp gradient all-reduce")
    for name, default in (("tp", "2"), ("pp", "2"), ("dp", "2"), ("micro-batches", "4"), ("tokens", "256"),
                          ("d-model", "256"), ("d-ff", "1024")):
        ms.add_argument(f"--{name}", default=default)
    ms.add_argument("--count-only", action="store_true", help="count every rank's collectives, bytes and FLOPs "
                    "in this process on PyTorch's fake process group (meta tensors: no data, no check, no "
                    "times), up to 65,536 ranks")
    cs = sub.add_parser("cases", help="several cases from a file, one per line in this command's words "
                        "(e.g. matmul --mesh 2x4 --a 1x1,1x4 --b 1x4,1x1), on one set of ranks per world size")
    cs.add_argument("file", help="the cases file ('-': stdin); '#' starts a comment")
    for p in (mm, ffn, mlp, pp, ms, cs):
        _common(p)


def _units(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if not text.strip() or any(not p.strip() for p in parts):
        raise ConfigError("units", text, "must be comma-separated integers, e.g. 256,512,256")
    return tuple(as_int(p.strip(), "units", minimum=1) for p in parts)


def build_case(args: argparse.Namespace) -> Case:
    seed = BOUNDS["seed"].check_int(args.seed, "seed")
    if args.op == "matmul":
        return MatMulCase(mesh=Mesh2D.parse(args.mesh), m=as_int(args.m, "m", minimum=1),
                          k=as_int(args.k, "k", minimum=1), n=as_int(args.n, "n", minimum=1),
                          a=TensorSharding.parse(args.a, "a"), b=TensorSharding.parse(args.b, "b"),
                          c=TensorSharding.parse(args.c, "c"),
                          policy=None if args.policy is None else parse_policy(args.policy), seed=seed)
    if args.op == "ffn":
        return FfnCase(mesh=Mesh2D.parse(args.mesh), batch=as_int(args.batch, "batch", minimum=1),
                       seq=as_int(args.seq, "seq", minimum=1), d_model=as_int(args.d_model, "d-model", minimum=1),
                       d_ff=as_int(args.d_ff, "d-ff", minimum=1), gspmd=args.gspmd, seed=seed)
    if args.op == "mlp":
        return MlpCase(tp=as_int(args.tp, "tp", minimum=1), tokens=as_int(args.tokens, "tokens", minimum=1),
                       d_model=as_int(args.d_model, "d-model", minimum=1),
                       d_ff=as_int(args.d_ff, "d-ff", minimum=1), seed=seed)
    if args.op == "mesh":
        ints = {k: as_int(getattr(args, k), k.replace("_", "-"), minimum=1)
                for k in ("tp", "pp", "dp", "micro_batches")}
        # a micro-batch's rows and the widths: config.BOUNDS (counting mode accepted --d-model 1e12, --tokens 1e15)
        ints["tokens"] = BOUNDS["batch_tokens"].check_int(args.tokens, "tokens")
        ints.update({k: BOUNDS["width"].check_int(getattr(args, k), k.replace("_", "-")) for k in ("d_model", "d_ff")})
        return MeshStepCase(**ints, seed=seed)
    units = _units(args.units)
    if args.stages is not None and as_int(args.stages, "stages", minimum=1) != len(units) - 1:
        raise ConfigError("stages", args.stages, f"must equal len(units) - 1 = {len(units) - 1}")
    return PipelineCase(units=units, micro_batches=as_int(args.micro_batches, "micro-batches", minimum=1),
                        batch=as_int(args.batch, "batch", minimum=1), schedule=Schedule(args.schedule),
                        learning_rate=BOUNDS["learning_rate"].check(args.learning_rate, "--learning-rate"), seed=seed)


def _case_lines(path: str) -> list[tuple[int, list[str]]]:
    """(line number, words) of each case in a cases file; blank lines and ``#`` comments skipped."""
    text = sys.stdin.read() if path == "-" else read_text(path, "cases")
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise ConfigError(f"{path}:{number}", line.strip(), str(e)) from None
        if words:
            lines.append((number, words))
    require(bool(lines), "cases", path, "has no case (one per line, e.g. 'matmul --mesh 2x4 --a 1x1,1x4 --b 1x4,1x1')")
    require(len(lines) <= MAX_CASES, "cases", path, f"has {len(lines):,} cases; at most {MAX_CASES:,} per call")
    return lines


class _LineParser(argparse.ArgumentParser):
    """Parses one line of a cases file; an error names the file, the line and its words (one line)."""

    line = ""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(self.prog, self.line, message)


def read_cases(path: str) -> list[Case]:
    """The cases of a file, each line in this command's own words (``matmul --mesh 2x4 --a 1x1,1x4 ...``);
    the launch options (--backend, --timeout-s, --collectives, --json) belong to the command line."""
    cases = []
    for number, words in _case_lines(path):
        where = f"{path}:{number}"
        parser = _LineParser(prog=where)
        parser.line = " ".join(words)
        add_arguments(parser)
        for word in words:  # a launch option at its default value, or --help, would pass the parser unseen
            flag = word.split("=", 1)[0]
            require(flag not in ("-h", "--help"), where, word, "is not a case: a line describes one case")
            require(flag not in ("--backend", "--timeout-s", "--collectives", "--json"), where, flag,
                    "a launch option: give it on the command line, not per case")
        args = parser.parse_args(words)
        require(args.op != "cases", where, "cases", "a cases file cannot name another one")
        require(not getattr(args, "count_only", False), where, "--count-only",
                "counts one mesh in this process: give it on the command line (emulate mesh --count-only)")
        try:
            cases.append(build_case(args))
        except ConfigError as e:
            raise ConfigError(f"{where}: {e.field}", e.value, e.rule) from None
    return cases


def _launch(cases: list[Case], args: argparse.Namespace) -> list[EmulationResult]:
    """One launch per world size (a launch's ranks run all its cases: start-up is paid once); results in
    the cases' order."""
    timeout_s = BOUNDS["rank_timeout_s"].check(args.timeout_s, "--timeout-s")  # 1e-9 s: the store's TCP traceback
    with Spinner() as spinner:
        spinner.phase("importing torch")
        from greentrain.emulate.launcher import LaunchOptions, emulate  # imports torch

        options = LaunchOptions(backend=args.backend, timeout_s=timeout_s, collectives=args.collectives)
        by_world: dict[int, list[int]] = {}
        for i, case in enumerate(cases):
            by_world.setdefault(case.world_size, []).append(i)
        results: dict[int, EmulationResult] = {}
        for indices in by_world.values():
            got = emulate([cases[i] for i in indices], options, progress=spinner)
            results.update(zip(indices, got, strict=False))  # empty on ranks > 0 under torchrun
    return [results[i] for i in sorted(results)]


def _count(case: Case, args: argparse.Namespace) -> list[EmulationResult]:
    """Counting mode (emulate/counting.py): every rank in this process on the fake process group."""
    from greentrain.emulate.cases import MAX_COUNTED_RANK_MICRO_BATCHES, MAX_COUNTED_RANKS

    assert isinstance(case, MeshStepCase)
    require(case.world_size <= MAX_COUNTED_RANKS, "mesh", case.world_size,
            f"tp x pp x dp must be at most {MAX_COUNTED_RANKS:,} ranks in counting mode")
    require(case.world_size * case.micro_batches <= MAX_COUNTED_RANK_MICRO_BATCHES, "micro-batches",
            case.micro_batches, f"times the {case.world_size:,} ranks must be at most "
            f"{MAX_COUNTED_RANK_MICRO_BATCHES:,} in counting mode (each rank's micro-batches run in this process, "
            "~1-2 ms each)")
    for flag, name in (("--backend", "backend"), ("--collectives", "collectives")):
        require(getattr(args, name) == _DEFAULTS[name], flag, getattr(args, name),
                "counting mode runs no backend and no ring: leave it out with --count-only")
    with Spinner() as spinner:
        spinner.phase("importing torch")
        from greentrain.emulate.counting import count

        def tick(done: int, total: int) -> None:
            if done == 1 or done % 64 == 0 or done == total:
                spinner.phase(f"counting rank {done:,}/{total:,}")

        return [count(case, progress=tick)]


def run(args: argparse.Namespace) -> int:
    require_extra("torch", "torch", "emulate", args.op)
    cases = read_cases(args.file) if args.op == "cases" else [build_case(args)]
    results = _count(cases[0], args) if getattr(args, "count_only", False) else _launch(cases, args)
    if results and args.json:
        data = [r.to_json() for r in results]
        print(json.dumps(data if args.op == "cases" else data[0], indent=2))
    elif results:  # none on a rank > 0 under torchrun: rank 0 reports
        from greentrain.report.emulate import render_emulation

        for result in results:
            render_emulation(result)
    code = 0 if all(r.ok for r in results) else 1
    _exit_now_if_alone(code)
    return code


def _exit_now_if_alone(code: int) -> None:
    """In a `greentrain emulate` process (not when ``main`` is called inside another program, as the tests
    do): exit without the interpreter's finalization, which took 0.6 to 1.4 s on 2 cores once torch is
    imported. The output is flushed and the ranks are joined: nothing is left to clean up."""
    if sys.argv[1:2] != ["emulate"] or Path(sys.argv[0]).name not in ("greentrain", "main.py"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
