"""The batch-time report, line for line as simple_transformer.py prints it (README version, or v2 = HEAD)."""

from __future__ import annotations

import dataclasses
from typing import Any

from greentrain import units
from greentrain.estimate.batch_time.model import BatchTimeConfig, BatchTimeResult


def render_text(cfg: BatchTimeConfig, r: BatchTimeResult) -> str:
    chip = r.chip
    lines = [f"Model Shape: {cfg.num_layers} x ({cfg.d_model} x {cfg.d_internal}) "
             f"(top {cfg.num_routed_experts} of {cfg.num_experts} routing)"]
    if cfg.v2:
        net_gb = round(chip.net_bytes_per_s / (units.GB / 10)) / 10
        lines += [f"Parameters: {r.num_params:.2e} ({r.num_active_params:.2e} per token), "
                  f"Training Tokens: {r.num_tokens:.2e}",
                  f"{r.num_chips} {chip.name}s: ({chip.flop_per_s_8bit / units.TFLOP:.1f} 8-bit TFLOP/s; "
                  f"{chip.memory_bytes_per_s / units.TB:.2f} TB/s IO; {net_gb} GB/s network), "
                  f"Base Utilization: {cfg.base_utilization:.2f}"]
    else:
        lines += [f"Parameters: {r.num_params:.2e}, Training Tokens: {r.num_tokens:.2e}",
                  f"{r.num_chips} {chip.name}s"]
    full = f"Pipeline full time:   {r.full_time_s:9.4f} secs"
    if cfg.v2:
        full += f" (FLOP: {r.full_flop_time_s:9.4f} secs, net: {r.full_net_time_s:9.4f} secs)"
    lines += [
        f"Pipeline steps: {cfg.pp} stages x {cfg.pipeline_interleaving} interleaving; "
        f"boundary interval: {r.boundary_interval}; bubble layers: {r.bubble_layers}",
        f"FLOP per batch: {r.flop_per_batch:.2e}",
        f"Matmuls per chip per layer: 2 matrices x {r.experts_per_chip} experts = "
        f"{r.matmuls_per_chip_per_layer}",
        f"Matmul shape: {r.matmul_d_internal} d_int x {r.matmul_d_model} d_model x {r.matmul_tokens} tokens",
        "", "BATCH TIME",
        f"Pipeline bubble time: {r.bubble_time_s:9.4f} secs", full,
        f"Gradient reduction:   {r.grad_reduction_time_s:9.4f} secs",
        f"Total batch time:     {r.batch_time_s:9.4f} secs",
        "", f"Utilization:          {r.utilization:9.4f}", "",
    ]
    days = units.s_to_days(r.run_time_s)
    if cfg.v2:
        lines += ["TOTAL", f" Run time: {days:6.1f} days", f" FLOP:             {r.total_flop:.2e}",
                  f" FLOP per expert:  {r.total_flop / cfg.num_experts:.2e}"]
    else:
        lines += ["TOTAL RUN TIME", f"{days:6.1f} days"]
    return "\n".join(lines)


def to_json(cfg: BatchTimeConfig, r: BatchTimeResult) -> dict[str, Any]:
    """Inputs and results with units in the keys."""
    out = {"config": dataclasses.asdict(cfg), **dataclasses.asdict(r)}
    out["run_time_days"] = units.s_to_days(r.run_time_s)
    return out
