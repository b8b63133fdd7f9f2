"""Chip and Link: the figures of one accelerator and of one kind of interconnect (SI units inside)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")

# A board run below its die's full power limit lowers its clock until the power fits: dynamic power
# P - P_idle ~ f^n near the top of the voltage/frequency curve (P = C V^2 f, with V rising with f: n = 3 where V
# ~ f, more where V climbs faster near the top). n from the one published pair of one die at two board limits,
# the ml-engineering MAMF table (stas00/ml-engineering compute/accelerator/README.md @744d01e): A100 SXM (400 W)
# 271.2 TFLOP/s, A100 PCIe 252.9 (GA100, same 1,410 MHz boost): 252.9 / 271.2 = ((300 - 40) / (400 - 40))^(1/n),
# n = 4.66, taking the 80 GB PCIe's 300 W and the catalog's 40 W idle (the table does not say which PCIe part: the
# 40 GB's 250 W gives n = 7.8, a milder slowdown). MLE notes a >= 5 % MAMF spread between GPUs of one node.
POWER_CLOCK_EXPONENT = 4.7


def power_limited_clock_ratio(limit_w: float, full_w: float, idle_w: float) -> float:
    """The sustained clock of compute-bound kernels on a board limited to ``limit_w`` over the same die's at
    ``full_w`` (POWER_CLOCK_EXPONENT); 1 when the limit is not below full power or either is unknown (0)."""
    if limit_w <= 0 or full_w <= 0 or limit_w >= full_w or limit_w <= idle_w:
        return 1.0
    return float(((limit_w - idle_w) / (full_w - idle_w)) ** (1.0 / POWER_CLOCK_EXPONENT))


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One direction of one chip's share of a link: NVLink/NVSwitch, PCIe, InfiniBand or Ethernet."""

    name: str
    bytes_per_s: float  # per chip, per direction
    latency_s: float = 5e-6
    kind: str = "network"
    # a network link's time per step of a ring that spans nodes, on every step, beside the NVLink hop: the proxy's
    # per-message work (NCCL tuning.cc: "inter-node rings still have to launch nsteps * net overhead", 1 us x 3
    # for the Simple protocol by default); the steps whose hop crosses nodes pay latency_s instead
    ring_step_overhead_s: float = 3e-6
    # the fabric's oversubscription above the NICs (bytes the NICs can inject over bytes the core carries;
    # 1: non-blocking, as rail-optimised fat trees are built): traffic between nodes gets bytes_per_s / it
    oversubscription: float = 1.0
    source: str = ""

    def __post_init__(self) -> None:
        require(self.bytes_per_s > 0, f"link({self.name}).bytes_per_s", self.bytes_per_s, "must be > 0")
        require(self.latency_s >= 0, f"link({self.name}).latency_s", self.latency_s, "must be >= 0")
        require(self.ring_step_overhead_s >= 0, f"link({self.name}).ring_step_overhead_s", self.ring_step_overhead_s,
                "must be >= 0")
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
    tdp_w: float = 0.0  # 0: unknown; the board's power limit as run (a lower configured limit included)
    idle_w: float = 0.0
    # the die's full power limit, where its kernel figures (estimate/efficiency.yaml) were measured, when tdp_w is
    # a lower one (H100 SXM run at 500 W: 700); 0: tdp_w. Compute-bound kernels run compute_clock_ratio slower.
    max_power_w: float = 0.0
    embodied_kg_co2e: float = 0.0  # 0: unknown
    price_usd_per_s: float = 0.0  # public on-demand price per chip (0: unknown)
    intra_node_link: str = ""
    inter_node_link: str = ""
    host_link: str = ""
    # host memory per chip where the product fixes it (a Grace superchip's LPDDR5X shared by its GPUs); 0: the
    # system's choice, unknown unless the cluster gives host_memory_gib_per_node
    host_memory_bytes: float = 0.0
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
        for f in ("tdp_w", "idle_w", "max_power_w", "embodied_kg_co2e", "price_usd_per_s", "host_memory_bytes",
                  "peak_fp32_flop_per_s", "peak_tf32_flop_per_s", "peak_fp16_flop_per_s", "peak_fp8_flop_per_s"):
            require(getattr(self, f) >= 0, f"{w}.{f}", getattr(self, f), "must be >= 0")
        require(self.idle_w <= self.tdp_w or self.tdp_w == 0, f"{w}.idle_w", self.idle_w,
                f"must be <= tdp_w={self.tdp_w}")
        BOUNDS["chips_per_node"].check_int(self.chips_per_node, f"{w}.chips_per_node")  # ranges: config.BOUNDS
        BOUNDS["chip_memory_bytes"].check(self.memory_bytes, f"{w}.memory_bytes")
        BOUNDS["chip_memory_bytes_per_s"].check(self.memory_bytes_per_s, f"{w}.memory_bytes_per_s")
        BOUNDS["chip_power_w"].check(self.tdp_w, f"{w}.tdp_w")
        BOUNDS["chip_power_w"].check(self.max_power_w, f"{w}.max_power_w")
        require(self.max_power_w == 0 or self.max_power_w >= self.tdp_w, f"{w}.max_power_w", self.max_power_w,
                f"must be >= tdp_w={self.tdp_w} (the die's full limit; 0: tdp_w)")
        for f in ("peak_bf16_flop_per_s", "peak_fp32_flop_per_s", "peak_tf32_flop_per_s", "peak_fp16_flop_per_s",
                  "peak_fp8_flop_per_s"):
            if getattr(self, f) != 0:  # 0: no such peak
                BOUNDS["chip_flop_per_s"].check(getattr(self, f), f"{w}.{f}")

    @property
    def compute_clock_ratio(self) -> float:
        """What a power limit below the die's full one leaves of compute-bound throughput (1: none)."""
        return power_limited_clock_ratio(self.tdp_w, self.max_power_w or self.tdp_w, self.idle_w)

    def power_limited(self, limit_w: float, field: str = "cluster.power_limit_w") -> Chip:
        """This chip run at a board power limit of ``limit_w`` (nvidia-smi --power-limit): the same die, drawing at
        most ``limit_w`` and computing at the clock it leaves (compute_clock_ratio)."""
        import dataclasses

        full = self.max_power_w or self.tdp_w
        require(full > 0, field, limit_w, f"needs the chip's power limit: {self.name} has no tdp_w in the catalog")
        require(math.isfinite(limit_w) and self.idle_w < limit_w <= full, field, limit_w,
                f"must be above {self.name}'s idle {self.idle_w:g} W and at most its full limit {full:g} W")
        return dataclasses.replace(self, tdp_w=float(limit_w), max_power_w=full)

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
