"""Efficiency constants of the estimator, loaded from efficiency.yaml (data, each with its source)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

from greentrain import units
from greentrain.config import check_keys, require


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    matmul_max: float
    matmul_half_dim: float
    memory: float
    intra_node_link: float
    inter_node_link: float
    reserved_bytes: float
    cpu_adam_params_per_s_per_node: float

    def __post_init__(self) -> None:
        for f in ("matmul_max", "memory", "intra_node_link", "inter_node_link"):
            v = getattr(self, f)
            require(0 < v <= 1, f"efficiency.{f}", v, "must be in (0, 1]")
        require(self.matmul_half_dim >= 0, "efficiency.matmul_half_dim", self.matmul_half_dim, "must be >= 0")

    def matmul(self, m: float, k: float, n: float) -> float:
        """Fraction of peak a (m x k) @ (k x n) reaches: saturating in each dimension."""
        h = self.matmul_half_dim
        return self.matmul_max * (m / (m + h)) * (k / (k + h)) * (n / (n + h))


@cache
def default_efficiency(name: str = "default") -> Efficiency:
    raw = yaml.safe_load(resources.files("greentrain.estimate").joinpath("efficiency.yaml").read_text("utf-8"))
    data = dict(raw[name])
    fields = [f.name for f in dataclasses.fields(Efficiency) if f.name != "reserved_bytes"] + ["reserved_gib"]
    check_keys(data, fields, f"efficiency({name})")
    reserved = units.gib_to_bytes(float(data.pop("reserved_gib")))
    return Efficiency(reserved_bytes=reserved, **{k: float(v) for k, v in data.items()})
