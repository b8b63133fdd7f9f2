"""How a run is split: parallel degrees, ZeRO, recomputation, micro-batching, offloading."""

from greentrain.parallel.strategy import Strategy

__all__ = ["Strategy"]
