"""Scenario = Model + Cluster + Strategy + Workload + Site: the one description of a run.

YAML form (human units; every section optional except model and workload sizes, which have defaults):

    model: llama3-8b                 # preset name, YAML/config.json path, or an inline mapping
    cluster: {chip: h100-sxm, num_chips: 64, chips_per_node: 8}
    strategy: {dp: 8, tp: 8, zero: 1, recompute: selective, micro_batch_size: 1}   # optional
    workload: {global_batch_size: 512, seq_len: 8192, train_tokens: 1e12, precision: bf16}
    site: {region: us-west-2}        # or {grid_g_co2e_per_kwh: 380, pue: 1.1, electricity_usd_per_kwh: 0.1}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from greentrain import units
from greentrain.config import as_float, as_int, check_keys, load_mapping
from greentrain.errors import ConfigError
from greentrain.footprint.site import DEFAULT_PUE, Site
from greentrain.hardware.catalog import get_chip, get_link
from greentrain.hardware.chip import Chip
from greentrain.hardware.cluster import Cluster
from greentrain.model.load import load_model
from greentrain.model.spec import TransformerSpec
from greentrain.parallel.strategy import Strategy
from greentrain.workload import Workload

SECTIONS = ("model", "cluster", "strategy", "workload", "site")
CLUSTER_KEYS = ("chip", "num_chips", "chips_per_node", "intra_node_link", "inter_node_link", "host_link",
                "host_memory_gib_per_node")
SITE_KEYS = ("region", "grid_g_co2e_per_kwh", "pue", "electricity_usd_per_kwh")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    model: TransformerSpec
    cluster: Cluster
    workload: Workload
    site: Site
    strategy: Strategy | None = None  # None: let the planner choose

    def with_strategy(self, strategy: Strategy) -> Scenario:
        return dataclasses.replace(self, strategy=strategy)

    def to_dict(self) -> dict[str, Any]:
        c = self.cluster
        out: dict[str, Any] = {
            "model": self.model.to_dict(),
            "cluster": {"chip": c.chip.name, "num_chips": c.num_chips, "chips_per_node": c.chips_per_node,
                        "intra_node_link": c.intra_node.name, "inter_node_link": c.inter_node.name},
            "workload": self.workload.to_dict(),
            "site": {"region": self.site.region, "grid_g_co2e_per_kwh": self.site.grid_g_co2e_per_kwh,
                     "pue": self.site.pue,
                     "electricity_usd_per_kwh": self.site.electricity_usd_per_j * units.KWH_J},
        }
        if self.strategy is not None:
            out["strategy"] = self.strategy.to_dict()
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def build_cluster(chip: Chip, num_chips: int, chips_per_node: int | None = None, intra_node_link: str = "",
                  inter_node_link: str = "", host_link: str = "", host_memory_bytes_per_node: float = 0.0) -> Cluster:
    """A cluster of ``num_chips`` chips, links defaulting to the chip's catalog links."""
    intra = get_link(intra_node_link or chip.intra_node_link or "pcie4")
    inter = get_link(inter_node_link or chip.inter_node_link or "ib-hdr-200")
    host_name = host_link or chip.host_link
    return Cluster(chip=chip, num_chips=num_chips, chips_per_node=chips_per_node or chip.chips_per_node,
                   intra_node=intra, inter_node=inter, host_link=get_link(host_name) if host_name else None,
                   host_memory_bytes_per_node=host_memory_bytes_per_node)


def cluster_from_dict(data: dict[str, Any]) -> Cluster:
    check_keys(data, CLUSTER_KEYS, "cluster")
    chip = get_chip(str(data.get("chip", "h100-sxm")))
    cpn = data.get("chips_per_node")
    return build_cluster(
        chip, as_int(data.get("num_chips", 8), "cluster.num_chips", minimum=1),
        as_int(cpn, "cluster.chips_per_node", minimum=1) if cpn is not None else None,
        str(data.get("intra_node_link", "")), str(data.get("inter_node_link", "")), str(data.get("host_link", "")),
        units.gib_to_bytes(as_float(data.get("host_memory_gib_per_node", 0), "cluster.host_memory_gib_per_node",
                                    minimum=0.0)))


def site_from_dict(data: dict[str, Any]) -> Site:
    check_keys(data, SITE_KEYS, "site")
    pue = as_float(data["pue"], "site.pue", minimum=1.0) if "pue" in data else None
    if "grid_g_co2e_per_kwh" in data:
        g = as_float(data["grid_g_co2e_per_kwh"], "site.grid_g_co2e_per_kwh", minimum=0.0)
        price = as_float(data.get("electricity_usd_per_kwh", 0.0), "site.electricity_usd_per_kwh", minimum=0.0)
        return Site.from_intensity(g, pue or DEFAULT_PUE, str(data.get("region", "")), price)
    if "region" in data:
        from greentrain.footprint.regions import site_for_region

        site = site_for_region(str(data["region"]), pue=pue)
        if "electricity_usd_per_kwh" in data:
            price = as_float(data["electricity_usd_per_kwh"], "site.electricity_usd_per_kwh", minimum=0.0)
            site = dataclasses.replace(site, electricity_usd_per_j=units.usd_per_kwh_to_usd_per_j(price))
        return site
    return Site(pue=pue or DEFAULT_PUE)


def scenario_from_dict(data: dict[str, Any], base_dir: Path | None = None) -> Scenario:
    check_keys(data, SECTIONS, "scenario")
    model_arg = data.get("model", "llama3-8b")
    if isinstance(model_arg, str) and base_dir is not None and (base_dir / model_arg).exists():
        model_arg = str(base_dir / model_arg)
    for section in ("cluster", "strategy", "workload", "site"):
        if section in data and not isinstance(data[section], dict):
            raise ConfigError(section, data[section], "must be a mapping")
    strategy = Strategy.from_dict(data["strategy"]) if data.get("strategy") else None
    return Scenario(model=load_model(model_arg), cluster=cluster_from_dict(data.get("cluster", {})),
                    workload=Workload.from_dict(data.get("workload", {"global_batch_size": 512, "seq_len": 2048})),
                    site=site_from_dict(data.get("site", {})), strategy=strategy)


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    return scenario_from_dict(load_mapping(p), base_dir=p.parent)
