"""The devices of a swarm (seed 000): compute rate, ingress and egress bandwidth, latency, unreliability.

DEVICES.yaml::

    devices:
      - name: laptop            # optional; a group of count > 1 is expanded to laptop-0, laptop-1, ...
        count: 8                # optional, default 1
        tflop_per_s: 20         # or flop_per_s
        ingress_mb_per_s: 100   # or ingress_gb_per_s, ingress_gbit_per_s
        egress_mb_per_s: 20     # or egress_gb_per_s, egress_gbit_per_s
        latency_ms: 30          # optional, one way, paid by every transfer (default 0)
        failure_probability: 0.01  # optional: chance that the device drops out during a task (default 0)
        rejoin_s: 60            # optional: a dropped device comes back after this long (default: next round)
        slowdown: 1.5           # optional: a straggler computes 1.5x slower than its rate says (default 1)

Human units are converted once, here, through greentrain.units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain.config import (
    BOUNDS,
    MAX_DEVICE_FLOP_PER_S,
    MAX_LINK_BYTES_PER_S,
    MIN_LINK_BYTES_PER_S,
    as_float,
    as_int,
    as_name,
    check_keys,
    load_mapping,
    require,
)
from greentrain.errors import ConfigError

MAX_DEVICES = 10_000  # a swarm of seed 000; also bounds the simulator's memory and time
MIN_DEVICE_FLOP_PER_S = 1e3
MAX_LATENCY_MS = 1e6  # 1,000 s
MAX_REJOIN_S = 1e9

# key suffix -> converter to bytes/s
_BANDWIDTH_UNITS = {
    "mb_per_s": units.mb_per_s_to_bytes_per_s,
    "gb_per_s": units.gb_per_s_to_bytes_per_s,
    "gbit_per_s": units.gbit_per_s_to_bytes_per_s,
}
_RATE_KEYS = ("flop_per_s", "tflop_per_s")
DEVICE_KEYS = ("name", "count", *_RATE_KEYS, "latency_ms", "failure_probability", "rejoin_s", "slowdown",
               *(f"{d}_{u}" for d in ("ingress", "egress") for u in _BANDWIDTH_UNITS))


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    name: str
    flop_per_s: float
    ingress_bytes_per_s: float
    egress_bytes_per_s: float
    latency_s: float = 0.0
    failure_probability: float = 0.0
    rejoin_s: float = math.inf  # inf: a dropped device stays out until the next round
    slowdown: float = 1.0
    group: str = ""

    def __post_init__(self) -> None:
        w = f"devices.{self.name}"
        for f in ("flop_per_s", "ingress_bytes_per_s", "egress_bytes_per_s", "slowdown"):
            v = getattr(self, f)
            require(math.isfinite(v) and v > 0, f"{w}.{f}", v, "must be a finite number > 0")
        require(self.latency_s >= 0, f"{w}.latency_s", self.latency_s, "must be >= 0")
        require(0 <= self.failure_probability < 1, f"{w}.failure_probability", self.failure_probability,
                "must be in [0, 1)")
        require(self.rejoin_s >= 0, f"{w}.rejoin_s", self.rejoin_s, "must be >= 0")
        if not self.group:
            object.__setattr__(self, "group", self.name)

    @property
    def effective_flop_per_s(self) -> float:
        """The rate it really computes at: its rate divided by its slowdown."""
        return self.flop_per_s / self.slowdown

    def task_time_s(self, flop: float, in_bytes: float, out_bytes: float) -> float:
        """Ingress + compute + egress of one task on this device, uncontended (seed 000's three states)."""
        return (in_bytes / self.ingress_bytes_per_s + flop * self.slowdown / self.flop_per_s
                + out_bytes / self.egress_bytes_per_s + 2.0 * self.latency_s)


def _one_of(entry: Mapping[str, Any], keys: list[str], where: str, what: str) -> str:
    present = [k for k in keys if k in entry]
    if len(present) != 1:
        value = {k: entry[k] for k in present} if present else None
        raise ConfigError(f"{where}.{what}", value, f"give exactly one of {', '.join(keys)}")
    return present[0]


def _bandwidth(entry: Mapping[str, Any], direction: str, where: str) -> float:
    keys = [f"{direction}_{u}" for u in _BANDWIDTH_UNITS]
    key = _one_of(entry, keys, where, f"{direction}_*_per_s")
    value = as_float(entry[key], f"{where}.{key}", positive=True)
    bytes_per_s = _BANDWIDTH_UNITS[key[len(direction) + 1:]](value)
    require(MIN_LINK_BYTES_PER_S <= bytes_per_s <= MAX_LINK_BYTES_PER_S, f"{where}.{key}", value,
            f"must be between {MIN_LINK_BYTES_PER_S:.0e} and {MAX_LINK_BYTES_PER_S:.0e} bytes/s")
    return bytes_per_s


def device_group(entry: Any, index: int) -> list[Device]:
    """One entry of ``devices:`` (a device or a group with ``count``) -> its devices."""
    where = f"devices[{index}]"
    if not isinstance(entry, Mapping):
        raise ConfigError(where, entry, "must be a mapping with flop_per_s, ingress_* and egress_* keys")
    check_keys(entry, DEVICE_KEYS, where)
    name = as_name(entry["name"], f"{where}.name") if "name" in entry else f"dev{index}"
    where = f"devices[{index}]({name})"
    count = as_int(entry.get("count", 1), f"{where}.count", minimum=1)
    require(count <= MAX_DEVICES, f"{where}.count", count, f"must be <= {MAX_DEVICES:,} (devices in a swarm)")
    rate_key = _one_of(entry, list(_RATE_KEYS), where, "flop_per_s")
    rate = as_float(entry[rate_key], f"{where}.{rate_key}", positive=True)
    flop_per_s = units.tflop_per_s_to_flop_per_s(rate) if rate_key == "tflop_per_s" else rate
    require(MIN_DEVICE_FLOP_PER_S <= flop_per_s <= MAX_DEVICE_FLOP_PER_S, f"{where}.{rate_key}", rate,
            f"must be between {MIN_DEVICE_FLOP_PER_S:.0e} and {MAX_DEVICE_FLOP_PER_S:.0e} FLOP/s")
    kw = {
        "flop_per_s": flop_per_s,
        "ingress_bytes_per_s": _bandwidth(entry, "ingress", where),
        "egress_bytes_per_s": _bandwidth(entry, "egress", where),
        "latency_s": units.ms_to_s(as_float(entry.get("latency_ms", 0.0), f"{where}.latency_ms",
                                            minimum=0.0, maximum=MAX_LATENCY_MS)),
        "failure_probability": as_float(entry.get("failure_probability", 0.0), f"{where}.failure_probability",
                                        minimum=0.0),
        "slowdown": BOUNDS["slowdown"].check(entry.get("slowdown", 1.0), f"{where}.slowdown"),  # config.BOUNDS
        "rejoin_s": as_float(entry["rejoin_s"], f"{where}.rejoin_s", minimum=0.0, maximum=MAX_REJOIN_S)
        if "rejoin_s" in entry
        else math.inf,
    }
    require(kw["failure_probability"] < 1.0, f"{where}.failure_probability", kw["failure_probability"],
            "must be < 1 (a device that always fails never finishes a task)")
    names = [name] if count == 1 else [f"{name}-{i}" for i in range(count)]
    return [Device(name=n, group=name, **kw) for n in names]


def devices_from_mapping(data: Mapping[str, Any]) -> tuple[Device, ...]:
    check_keys(data, ["devices"], "")
    entries = data.get("devices")
    if not isinstance(entries, list) or not entries:
        raise ConfigError("devices", entries, "must be a non-empty list of devices or groups")
    require(len(entries) <= MAX_DEVICES, "devices", f"{len(entries):,} entries", f"must be <= {MAX_DEVICES:,}")
    out: list[Device] = []
    for i, entry in enumerate(entries):
        out += device_group(entry, i)
        require(len(out) <= MAX_DEVICES, "devices", f"{len(out):,} devices (with counts)",
                f"must be <= {MAX_DEVICES:,} in a swarm")
    seen: set[str] = set()
    for d in out:
        require(d.name not in seen, "devices.name", d.name, "device names must be unique")
        seen.add(d.name)
    return tuple(out)


def load_devices(path: str | Path) -> tuple[Device, ...]:
    """Read DEVICES.yaml (or .json) into devices; every bad field is a one-line ConfigError."""
    return devices_from_mapping(load_mapping(path, field="devices"))
