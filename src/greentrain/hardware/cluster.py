"""Cluster: how many chips of which kind, grouped into nodes, with which links."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from greentrain import units
from greentrain.config import BOUNDS, require
from greentrain.hardware.chip import Chip, Link

MAX_CHIPS = int(BOUNDS["num_chips"].hi)  # 2^24 = 16.8 M: far above any cluster built


def valid_chip_count(num_chips: int, chips_per_node: int) -> bool:
    """A cluster is one partial node, or whole nodes: 1 <= num_chips <= chips_per_node, or a multiple of it."""
    return 1 <= num_chips <= chips_per_node or num_chips % chips_per_node == 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    chip: Chip
    num_chips: int
    chips_per_node: int
    intra_node: Link  # NVLink/NVSwitch (or PCIe) between the chips of a node
    inter_node: Link  # each chip's share of the node's network
    host_link: Link | None = None  # chip <-> host memory (PCIe), for offloading
    host_memory_bytes_per_node: float = 0.0  # 0: unknown

    def __post_init__(self) -> None:
        BOUNDS["num_chips"].check_int(self.num_chips, "cluster.num_chips")  # ranges and reasons: config.BOUNDS
        BOUNDS["chips_per_node"].check_int(self.chips_per_node, "cluster.chips_per_node")
        BOUNDS["host_memory_gib"].check(units.bytes_to_gib(self.host_memory_bytes_per_node),
                                       "cluster.host_memory_gib_per_node")
        require(valid_chip_count(self.num_chips, self.chips_per_node), "cluster.num_chips", self.num_chips,
                f"must be a multiple of chips_per_node={self.chips_per_node}")

    @property
    def host_memory_limit_bytes(self) -> float:
        """Host memory one node's offloads may take: the cluster's, else its chips' where the product fixes it
        (Chip.host_memory_bytes), else 0 (unknown: not checked)."""
        return self.host_memory_bytes_per_node or self.chip.host_memory_bytes * self.node_size

    def host_memory_fits(self, host_bytes_per_device: Any) -> Any:
        """Whether a node's offloads (``host_bytes_per_device`` on each of its chips; a float or a column) fit its
        host memory: True where it is unknown."""
        limit = self.host_memory_limit_bytes
        return host_bytes_per_device * self.node_size <= limit if limit else True

    @property
    def num_nodes(self) -> int:
        return max(1, self.num_chips // self.chips_per_node)

    @property
    def node_size(self) -> int:
        """Chips that share the intra-node link (fewer than chips_per_node on a partial node)."""
        return min(self.num_chips, self.chips_per_node)
