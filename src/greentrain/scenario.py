"""Scenario = Model + Cluster + Strategy + Workload + Site: the one description of a run.

YAML form (human units; every section and every key in it is optional):

    model: llama3-8b                 # preset name, YAML/config.json path, or an inline mapping
    cluster: {chip: h100-sxm, num_chips: 64, chips_per_node: 8}
    strategy: {dp: 8, tp: 8, zero: 1, recompute: selective, micro_batch_size: 1}   # optional
    workload: {global_batch_size: 512, seq_len: 8192, train_tokens: 1e12, precision: bf16}
    site: {region: us-west-2}        # or {grid_g_co2e_per_kwh: 380, pue: 1.1, electricity_usd_per_kwh: 0.1}

What is missing takes the built-in default (DEFAULT_SCENARIO, the same one the CLI starts from without a
file): a missing section all of it, a missing key its value. Without a strategy the planner chooses one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from greentrain import units
from greentrain.config import BOUNDS, as_float, as_int, check_keys, load_mapping
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip, get_link
from greentrain.hardware.chip import Chip
from greentrain.hardware.cluster import Cluster
from greentrain.model.load import load_model
from greentrain.model.spec import TransformerSpec
from greentrain.parallel.strategy import Strategy, check_schedule
from greentrain.workload import RUN_LENGTH_FIELDS, Workload

SECTIONS = ("model", "cluster", "strategy", "workload", "site")

# The built-in default scenario: Llama 3 8B pre-training on 64 H100 (8 nodes) for 1 T tokens,
# 4 M-token batches of 8,192-token sequences (the Llama 3 recipe: Dubey et al. 2024 §3.4.1), in AWS us-east-1.
# The CLI without a file, and a file for whatever it leaves out, both take their values from here.
DEFAULT_SCENARIO: dict[str, Any] = {
    "model": "llama3-8b",
    "cluster": {"chip": "h100-sxm", "num_chips": 64, "chips_per_node": 8},
    "workload": {"global_batch_size": 512, "seq_len": 8192, "train_tokens": 1e12, "precision": "bf16"},
    "site": {"region": "us-east-1"},
}
CLUSTER_KEYS = ("chip", "num_chips", "chips_per_node", "intra_node_link", "inter_node_link", "host_link",
                "host_memory_gib_per_node", "oversubscription", "power_limit_w")
SITE_KEYS = ("region", "grid_g_co2e_per_kwh", "pue", "electricity_usd_per_kwh")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    model: TransformerSpec
    cluster: Cluster
    workload: Workload
    site: Site
    strategy: Strategy | None = None  # None: let the planner choose

    def __post_init__(self) -> None:
        check_sequence(self.model, self.workload)
        self.workload.finetune.check(self.model)

    def with_strategy(self, strategy: Strategy) -> Scenario:
        return dataclasses.replace(self, strategy=strategy)

    def to_dict(self) -> dict[str, Any]:
        c = self.cluster
        out: dict[str, Any] = {
            "model": self.model.to_dict(),
            "cluster": {"chip": c.chip.name, "num_chips": c.num_chips, "chips_per_node": c.chips_per_node,
                        "intra_node_link": c.intra_node.name, "inter_node_link": c.inter_node.name,
                        "host_memory_gib_per_node": units.bytes_to_gib(c.host_memory_bytes_per_node)},
            "workload": self.workload.to_dict(),
            "site": {"region": self.site.region, "grid_g_co2e_per_kwh": self.site.grid_g_co2e_per_kwh,
                     "pue": self.site.pue,
                     "electricity_usd_per_kwh": self.site.electricity_usd_per_j * units.KWH_J},
        }
        if c.host_link is not None:
            out["cluster"]["host_link"] = c.host_link.name
        if c.chip.max_power_w > c.chip.tdp_w:  # run below the die's full power (hardware/chip.py power_limited)
            out["cluster"]["power_limit_w"] = c.chip.tdp_w
        if c.inter_node.oversubscription != 1.0:  # the fabric's, applied to inter_node_link by build_cluster
            out["cluster"]["oversubscription"] = c.inter_node.oversubscription
        if self.strategy is not None:
            out["strategy"] = self.strategy.to_dict()
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def build_cluster(chip: Chip, num_chips: int, chips_per_node: int | None = None, intra_node_link: str = "",
                  inter_node_link: str = "", host_link: str = "", host_memory_bytes_per_node: float = 0.0,
                  oversubscription: float = 0.0) -> Cluster:
    """A cluster of ``num_chips`` chips, links defaulting to the chip's catalog links; the network's bandwidth
    between nodes divided by the fabric's oversubscription (0: the network's published figure, links.yaml)."""
    intra = get_link(intra_node_link or chip.intra_node_link or "pcie4")
    inter = get_link(inter_node_link or chip.inter_node_link or "ib-hdr-200").oversubscribed(oversubscription)
    host_name = host_link or chip.host_link
    return Cluster(chip=chip, num_chips=num_chips, chips_per_node=chips_per_node or chip.chips_per_node,
                   intra_node=intra, inter_node=inter, host_link=get_link(host_name) if host_name else None,
                   host_memory_bytes_per_node=host_memory_bytes_per_node)


def check_sequence(model: TransformerSpec, workload: Workload, seq_field: str = "workload.seq_len",
                   target_field: str = "workload.target_seq_len") -> None:
    """The workload's sequences fit the model: a decoder length only for an encoder-decoder model, and no
    sequence longer than a learned position table (a rotary or relative model has no table, no limit)."""
    if workload.target_seq_len and model.arch != "encoder-decoder":
        raise ConfigError(target_field, workload.target_seq_len,
                          f"applies only to an encoder-decoder model; {model.name} is decoder-only "
                          "(its sequence length is seq_len)")
    limit = model.max_seq_len
    if not limit:
        return
    for field, value in ((seq_field, workload.seq_len), (target_field, workload.target_seq_len)):
        if value > limit:
            raise ConfigError(field, value, f"must be <= {limit}: {model.name} has learned positions for "
                              f"{limit} tokens (max_position_embeddings)")


def _named(data: dict[str, Any], key: str, section: str, lookup: Callable[[str], Any], empty: bool = True) -> str:
    """A catalog name of a section (a chip, a link, a region): a string the catalog knows, or an error that
    names ``section.key``; "" when absent, or given as "" where ``empty`` says that means the default."""
    if key not in data:
        return ""
    value = data[key]
    if not isinstance(value, str):
        raise ConfigError(f"{section}.{key}", value, "must be a name (a string)")
    if empty and value == "":
        return value
    try:
        lookup(value)
    except ConfigError as e:
        raise ConfigError(f"{section}.{key}", value, e.rule) from None
    return value


def cluster_from_dict(data: dict[str, Any]) -> Cluster:
    check_keys(data, CLUSTER_KEYS, "cluster")
    for key in ("intra_node_link", "inter_node_link", "host_link"):
        _named(data, key, "cluster", get_link)
    chip = get_chip(_named(data, "chip", "cluster", get_chip, empty=False) or DEFAULT_SCENARIO["cluster"]["chip"])
    if "power_limit_w" in data:
        chip = chip.power_limited(as_float(data["power_limit_w"], "cluster.power_limit_w", positive=True))
    cpn = data.get("chips_per_node")
    if cpn is None and "chip" not in data:  # the default chip's node size (a named chip: its catalog's)
        cpn = DEFAULT_SCENARIO["cluster"]["chips_per_node"]
    return build_cluster(
        chip, as_int(data.get("num_chips", DEFAULT_SCENARIO["cluster"]["num_chips"]), "cluster.num_chips",
                     minimum=1),
        as_int(cpn, "cluster.chips_per_node", minimum=1) if cpn is not None else None,
        str(data.get("intra_node_link", "")), str(data.get("inter_node_link", "")), str(data.get("host_link", "")),
        units.gib_to_bytes(as_float(data.get("host_memory_gib_per_node", 0), "cluster.host_memory_gib_per_node",
                                    minimum=0.0)),
        as_float(data.get("oversubscription", 0), "cluster.oversubscription", minimum=0.0))


def site_from_dict(data: dict[str, Any]) -> Site:
    """A site section through footprint.regions.build_site (the one Site constructor); neither a region nor
    an intensity: the default region, with the PUE and price given here."""
    check_keys(data, SITE_KEYS, "site")
    if "grid_g_co2e_per_kwh" not in data and "region" not in data:
        data = {**data, **DEFAULT_SCENARIO["site"]}
    from greentrain.footprint.regions import build_site, get_region

    def num(key: str) -> float | None:  # ranges and reasons: config.BOUNDS
        return BOUNDS[key].check(data[key], f"site.{key}") if key in data else None

    # beside a grid intensity the region is only a label (build_site): a name, not necessarily a known one
    lookup = get_region if "grid_g_co2e_per_kwh" not in data else str
    site = build_site(region=_named(data, "region", "site", lookup) if "region" in data else None,
                      grid_g_co2e_per_kwh=num("grid_g_co2e_per_kwh"), pue=num("pue"),
                      electricity_usd_per_kwh=num("electricity_usd_per_kwh"))
    assert site is not None  # a region or an intensity is always given here
    return site


def workload_from_dict(data: dict[str, Any]) -> Workload:
    """A workload section; a missing key takes DEFAULT_SCENARIO's value (its token budget only when no run
    length is given at all: train_tokens, num_steps and num_epochs exclude each other)."""
    defaults = dict(DEFAULT_SCENARIO["workload"])
    given = [k for k in RUN_LENGTH_FIELDS if k in data]
    if given:
        defaults.pop("train_tokens")
    if given and not any(as_float(data[k], f"workload.{k}") for k in given):  # train_tokens: 0 ran a 0 s plan
        raise ConfigError(f"workload.{given[0]}", data[given[0]], "must be > 0: a run needs a length (give one of "
                          f"{', '.join(RUN_LENGTH_FIELDS)})")
    return Workload.from_dict({**defaults, **data})


def scenario_from_dict(data: dict[str, Any], base_dir: Path | None = None) -> Scenario:
    """A scenario from its YAML mapping; a missing section or key takes DEFAULT_SCENARIO's value."""
    check_keys(data, SECTIONS, "scenario")
    model_arg = data.get("model", DEFAULT_SCENARIO["model"])
    if not isinstance(model_arg, (str, dict)) or not model_arg:
        raise ConfigError("model", model_arg, "must be a preset name, a model YAML or config.json path, "
                          "or a mapping")
    if isinstance(model_arg, str) and base_dir is not None and (base_dir / model_arg).exists():
        model_arg = str(base_dir / model_arg)
    for section in ("cluster", "strategy", "workload", "site"):
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise ConfigError(section, data[section], "must be a mapping")
    strategy = strategy_from_dict(data["strategy"]) if data.get("strategy") else None
    return Scenario(model=load_model(model_arg), cluster=cluster_from_dict(data.get("cluster") or {}),
                    workload=workload_from_dict(data.get("workload") or {}),
                    site=site_from_dict(data.get("site") or {}), strategy=strategy)


def strategy_from_dict(data: dict[str, Any]) -> Strategy:
    if "schedule" in data:
        check_schedule(str(data["schedule"]).lower(), as_int(data.get("vpp", 1), "strategy.vpp", minimum=1),
                       "strategy.schedule", "strategy.vpp")
    return Strategy.from_dict(data)


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    return scenario_from_dict(load_mapping(p, field="scenario"), base_dir=p.parent)
