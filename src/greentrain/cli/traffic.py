"""`greentrain traffic`: FLOP and network traffic of a whole training run over six parallel axes (seed 001).

Accepts the flags of davidsj/ml_par_sim transformer.py verbatim (underscore spellings; kebab-case works too)
and prints the same report. Extensions: --model (preset, YAML or config.json), --chip with --utilization,
--num_kv_heads (GQA), --json, --plot.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from greentrain.cli.argtypes import finite_float, path_text, positive_float
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.estimate.traffic.config import TrafficConfig
from greentrain.results.view import stamp

DEFAULT_UTILIZATION = 0.5  # the seed README's assumption: 50% of peak (A100 bf16 312e12 -> 156e12)
DEFAULT_PRECISION = "bf16"  # the peak --chip is read at


def _flag(parser: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    """Add --snake_name and its --kebab-name spelling."""
    names = [name] if "_" not in name else [name, name.replace("_", "-")]
    parser.add_argument(*names, **kwargs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _flag(parser, "--batch_size", type=int, default=2048, help="sequences per batch (default 2048)")
    _flag(parser, "--num_experts", type=int, default=None, help="experts, top-1 routing (default 1)")
    _flag(parser, "--seq_len", type=int, default=2048, help="tokens per sequence (default 2048)")
    _flag(parser, "--use_glu", action="store_true", default=None, help="gated FFN (a third matrix)")
    _flag(parser, "--no_multi_query_attn", action="store_true", help="multi-head attention (default: MQA)")
    _flag(parser, "--num_kv_heads", type=int, default=None, help="K/V heads (1: MQA; else GQA/MHA)")
    _flag(parser, "--activation_checkpointing", action="store_true", help="recompute fwd in bwd")
    _flag(parser, "--consecutive_attn_and_ffn", action="store_true", help="default: parallel attn+FFN")
    _flag(parser, "--dataset_size", type=positive_float, required=True, help="training tokens")
    _flag(parser, "--num_layers", type=int, default=None, help="layers (required without --model)")
    _flag(parser, "--d_model", type=int, default=None, help="residual width (required without --model)")
    _flag(parser, "--d_ffn_ratio", type=int, default=None, help="d_ffn = ratio * d_model")
    _flag(parser, "--d_ffn", type=int, default=None, help="FFN width (default 4 * d_model)")
    _flag(parser, "--d_head", type=int, default=None, help="head width (default 64)")
    _flag(parser, "--num_heads", type=int, default=None, help="heads (default d_model / d_head)")
    _flag(parser, "--total_attn_width_ratio", type=positive_float, default=None, help="num_heads*d_head / d_model")
    for axis in ("data", "pipe", "exp", "seq", "tensor_int", "tensor_ext"):
        _flag(parser, f"--p_{axis}", type=int, default=1, help=f"{axis.upper()} parallel degree (default 1)")
    _flag(parser, "--cluster_flop_rate", type=positive_float, default=None, help="FLOP/s of one mesh unit (chip)")
    _flag(parser, "--skip_efficiency_check", action="store_true", help="skip the efficiency constraints")
    _flag(parser, "--fwd_only", action="store_true", help="forward pass only")
    _flag(parser, "--net_precision_bytes", type=int, default=2, help="bytes per transferred element (2)")
    parser.add_argument("--model", default=None, help="model preset name, YAML file or HF config.json")
    parser.add_argument("--chip", default=None, help="catalog chip: cluster_flop_rate = peak x utilization")
    parser.add_argument("--precision", default=DEFAULT_PRECISION, help="peak used with --chip (default bf16)")
    parser.add_argument("--utilization", type=finite_float, default=DEFAULT_UTILIZATION,
                        help=f"fraction of the chip's peak with --chip (default {DEFAULT_UTILIZATION})")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON (units in the keys)")
    parser.add_argument("--plot", type=path_text, default=None, metavar="PATH",
                        help="draw Tx/Rx bytes per chip against chips (p_data swept) to PATH")
    parser.add_argument("--html", type=path_text, default=None, metavar="PATH.html",
                        help="write the numbers and the p_data sweep as one self-contained HTML page")


def _shape_from_model(args: argparse.Namespace) -> dict[str, Any]:
    """The seed's dims from a TransformerSpec (attention and FFN of every layer; MoE: the expert FFN)."""
    if args.model is None:
        return {}
    from greentrain.model.load import load_model

    spec = load_model(args.model)
    if spec.max_seq_len and args.seq_len > spec.max_seq_len:
        raise ConfigError("seq_len", args.seq_len, f"must be <= {spec.max_seq_len}: {spec.name} has learned "
                          f"positions for {spec.max_seq_len} tokens (max_position_embeddings)")
    if spec.top_k > 1 or spec.num_shared_experts or spec.moe_layer_interval > 1:
        print(f"greentrain traffic: note: {spec.name} is modelled with top-1 routing in every layer and no "
              "shared experts (the seed's model)", file=sys.stderr)
    return {"num_layers": spec.num_layers, "d_model": spec.hidden_size, "num_heads": spec.num_heads,
            "d_ffn": spec.expert_ffn_hidden_size if spec.is_moe else spec.ffn_hidden_size,
            "d_head": spec.head_dim, "num_kv_heads": spec.num_kv_heads, "num_experts": spec.num_experts,
            "glu": spec.glu}


def _resolve_widths(args: argparse.Namespace, shape: dict[str, Any], d: int) -> tuple[int, int, int]:
    """(d_ffn, d_head, num_heads) by the seed's rules, flags over the model's values."""
    if args.d_ffn is not None and args.d_ffn_ratio is not None:
        raise ConfigError("d_ffn", args.d_ffn, "cannot be given together with --d_ffn_ratio")
    if args.d_ffn is not None:
        d_ffn = args.d_ffn
    elif args.d_ffn_ratio is not None:
        d_ffn = args.d_ffn_ratio * d
    else:
        d_ffn = shape.get("d_ffn", 4 * d)
    d_head = args.d_head if args.d_head is not None else shape.get("d_head", 64)
    require(d_head >= 1, "d_head", d_head, "must be a positive integer")
    if args.num_heads is not None and args.total_attn_width_ratio is not None:
        raise ConfigError("num_heads", args.num_heads, "cannot be given with --total_attn_width_ratio")
    if args.num_heads is not None:
        return d_ffn, d_head, args.num_heads
    if args.total_attn_width_ratio is not None:
        width = d * args.total_attn_width_ratio
        require(width % d_head == 0, "total_attn_width_ratio", args.total_attn_width_ratio,
                f"d_model*ratio = {width:g} must be divisible by d_head={d_head}")
        return d_ffn, d_head, int(width // d_head)
    if "num_heads" in shape and args.d_model is None and args.d_head is None:
        return d_ffn, d_head, shape["num_heads"]
    require(d % d_head == 0, "d_model", d, f"must be divisible by d_head={d_head} (or give --num_heads)")
    return d_ffn, d_head, d // d_head


def config_from_args(args: argparse.Namespace) -> TrafficConfig:
    shape = _shape_from_model(args)
    num_layers: int | None = args.num_layers if args.num_layers is not None else shape.get("num_layers")
    d: int | None = args.d_model if args.d_model is not None else shape.get("d_model")
    if num_layers is None:
        raise ConfigError("num_layers", None, "is required (or --model)")
    if d is None:
        raise ConfigError("d_model", None, "is required (or --model)")
    require(d >= 1, "d_model", d, "must be a positive integer")
    d_ffn, d_head, num_heads = _resolve_widths(args, shape, d)
    if args.num_kv_heads is not None:
        kv = args.num_kv_heads
    elif args.no_multi_query_attn:
        kv = num_heads
    else:
        kv = shape.get("num_kv_heads", 1) if args.num_heads is None else 1
    return TrafficConfig(
        num_layers=num_layers, d_model=d, d_ffn=d_ffn, num_heads=num_heads, d_head=d_head, num_kv_heads=kv,
        num_experts=args.num_experts if args.num_experts is not None else shape.get("num_experts", 1),
        batch_size=args.batch_size, seq_len=args.seq_len, dataset_tokens=args.dataset_size,
        glu=bool(args.use_glu) if args.use_glu is not None else shape.get("glu", False),
        consecutive_attn_and_ffn=args.consecutive_attn_and_ffn,
        activation_checkpointing=args.activation_checkpointing, fwd_only=args.fwd_only,
        net_precision_bytes=args.net_precision_bytes, dp=args.p_data, pp=args.p_pipe, ep=args.p_exp,
        sp=args.p_seq, tp_int=args.p_tensor_int, tp_ext=args.p_tensor_ext,
        skip_efficiency_check=args.skip_efficiency_check)


def cluster_rate(args: argparse.Namespace) -> float | None:
    """--cluster_flop_rate, or the catalog chip's peak at --precision times --utilization."""
    if args.chip is None:
        if args.utilization != DEFAULT_UTILIZATION:  # the two set a chip's rate: without --chip they would be moot
            raise ConfigError("utilization", args.utilization, "applies with --chip only")
        if args.precision != DEFAULT_PRECISION:
            raise ConfigError("precision", args.precision, "applies with --chip only")
        if args.cluster_flop_rate is None:
            return None
        require(args.cluster_flop_rate > 0, "cluster_flop_rate", args.cluster_flop_rate, "must be > 0")
        return float(args.cluster_flop_rate)
    if args.cluster_flop_rate is not None:
        raise ConfigError("chip", args.chip, "cannot be given together with --cluster_flop_rate")
    require(0 < args.utilization <= 1, "utilization", args.utilization, "must be in (0, 1]")
    from greentrain.hardware.catalog import get_chip

    return get_chip(args.chip).peak_flop_per_s(args.precision) * args.utilization


def run(args: argparse.Namespace) -> int:
    from greentrain.estimate.traffic.report import sweep_data_parallel, traffic_report
    from greentrain.report.seed001 import traffic_text

    cfg = config_from_args(args)
    rate = cluster_rate(args)
    if args.plot is not None:  # before any work: suffix, a writable folder, matplotlib installed
        from greentrain.report.files import check_plot_path

        check_plot_path(args.plot, "--plot")
    if args.html is not None:
        from greentrain.report.html import check_html_path

        check_html_path(args.html)
    report = traffic_report(cfg, rate)
    dps = sorted({2**i for i in range(max(6, cfg.dp.bit_length() + 2) + 1)} | {cfg.dp})
    if args.plot is not None:
        from greentrain.report.seed001 import plot_sweep

        written = plot_sweep(sweep_data_parallel(cfg, dps), args.plot)
        print(f"greentrain traffic: wrote {written}", file=sys.stderr)
    if args.html is not None:
        from dataclasses import asdict

        from greentrain.report.html import write_command_page

        sweep = [asdict(p) for p in sweep_data_parallel(cfg, dps)]
        write_command_page(args.html, [("greentrain traffic", "traffic", {**report.to_json(), "dp_sweep": sweep})])
    if args.json:
        print(json.dumps(stamp("traffic", report.to_json()), indent=2))
    else:
        print(traffic_text(report))
    return 0
