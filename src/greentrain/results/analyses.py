"""The result kinds of the analyses beside a training run: seed 001's traffic and batch time, and the offload
heatmap (see results/view.py for the rules; registered by results/codec.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from greentrain.results.view import ResultView, view


@view
class TrafficResult(ResultView):
    """``greentrain traffic --json`` (seed 001): FLOPs and network traffic of a run over six parallel axes;
    ``dp_sweep`` (a data-parallel sweep) only in a ``traffic --html`` page."""

    KIND: ClassVar[str] = "traffic"
    num_params: int
    num_chips: int
    degrees: dict[str, Any]
    flop_fwd: float
    flop_bwd: float
    flop_total: float
    tx_elements_fwd: float
    tx_elements_bwd: float
    rx_elements_fwd: float
    rx_elements_bwd: float
    tx_bytes_per_chip: float
    rx_bytes_per_chip: float
    runtime_s: float | None = None
    dp_sweep: tuple[dict[str, Any], ...] | None = None


@view
class BatchTimeResult(ResultView):
    """``greentrain batch-time --json`` (seed 001): time per batch of a pipelined MoE run."""

    KIND: ClassVar[str] = "batch_time"
    config: dict[str, Any]
    chip: dict[str, Any]
    num_chips: int
    num_params: int
    num_active_params: int
    num_batches: int
    matmul_time_s: float
    bubble_time_s: float
    full_flop_time_s: float
    full_net_time_s: float
    grad_reduction_time_s: float
    batch_time_s: float
    utilization: float
    run_time_s: float


@view
class OffloadHeatmapResult(ResultView):
    """``greentrain offload heatmap --json``: one metric over model x chip x sequence x device and host memory."""

    KIND: ClassVar[str] = "offload_heatmap"
    metric: str
    framework: str
    cells: tuple[dict[str, Any], ...]
