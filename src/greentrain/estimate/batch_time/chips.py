"""Chips of the batch-time model: the seed's own table, or a greentrain catalog chip mapped onto it.

Seed table: davidsj/ml_par_sim simple_transformer.py (seed-systems.md §1.7, §1.8). Its ``net`` is the
chip's total network rate, both directions together (H100: 900e9 = NVLink 4, 450 GB/s each way), because
its send-and-receive time is 2 x bytes / net. A catalog chip therefore gets net = 2 x its intra-node
link's per-direction rate, its fp8 peak as the 8-bit rate (2 x bf16 when it has no fp8 peak; the
tensor-core rate doubles from 16 to 8 bits) and its memory bandwidth as IO.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from greentrain.config import require
from greentrain.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchChip:
    name: str
    flop_per_s_8bit: float
    memory_bytes_per_s: float
    net_bytes_per_s: float  # send + receive together

    def __post_init__(self) -> None:
        for f in ("flop_per_s_8bit", "memory_bytes_per_s", "net_bytes_per_s"):
            require(getattr(self, f) > 0, f"chip({self.name}).{f}", getattr(self, f), "must be > 0")


# README version (commit 47632d9); RTX4090 only appeared in HEAD, where H100_x64_pod's network became 1 GB/s.
# SI literals exactly as the seed wrote them (FLOP/s, bytes/s), so results match it bit for bit.
SEED_CHIPS: dict[str, BatchChip] = {
    "H100": BatchChip(name="H100", flop_per_s_8bit=1979e12, memory_bytes_per_s=3.35e12,
                      net_bytes_per_s=900e9),
    "A100_40GB": BatchChip(name="A100_40GB", flop_per_s_8bit=624e12, memory_bytes_per_s=1555e9,
                           net_bytes_per_s=600e9),
    "H100_x64_pod": BatchChip(name="H100_x64_pod", flop_per_s_8bit=64 * 1979e12,
                              memory_bytes_per_s=64 * 3.35e12,
                              net_bytes_per_s=125e8),
    "RTX4090": BatchChip(name="RTX4090", flop_per_s_8bit=165.16e12, memory_bytes_per_s=1008e9,
                         net_bytes_per_s=10e9),  # the seed: "unclear bandwidth"
}
SEED_CHIPS_V2_NET: dict[str, float] = {"H100_x64_pod": 1e9}


def get_batch_chip(name: str, *, v2: bool = False, net_bytes_per_s: float | None = None) -> BatchChip:
    """A seed chip (name matched without case), else a catalog chip; ``net_bytes_per_s`` overrides the net."""
    seed = {k.lower(): v for k, v in SEED_CHIPS.items()}.get(name.strip().lower())
    if seed is not None:
        chip = seed
        if v2 and chip.name in SEED_CHIPS_V2_NET:
            chip = dataclasses.replace(chip, net_bytes_per_s=SEED_CHIPS_V2_NET[chip.name])
    else:
        chip = _from_catalog(name, need_link=net_bytes_per_s is None)
    if net_bytes_per_s is not None:
        require(net_bytes_per_s > 0, "network_bandwidth", net_bytes_per_s, "must be > 0")
        chip = dataclasses.replace(chip, net_bytes_per_s=net_bytes_per_s)
    return chip


def _from_catalog(name: str, *, need_link: bool) -> BatchChip:
    from greentrain.hardware.catalog import chips, get_chip, get_link

    try:
        c = get_chip(name)
    except ConfigError:
        raise ConfigError("chip", name, "unknown chip; seed chips: " + ", ".join(SEED_CHIPS)
                          + "; catalog: " + ", ".join(chips())) from None
    flop8 = c.peak_fp8_flop_per_s or 2 * c.peak_flop_per_s("bf16")
    net = 1.0
    if need_link:
        if not c.intra_node_link:
            raise ConfigError("chip", name, "has no intra-node link in the catalog; give network_bandwidth")
        net = 2 * get_link(c.intra_node_link).bytes_per_s
    return BatchChip(name=c.name, flop_per_s_8bit=flop8, memory_bytes_per_s=c.memory_bytes_per_s,
                     net_bytes_per_s=net)
