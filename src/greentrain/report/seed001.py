"""Seed 001's outputs (davidsj/ml_par_sim): the traffic report and the batch-time report, line for line as the
seed's scripts print them, their JSON, and the plot of one chip's network traffic against the number of chips.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.estimate.batch_time.model import BatchTimeConfig, BatchTimeResult
from greentrain.estimate.traffic.report import SweepPoint, TrafficReport
from greentrain.report.files import check_plot_path, pyplot, save_figure


# ---- traffic (transformer.py, lib.py) -------------------------------------------------------------------
def _runtime_text(runtime_s: float) -> str:
    """Days, hours, minutes or seconds, one decimal (lib.py Meter.print)."""
    if runtime_s >= units.DAY_S:
        return f"{units.s_to_days(runtime_s):.1f} days"
    if runtime_s >= units.HOUR_S:
        return f"{units.s_to_hours(runtime_s):.1f} hours"
    if runtime_s >= units.MINUTE_S:
        return f"{runtime_s / units.MINUTE_S:.1f} minutes"
    return f"{runtime_s:.1f} seconds"


def traffic_text(r: TrafficReport) -> str:
    """The seed's traffic report, line for line (lib.py Meter.print); the P: line lists the axes in the fixed
    order of ``degrees``."""
    lines = [f"N: {r.num_params:.3e} ({r.num_params_effective:.3e} effective)", f"D: {r.num_tokens:.3e}"]
    if r.allowed_microbatch_sizes is None:
        lines.append(f"b: {r.batch_size}")
    else:
        lines.append(f"b: {r.batch_size} (microbatch size must be in {list(r.allowed_microbatch_sizes)} "
                     "to be efficient)")
    axes = ", ".join(f"{name}: {deg}" for name, deg in r.degrees)
    lines += [f"P: {math.prod(d for _, d in r.degrees)} = {{{axes}}}", "", "", "FULL TRAINING RUN COST"]
    if r.fwd_only:
        lines.append(f'{"Metric":>10}    {"Fwd":>11}')
    else:
        lines.append(f'{"Metric":>10}    {"Fwd":>11}    {"Bwd":>11}    {"Total":>11}')
    rows = (("FLOP", r.flop_fwd, r.flop_bwd, r.flop_total), ("Tx", r.tx_elements_fwd, r.tx_elements_bwd,
            r.tx_elements_total), ("Rx", r.rx_elements_fwd, r.rx_elements_bwd, r.rx_elements_total),
            ("net", r.net_elements_fwd, r.net_elements_bwd, r.net_elements_total))
    for name, *values in rows:
        shown = values[:1] if r.fwd_only else values
        lines.append(f"{name:>10}" + "".join(f"    {v:>11.3e}" for v in shown))
    if r.cluster_flop_per_s is not None:
        assert r.cluster_tx_bytes_per_s is not None and r.cluster_rx_bytes_per_s is not None
        assert r.total_tx_bytes_per_s is not None and r.total_rx_bytes_per_s is not None
        assert r.total_flop_per_s is not None and r.runtime_s is not None
        net_per_flop = r.tx_bytes_per_flop + r.rx_bytes_per_flop
        lines += ["", f"Cluster FLOP/sec:    {r.cluster_flop_per_s:.3e}",
                  f"Cluster bytes/sec:   {net_per_flop * r.cluster_flop_per_s:.3e} "
                  f"({r.cluster_tx_bytes_per_s:.3e} Tx, {r.cluster_rx_bytes_per_s:.3e} Rx)", "",
                  f"Total FLOP/sec:      {r.total_flop_per_s:.3e}",
                  f"Total bytes/sec:     {net_per_flop * r.total_flop_per_s:.3e} "
                  f"({r.total_tx_bytes_per_s:.3e} Tx, {r.total_rx_bytes_per_s:.3e} Rx)", "",
                  f"Runtime:             {_runtime_text(r.runtime_s)}"]
    return "\n".join(lines)


def sweep_figure(points: list[SweepPoint], title: str = "") -> Any:
    """Tx and Rx bytes per chip over the whole run against chips, log-log; each swept point's chip count and
    data-parallel degree are the x tick labels (the counts are not powers of two: 960 = 15 x 8 x 8 x dp)."""
    from matplotlib.ticker import NullLocator

    plt = pyplot()
    chips = [p.num_chips for p in points]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.75 * len(points) + 1.5), 4.4), layout="constrained")
    ax.plot(chips, [p.tx_bytes_per_chip for p in points], marker="o", label="Tx (sent) bytes per chip")
    ax.plot(chips, [p.rx_bytes_per_chip for p in points], marker="s", label="Rx (received) bytes per chip")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(chips, [f"{c:,}\ndp={p.dp}" for c, p in zip(chips, points, strict=True)], fontsize=7.5)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("chips (data-parallel degree swept)")
    ax.set_ylabel("bytes per chip over the whole run")
    ax.set_title(title or "greentrain traffic: network bytes per chip", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_sweep(points: list[SweepPoint], path: str | Path, title: str = "") -> Path:
    """sweep_figure written to ``path``."""
    if not points:
        raise ConfigError("plot", str(path), "no data-parallel degree of the sweep divides the layout")
    out = check_plot_path(path, "--plot")  # suffix, folder exists and is writable, matplotlib installed
    return save_figure(sweep_figure(points, title), out, dpi=100, flag="--plot")  # atomic; OSError: ConfigError


# ---- batch time (simple_transformer.py) -----------------------------------------------------------------
def batch_time_text(cfg: BatchTimeConfig, r: BatchTimeResult) -> str:
    """The batch-time report, line for line as simple_transformer.py prints it (README version, or v2 = HEAD)."""
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


def batch_time_to_dict(cfg: BatchTimeConfig, r: BatchTimeResult) -> dict[str, Any]:
    """Inputs and results with units in the keys."""
    out = {"config": dataclasses.asdict(cfg), **dataclasses.asdict(r)}
    out["run_time_days"] = units.s_to_days(r.run_time_s)
    return out
