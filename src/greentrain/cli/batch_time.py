"""`greentrain batch-time`: per-batch time of a pipelined MoE run, the simple model of seed 001.

Accepts the flags of davidsj/ml_par_sim simple_transformer.py verbatim (underscore spellings; kebab-case
works too; --chip for --chip_type as the README wrote it) and prints the same report. --v2 switches to the
script's later (HEAD) revision. Without --chip the H100 of the seed's table is used.
"""

from __future__ import annotations

import argparse
import json

from greentrain.cli.argtypes import finite_float, path_text, positive_float
from greentrain.config import MAX_LINK_BYTES_PER_S, MIN_LINK_BYTES_PER_S, require
from greentrain.errors import ConfigError
from greentrain.results.view import stamp


def _flag(parser: argparse.ArgumentParser, *names: str, **kwargs: object) -> None:
    """Add each --snake_name and its --kebab-name spelling."""
    spelled = list(names) + [n.replace("_", "-") for n in names if "_" in n]
    parser.add_argument(*spelled, **kwargs)  # type: ignore[arg-type]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "--precision_bits", dest="prec", type=int, default=8, help="precision in bits (default 8)")
    _flag(parser, "--n_layers", dest="L", type=int, required=True, help="number of layers")
    _flag(parser, "--d_model", dest="d", type=int, required=True, help="residual width")
    _flag(parser, "--d_internal_ratio", type=int, default=5,
          help="internal width / d_model; d_ffn + combined attention width (default 5)")
    _flag(parser, "--n_experts", dest="e", type=int, default=1, help="experts = expert-parallel degree")
    _flag(parser, "--n_routed_experts", dest="k", type=int, default=1, help="experts per token")
    _flag(parser, "--dataset_size", dest="D", type=positive_float, default=None, help="tokens (default 20 x params)")
    _flag(parser, "--batch_size", dest="b", type=int, default=2048, help="sequences per batch")
    _flag(parser, "--microbatch_size", dest="m", type=int, default=1, help="sequences per micro-batch")
    _flag(parser, "--seq_len", dest="l", type=int, default=2048, help="tokens per sequence")
    _flag(parser, "--chip_type", "--chip", dest="chip_type", default="H100",
          help="H100, A100_40GB, H100_x64_pod, RTX4090 (the seed's) or a catalog chip (default H100)")
    _flag(parser, "--pp", type=int, default=1, help="pipeline stages")
    _flag(parser, "--pipeline_interleaving", type=int, default=1, help="passes of a sequence through a stage")
    _flag(parser, "--dp", type=int, default=1, help="data-parallel degree")
    _flag(parser, "--tp", type=int, default=1, help="internal (d_int) tensor-parallel degree")
    _flag(parser, "--tp2", type=int, default=1, help="external (d_model) tensor-parallel degree")
    parser.add_argument("--v2", action="store_true",
                        help="the script's HEAD revision (network time, base utilization)")
    _flag(parser, "--base_utilization", type=finite_float, default=None, help="v2: single-matmul utilization (0.6)")
    _flag(parser, "--network_bandwidth", type=positive_float, default=None, help="v2: network bytes/s (tx+rx)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON (units in the keys)")
    parser.add_argument("--html", type=path_text, default=None, metavar="PATH.html",
                        help="write the numbers and the time per batch by part as one self-contained HTML page")


def run(args: argparse.Namespace) -> int:
    from greentrain.estimate import batch_time as bt
    from greentrain.report.seed001 import batch_time_text, batch_time_to_dict

    if not args.v2:
        for flag, value in (("base_utilization", args.base_utilization),
                            ("network_bandwidth", args.network_bandwidth)):
            if value is not None:
                raise ConfigError(flag, value, "exists only in the v2 model; add --v2")
    if args.network_bandwidth is not None:
        require(MIN_LINK_BYTES_PER_S <= args.network_bandwidth <= MAX_LINK_BYTES_PER_S, "network_bandwidth",
                args.network_bandwidth, f"must be in [{MIN_LINK_BYTES_PER_S:.0e}, {MAX_LINK_BYTES_PER_S:.0e}] bytes/s")
    cfg = bt.BatchTimeConfig(
        num_layers=args.L, d_model=args.d, d_internal_ratio=args.d_internal_ratio, num_experts=args.e,
        num_routed_experts=args.k, dataset_tokens=args.D, batch_size=args.b, microbatch_size=args.m,
        seq_len=args.l, pp=args.pp, pipeline_interleaving=args.pipeline_interleaving, dp=args.dp, tp=args.tp,
        tp2=args.tp2, precision_bits=args.prec, v2=args.v2,
        base_utilization=0.6 if args.base_utilization is None else args.base_utilization)
    if args.html is not None:
        from greentrain.report.html import check_html_path

        check_html_path(args.html)
    chip = bt.get_batch_chip(args.chip_type, v2=args.v2, net_bytes_per_s=args.network_bandwidth)
    result = bt.batch_time(cfg, chip)
    if args.html is not None:
        from greentrain.report.html import write_command_page

        write_command_page(args.html, [("greentrain batch-time", "batch_time", batch_time_to_dict(cfg, result))])
    print(json.dumps(stamp("batch_time", batch_time_to_dict(cfg, result)), indent=2) if args.json
          else batch_time_text(cfg, result))
    return 0
