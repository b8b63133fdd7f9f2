"""How a run is split: parallel degrees, ZeRO, recomputation, micro-batching, offloading."""

from greentrain.parallel.fields import FIELDS, MeshAxis
from greentrain.parallel.strategy import Strategy

__all__ = ["FIELDS", "MeshAxis", "Strategy"]
