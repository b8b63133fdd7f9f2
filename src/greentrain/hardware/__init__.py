"""What a run executes on: chips, links, nodes and clusters, and the catalog they come from."""

from greentrain.hardware.chip import Chip, Link
from greentrain.hardware.cluster import Cluster

__all__ = ["Chip", "Cluster", "Link"]
