"""The seed-001 traffic report: derived rates (seed-systems.md §1.6, lib.py ``Meter.print``); its text is
greentrain.report.seed001's.

Counts are elements summed over the cluster; bytes = elements × net_precision_bytes. A "cluster" in the
seed is one unit of the mesh (one chip in its README), of rate ``cluster_flop_per_s``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from greentrain.errors import ConfigError
from greentrain.estimate.traffic.config import TrafficConfig, allowed_microbatch_sizes
from greentrain.estimate.traffic.transformer import TrafficCounts, count_traffic


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficReport:
    """A whole run's FLOP and traffic (after activation checkpointing) and, given a rate, its runtime."""

    num_params: int
    num_params_effective: float  # per expert: num_params / num_experts
    num_tokens: int
    num_batches: int
    batch_size: int
    allowed_microbatch_sizes: tuple[int, ...] | None  # None: efficiency check skipped
    degrees: tuple[tuple[str, int], ...]  # (axis, degree): DATA PIPE EXP SEQ TENSOR_INT TENSOR_EXT
    num_chips: int
    fwd_only: bool
    activation_checkpointing: bool
    net_precision_bytes: int
    flop_fwd: float
    flop_bwd: float
    flop_total: float  # fwd only with fwd_only
    tx_elements_fwd: float
    tx_elements_bwd: float
    tx_elements_total: float
    rx_elements_fwd: float
    rx_elements_bwd: float
    rx_elements_total: float
    net_elements_fwd: float
    net_elements_bwd: float
    net_elements_total: float
    tx_bytes_per_flop: float
    rx_bytes_per_flop: float
    tx_bytes_per_chip: float  # whole run, one chip's share
    rx_bytes_per_chip: float
    cluster_flop_per_s: float | None = None
    cluster_tx_bytes_per_s: float | None = None
    cluster_rx_bytes_per_s: float | None = None
    total_flop_per_s: float | None = None
    total_tx_bytes_per_s: float | None = None
    total_rx_bytes_per_s: float | None = None
    runtime_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["degrees"] = dict(self.degrees)
        out["allowed_microbatch_sizes"] = (None if self.allowed_microbatch_sizes is None
                                           else list(self.allowed_microbatch_sizes))
        return out


def traffic_report(cfg: TrafficConfig, cluster_flop_per_s: float | None = None,
                   counts: TrafficCounts | None = None) -> TrafficReport:
    """Check the efficiency rules (unless skipped), count by the algebra, and derive the rates."""
    allowed = None if cfg.skip_efficiency_check else allowed_microbatch_sizes(cfg)
    c = count_traffic(cfg) if counts is None else counts
    fwd = {"flop": c.flop_fwd, "tx": c.tx_elements_fwd, "rx": c.rx_elements_fwd}
    bwd = {"flop": c.flop_bwd, "tx": c.tx_elements_bwd, "rx": c.rx_elements_bwd}
    fwd["net"], bwd["net"] = fwd["tx"] + fwd["rx"], bwd["tx"] + bwd["rx"]
    if cfg.activation_checkpointing:  # the forward pass runs again during the backward pass
        bwd = {k: bwd[k] + fwd[k] for k in bwd}
    total = dict(fwd) if cfg.fwd_only else {k: fwd[k] + bwd[k] for k in fwd}
    prec = cfg.net_precision_bytes
    tx_per_flop = prec * total["tx"] / total["flop"]
    rx_per_flop = prec * total["rx"] / total["flop"]
    p = cfg.num_chips
    rates: dict[str, float] = {}
    if cluster_flop_per_s is not None:
        flop_per_s = p * cluster_flop_per_s
        rates = {"cluster_flop_per_s": cluster_flop_per_s,
                 "cluster_tx_bytes_per_s": tx_per_flop * cluster_flop_per_s,
                 "cluster_rx_bytes_per_s": rx_per_flop * cluster_flop_per_s,
                 "total_flop_per_s": flop_per_s, "total_tx_bytes_per_s": tx_per_flop * flop_per_s,
                 "total_rx_bytes_per_s": rx_per_flop * flop_per_s, "runtime_s": total["flop"] / flop_per_s}
    return TrafficReport(
        num_params=cfg.num_params, num_params_effective=cfg.num_params / cfg.num_experts,
        num_tokens=cfg.num_tokens, num_batches=cfg.num_batches, batch_size=cfg.batch_size,
        allowed_microbatch_sizes=allowed, degrees=tuple(cfg.degrees.items()), num_chips=p,
        fwd_only=cfg.fwd_only, activation_checkpointing=cfg.activation_checkpointing,
        net_precision_bytes=prec,
        flop_fwd=fwd["flop"], flop_bwd=bwd["flop"], flop_total=total["flop"],
        tx_elements_fwd=fwd["tx"], tx_elements_bwd=bwd["tx"], tx_elements_total=total["tx"],
        rx_elements_fwd=fwd["rx"], rx_elements_bwd=bwd["rx"], rx_elements_total=total["rx"],
        net_elements_fwd=fwd["net"], net_elements_bwd=bwd["net"], net_elements_total=total["net"],
        tx_bytes_per_flop=tx_per_flop, rx_bytes_per_flop=rx_per_flop,
        tx_bytes_per_chip=prec * total["tx"] / p, rx_bytes_per_chip=prec * total["rx"] / p, **rates,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepPoint:
    """One point of a data-parallel sweep: chips, and one chip's bytes sent and received over the run."""

    dp: int
    num_chips: int
    tx_bytes_per_chip: float
    rx_bytes_per_chip: float


def sweep_data_parallel(cfg: TrafficConfig, dps: list[int]) -> list[SweepPoint]:
    """The run at each data-parallel degree in ``dps`` whose layout divides (efficiency rules skipped)."""
    points = []
    for dp in dps:
        if cfg.batch_size % dp:
            continue
        try:
            r = traffic_report(dataclasses.replace(cfg, dp=dp, skip_efficiency_check=True))
        except ConfigError:  # a weight shard that does not divide at this degree: no point
            continue
        points.append(SweepPoint(dp=dp, num_chips=r.num_chips, tx_bytes_per_chip=r.tx_bytes_per_chip,
                                 rx_bytes_per_chip=r.rx_bytes_per_chip))
    return points
