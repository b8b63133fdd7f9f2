"""Chip and Link: the figures of one accelerator and of one kind of interconnect (SI units inside)."""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One direction of one chip's share of a link: NVLink/NVSwitch, PCIe, InfiniBand or Ethernet."""

    name: str
    bytes_per_s: float  # per chip, per direction
    latency_s: float = 5e-6
    kind: str = "network"
    # the fabric's oversubscription above the NICs (bytes the NICs can inject over bytes the core carries;
    # 1: non-blocking, as rail-optimised fat trees are built): traffic between nodes gets bytes_per_s / it
    oversubscription: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        require(self.bytes_per_s > 0, f"link({self.name}).bytes_per_s", self.bytes_per_s, "must be > 0")
        require(self.latency_s >= 0, f"link({self.name}).latency_s", self.latency_s, "must be >= 0")
        require(1.0 <= self.oversubscription <= 64.0, f"link({self.name}).oversubscription", self.oversubscription,
                "must be in [1, 64] (1: non-blocking)")

    def oversubscribed(self, ratio: float = 0.0) -> Link:
        """The bandwidth a chip gets between nodes when every NIC of the job sends at once through a fabric
        oversubscribed ``ratio``:1 (0: the catalog's figure for this network): its NIC share divided by it.
        scenario.build_cluster applies it once to the catalog link (the result keeps the divided bandwidth)."""
        import dataclasses

        r = ratio or self.oversubscription
        require(1.0 <= r <= 64.0, "cluster.oversubscription", r, "must be in [1, 64] (1: non-blocking)")
        if r == 1.0:
            return self
        return dataclasses.replace(self, bytes_per_s=self.bytes_per_s / r, oversubscription=r)


@dataclass(frozen=True, slots=True, kw_only=True)
class Chip:
    """Dense peak FLOP/s per precision (0: not supported), memory, power, embodied carbon and price."""

    name: str
    memory_bytes: float
    memory_bytes_per_s: float
    peak_bf16_flop_per_s: float
    peak_fp32_flop_per_s: float = 0.0
    peak_tf32_flop_per_s: float = 0.0
    peak_fp16_flop_per_s: float = 0.0
    peak_fp8_flop_per_s: float = 0.0
    tdp_w: float = 0.0  # 0: unknown
    idle_w: float = 0.0
    embodied_kg_co2e: float = 0.0  # 0: unknown
    price_usd_per_s: float = 0.0  # public on-demand price per chip (0: unknown)
    intra_node_link: str = ""
    inter_node_link: str = ""
    host_link: str = ""
    chips_per_node: int = 8
    vendor: str = ""
    aliases: tuple[str, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        w = f"chip({self.name})"
        require(self.memory_bytes > 0, f"{w}.memory_bytes", self.memory_bytes, "must be > 0")
        require(self.memory_bytes_per_s > 0, f"{w}.memory_bytes_per_s", self.memory_bytes_per_s,
                "must be > 0")
        require(self.peak_bf16_flop_per_s > 0 or self.peak_fp16_flop_per_s > 0, f"{w}.peak_bf16_flop_per_s",
                self.peak_bf16_flop_per_s, "a chip needs a 16-bit peak")
        for f in ("tdp_w", "idle_w", "embodied_kg_co2e", "price_usd_per_s", "peak_fp32_flop_per_s",
                  "peak_tf32_flop_per_s", "peak_fp16_flop_per_s", "peak_fp8_flop_per_s"):
            require(getattr(self, f) >= 0, f"{w}.{f}", getattr(self, f), "must be >= 0")
        require(self.idle_w <= self.tdp_w or self.tdp_w == 0, f"{w}.idle_w", self.idle_w,
                f"must be <= tdp_w={self.tdp_w}")
        BOUNDS["chips_per_node"].check_int(self.chips_per_node, f"{w}.chips_per_node")  # ranges: config.BOUNDS
        BOUNDS["chip_memory_bytes"].check(self.memory_bytes, f"{w}.memory_bytes")
        BOUNDS["chip_memory_bytes_per_s"].check(self.memory_bytes_per_s, f"{w}.memory_bytes_per_s")
        BOUNDS["chip_power_w"].check(self.tdp_w, f"{w}.tdp_w")
        for f in ("peak_bf16_flop_per_s", "peak_fp32_flop_per_s", "peak_tf32_flop_per_s", "peak_fp16_flop_per_s",
                  "peak_fp8_flop_per_s"):
            BOUNDS["chip_flop_per_s"].check(getattr(self, f), f"{w}.{f}")

    def peak_flop_per_s(self, precision: str) -> float:
        """Dense peak for a precision; fp16 falls back to bf16 and back (same tensor-core rate)."""
        p = precision.lower()
        if p not in PRECISIONS:
            raise ConfigError("precision", precision, f"must be one of {', '.join(PRECISIONS)}")
        value = float(getattr(self, f"peak_{p}_flop_per_s"))
        if value == 0 and p in ("bf16", "fp16"):
            value = self.peak_fp16_flop_per_s if p == "bf16" else self.peak_bf16_flop_per_s
        if value == 0 and p == "tf32":
            value = self.peak_fp32_flop_per_s
        if value == 0:
            raise ConfigError("precision", precision, f"chip {self.name} has no {p} peak in the catalog")
        return value
