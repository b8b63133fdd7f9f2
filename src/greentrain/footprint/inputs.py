"""Read a run from a `greentrain plan --json` or `track` JSON file, defensively.

Keys used (others are ignored): ``num_chips``; ``run_time_s`` (or ``device_hours`` / num_chips); ``chip``;
``region``; and the device power, the first present of: ``device_energy_kwh`` (measured energy of all chips),
``power_w_per_chip`` (measured or planned), ``utilization``, ``mfu`` (used as the utilization: it understates
a busy chip's power, see docs/footprint.md), else ``energy_kwh`` divided by ``pue`` (facility energy as
greentrain writes it). A missing key is a one-line ConfigError that names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain.config import as_float, as_int, load_mapping
from greentrain.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInputs:
    num_chips: int
    duration_s: float
    chip: str = ""
    region: str = ""
    utilization: float | None = None
    power_w: float | None = None
    device_energy_j: float | None = None
    pue: float | None = None
    mfu_as_utilization: bool = False
    power_predicted: bool = False  # the power or energy is a prediction (a plan file), not a measurement


# Keys only `greentrain plan --json` writes: its power per chip is modelled, never measured
PLAN_KEYS = ("step_time_s", "mfu")


def _num(data: dict[str, Any], key: str, where: str, minimum: float = 0.0) -> float | None:
    if key not in data or data[key] is None:
        return None
    return as_float(data[key], f"{where}.{key}", minimum=minimum)


def _duration_s(data: dict[str, Any], num_chips: int, where: str) -> float:
    run_time = _num(data, "run_time_s", where)
    if run_time is not None:
        return run_time
    device_hours = _num(data, "device_hours", where)
    if device_hours is not None:
        return units.hours_to_s(device_hours) / num_chips
    raise ConfigError(f"{where}.run_time_s", None, "is required (or device_hours)")


def run_inputs_from_dict(data: dict[str, Any], where: str = "run") -> RunInputs:
    if "num_chips" not in data:
        raise ConfigError(f"{where}.num_chips", None, "is required")
    num_chips = as_int(data["num_chips"], f"{where}.num_chips", minimum=1)
    duration = _duration_s(data, num_chips, where)
    chip = data.get("chip") or ""
    if isinstance(chip, dict):
        chip = chip.get("name", "")
    pue = _num(data, "pue", where, minimum=1.0)
    energy = _num(data, "device_energy_kwh", where)
    power = _num(data, "power_w_per_chip", where)
    util = _num(data, "utilization", where)
    mfu = _num(data, "mfu", where)
    for name, v in (("utilization", util), ("mfu", mfu)):
        if v is not None and v > 1.0:
            raise ConfigError(f"{where}.{name}", v, "must be in [0, 1]")
    if energy is None and power is None and util is None and mfu is None:
        facility = _num(data, "energy_kwh", where)
        if facility is None:
            raise ConfigError(f"{where}.power_w_per_chip", None,
                              "is required (or device_energy_kwh, utilization, mfu, or energy_kwh with pue)")
        if pue is None:
            raise ConfigError(f"{where}.pue", None, "is required with energy_kwh (facility = IT x PUE)")
        energy = facility / pue
    return RunInputs(num_chips=num_chips, duration_s=duration, chip=str(chip),
                     region=str(data.get("region") or ""),
                     utilization=util if util is not None else mfu,
                     power_w=power, device_energy_j=units.kwh_to_j(energy) if energy is not None else None,
                     pue=pue, mfu_as_utilization=util is None and mfu is not None,
                     power_predicted=all(k in data for k in PLAN_KEYS) and "meters" not in data)


def run_inputs_from_json(path: str | Path) -> RunInputs:
    return run_inputs_from_dict(load_mapping(path, field="run_json"), where=Path(path).name)
