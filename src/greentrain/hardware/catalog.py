"""The chip and link catalog: catalog/chips.yaml and catalog/links.yaml, human units converted here.

Every figure carries its source in the YAML. Names are case-insensitive; aliases are accepted.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from greentrain import units
from greentrain.config import as_float, as_int, as_name, check_keys, load_mapping
from greentrain.errors import ConfigError, did_you_mean
from greentrain.hardware.chip import Chip, Link

CHIP_KEYS = (
    "memory_gib", "memory_gb", "memory_bandwidth_gb_per_s", "fp32_tflop_per_s", "tf32_tflop_per_s",
    "bf16_tflop_per_s", "fp16_tflop_per_s", "fp8_tflop_per_s", "tdp_w", "idle_w", "max_power_w", "embodied_kg_co2e",
    "price_usd_per_hour", "intra_node_link", "inter_node_link", "host_link", "host_memory_gib", "chips_per_node",
    "vendor",
    "aliases", "source", "sources",
)
LINK_KEYS = ("bandwidth_gb_per_s", "bandwidth_gbit_per_s", "latency_us", "ring_step_overhead_us", "kind",
             "oversubscription", "source", "sources")


def _source(data: dict[str, Any]) -> str:
    src = data.get("sources", data.get("source", ""))
    if isinstance(src, list):
        return "; ".join(str(s) for s in src)
    return str(src)


def chip_from_dict(name: str, data: dict[str, Any]) -> Chip:
    """A chip from catalog units (GiB or GB, GB/s, TFLOP/s, W, kg CO2e, USD per hour)."""
    w = f"chip({name})"
    check_keys(data, CHIP_KEYS, w)

    def num(key: str, default: float = 0.0) -> float:
        return as_float(data[key], f"{w}.{key}", minimum=0.0) if key in data else default

    if "memory_gib" in data:
        memory = units.gib_to_bytes(num("memory_gib"))
    elif "memory_gb" in data:
        memory = units.gb_to_bytes(num("memory_gb"))
    else:
        raise ConfigError(f"{w}.memory_gib", None, "is required (or memory_gb)")
    tf = units.tflop_per_s_to_flop_per_s
    return Chip(
        name=name,
        memory_bytes=memory,
        memory_bytes_per_s=units.gb_per_s_to_bytes_per_s(num("memory_bandwidth_gb_per_s")),
        peak_fp32_flop_per_s=tf(num("fp32_tflop_per_s")),
        peak_tf32_flop_per_s=tf(num("tf32_tflop_per_s")),
        peak_bf16_flop_per_s=tf(num("bf16_tflop_per_s")),
        peak_fp16_flop_per_s=tf(num("fp16_tflop_per_s")),
        peak_fp8_flop_per_s=tf(num("fp8_tflop_per_s")),
        tdp_w=num("tdp_w"),
        idle_w=num("idle_w"),
        max_power_w=num("max_power_w"),
        embodied_kg_co2e=num("embodied_kg_co2e"),
        price_usd_per_s=num("price_usd_per_hour") / units.HOUR_S,
        intra_node_link=str(data.get("intra_node_link", "")),
        inter_node_link=str(data.get("inter_node_link", "")),
        host_link=str(data.get("host_link", "")),
        host_memory_bytes=units.gib_to_bytes(num("host_memory_gib")),
        chips_per_node=as_int(data.get("chips_per_node", 8), f"{w}.chips_per_node", minimum=1),
        vendor=str(data.get("vendor", "")),
        aliases=tuple(str(a).lower() for a in data.get("aliases", []) or []),
        source=_source(data),
    )


def link_from_dict(name: str, data: dict[str, Any]) -> Link:
    w = f"link({name})"
    check_keys(data, LINK_KEYS, w)
    if "bandwidth_gb_per_s" in data:
        bw = units.gb_per_s_to_bytes_per_s(as_float(data["bandwidth_gb_per_s"], f"{w}.bandwidth_gb_per_s",
                                                     positive=True))
    elif "bandwidth_gbit_per_s" in data:
        bw = units.gbit_per_s_to_bytes_per_s(as_float(data["bandwidth_gbit_per_s"],
                                                      f"{w}.bandwidth_gbit_per_s", positive=True))
    else:
        raise ConfigError(f"{w}.bandwidth_gb_per_s", None, "is required (or bandwidth_gbit_per_s)")
    latency = units.us_to_s(as_float(data.get("latency_us", 5.0), f"{w}.latency_us", minimum=0.0))
    overhead = units.us_to_s(as_float(data.get("ring_step_overhead_us", 3.0), f"{w}.ring_step_overhead_us",
                                      minimum=0.0))
    over = as_float(data.get("oversubscription", 1.0), f"{w}.oversubscription", minimum=1.0)
    return Link(name=name, bytes_per_s=bw, latency_s=latency, ring_step_overhead_s=overhead,
                kind=str(data.get("kind", "network")), oversubscription=over, source=_source(data))


def _catalog_file(name: str) -> dict[str, Any]:
    text = resources.files("greentrain.hardware").joinpath("catalog", name).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict), name
    return data


@cache
def chips() -> dict[str, Chip]:
    """Every chip of the catalog by canonical (lower-case) name."""
    return {str(k).lower(): chip_from_dict(str(k).lower(), v) for k, v in _catalog_file("chips.yaml").items()}


@cache
def links() -> dict[str, Link]:
    return {str(k).lower(): link_from_dict(str(k).lower(), v) for k, v in _catalog_file("links.yaml").items()}


@cache
def _aliases() -> dict[str, str]:
    """alias -> canonical name; an alias may name one chip only and never shadow a canonical name."""
    table = chips()
    out: dict[str, str] = {}
    for name, chip in table.items():
        for alias in chip.aliases:
            if alias in table or out.get(alias, name) != name:
                raise ConfigError(f"chip({name}).aliases", alias, "already names another chip in the catalog")
            out[alias] = name
    return out


def get_chip(name: str) -> Chip:
    """A catalog chip by name or alias (case-insensitive), or a YAML file describing one chip."""
    key = name.strip().lower()
    table = chips()
    if key in table:
        return table[key]
    alias = _aliases().get(key)
    if alias:
        return table[alias]
    if key.endswith((".yaml", ".yml", ".json")):
        data = load_mapping(name)  # ConfigError if the file is missing or malformed
        chip_name = as_name(data.pop("name", Path(name).stem), f"chip({name}).name")
        return chip_from_dict(chip_name, data)
    raise ConfigError("chip", name, "unknown chip" + did_you_mean(key, list(table) + list(_aliases()),
                                                              "greentrain catalog chips"))


def get_link(name: str) -> Link:
    key = name.strip().lower()
    table = links()
    if key not in table:
        raise ConfigError("link", name, "unknown link" + did_you_mean(key, table, "greentrain catalog links"))
    return table[key]
