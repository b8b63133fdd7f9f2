"""The result kinds of the analyses beside a training run: seed 001's traffic and batch time, and the offload
heatmap (see results/view.py for the rules; registered by results/codec.py)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from greentrain.results.view import ResultView, typed

_view = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)


@_view
class TrafficResult(ResultView):
    """``greentrain traffic --json`` (seed 001): FLOPs and network traffic of a run over six parallel axes;
    ``dp_sweep`` (a data-parallel sweep) only in a ``traffic --html`` page."""

    KIND: ClassVar[str] = "traffic"
    num_params: int = typed("int")
    num_chips: int = typed("int")
    degrees: dict[str, Any] = typed("map")
    flop_fwd: float = typed("number")
    flop_bwd: float = typed("number")
    flop_total: float = typed("number")
    tx_elements_fwd: float = typed("number")
    tx_elements_bwd: float = typed("number")
    rx_elements_fwd: float = typed("number")
    rx_elements_bwd: float = typed("number")
    tx_bytes_per_chip: float = typed("number")
    rx_bytes_per_chip: float = typed("number")
    runtime_s: float | None = typed("opt_number", required=False)
    dp_sweep: tuple[dict[str, Any], ...] | None = typed("maps", required=False)


@_view
class BatchTimeResult(ResultView):
    """``greentrain batch-time --json`` (seed 001): time per batch of a pipelined MoE run."""

    KIND: ClassVar[str] = "batch_time"
    config: dict[str, Any] = typed("map")
    chip: dict[str, Any] = typed("map")
    num_chips: int = typed("int")
    num_params: int = typed("int")
    num_active_params: int = typed("int")
    num_batches: int = typed("int")
    matmul_time_s: float = typed("number")
    bubble_time_s: float = typed("number")
    full_flop_time_s: float = typed("number")
    full_net_time_s: float = typed("number")
    grad_reduction_time_s: float = typed("number")
    batch_time_s: float = typed("number")
    utilization: float = typed("number")
    run_time_s: float = typed("number")


@_view
class OffloadHeatmapResult(ResultView):
    """``greentrain offload heatmap --json``: one metric over model x chip x sequence x device and host memory."""

    KIND: ClassVar[str] = "offload_heatmap"
    metric: str = typed("str")
    framework: str = typed("str")
    cells: tuple[dict[str, Any], ...] = typed("maps")
