"""`greentrain emulate matmul|ffn|mlp|pipeline`: run sharded maths on torch.distributed ranks and count it.

Examples:
  greentrain emulate matmul --mesh 2x4 --m 4096 --k 2048 --n 4096 --a 1x1,1x4 --b 1x4,1x1 --c 1x1,1x1
  greentrain emulate ffn --mesh 2x4 --batch 8 --seq 128 --d-model 1024 --d-ff 4096 --gspmd
  greentrain emulate pipeline --stages 4 --micro-batches 8 --units 256,512,1024,512,256 --schedule 1f1b
The case is checked before any rank starts; torch is imported only once it is valid.
"""

from __future__ import annotations

import argparse
import json

from greentrain.config import as_float, as_int, require_extra
from greentrain.emulate.cases import Case, FfnCase, MatMulCase, MlpCase, PipelineCase, Schedule, parse_policy
from greentrain.emulate.results import EmulationResult
from greentrain.emulate.sharding import Mesh2D, TensorSharding
from greentrain.errors import ConfigError
from greentrain.units import GFLOP, MIB


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="gloo", choices=("gloo", "nccl"), help="gloo (CPU) or nccl (GPU)")
    p.add_argument("--timeout-s", default="60", help="fail if any rank has not finished by then (default 60)")
    p.add_argument("--collectives", default="native", choices=("native", "ring"),
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
    for p in (mm, ffn, mlp, pp):
        _common(p)


def _units(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if not text.strip() or any(not p.strip() for p in parts):
        raise ConfigError("units", text, "must be comma-separated integers, e.g. 256,512,256")
    return tuple(as_int(p.strip(), "units", minimum=1) for p in parts)


def build_case(args: argparse.Namespace) -> Case:
    seed = as_int(args.seed, "seed", minimum=0)
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
    units = _units(args.units)
    if args.stages is not None and as_int(args.stages, "stages", minimum=1) != len(units) - 1:
        raise ConfigError("stages", args.stages, f"must equal len(units) - 1 = {len(units) - 1}")
    return PipelineCase(units=units, micro_batches=as_int(args.micro_batches, "micro-batches", minimum=1),
                        batch=as_int(args.batch, "batch", minimum=1), schedule=Schedule(args.schedule),
                        learning_rate=as_float(args.learning_rate, "learning-rate", positive=True), seed=seed)


def _render(result: EmulationResult) -> None:
    from rich.console import Console
    from rich.table import Table

    t = result.total
    table = Table(title=f"{result.label}  ({result.world_size} ranks, {result.backend})", show_header=False)
    rows = [("policy", result.policy),
            ("flops", f"{t.flops:,}  ({t.flops / GFLOP:.3f} GFLOP)"),
            ("h2d messages / bytes", f"{t.h2d_messages:,} / {t.h2d_bytes:,}  ({t.h2d_bytes / MIB:.2f} MiB)"),
            ("d2d messages / bytes (naive)", f"{t.d2d_messages:,} / {t.d2d_bytes:,}  ({t.d2d_bytes / MIB:.2f} MiB)"),
            ("ring bytes (estimate.comm)", f"{t.ring_bytes:,.0f}  ({t.ring_bytes / MIB:.2f} MiB)"),
            ("collectives recorded", f"{result.num_collectives:,}  (comm time {result.comm_time_s:.4f} s)"),
            ("time (slowest rank)", f"{result.time_s:.4f} s"),
            ("max abs / rel error", f"{result.max_abs_error:.3e} / {result.max_rel_error:.3e}  "
                                    f"({'ok' if result.ok else 'FAILED'}, tolerance {result.tolerance:g})")]
    if t.wire_bytes:
        rows.insert(5, ("wire bytes (ring, counted)", f"{t.wire_bytes:,}"))
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def run(args: argparse.Namespace) -> int:
    require_extra("torch", "torch", "emulate", args.op)
    case = build_case(args)
    timeout_s = as_float(args.timeout_s, "timeout-s", positive=True)
    from rich.console import Console

    with Console(stderr=True).status(f"emulate {case.label}: importing torch, starting {case.world_size} ranks"):
        from greentrain.emulate.launcher import LaunchOptions, emulate  # imports torch

        results = emulate([case], LaunchOptions(backend=args.backend, timeout_s=timeout_s,
                                                collectives=args.collectives))
    if not results:  # a rank > 0 under torchrun: rank 0 reports
        return 0
    result = results[0]
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        _render(result)
    return 0 if result.ok else 1
