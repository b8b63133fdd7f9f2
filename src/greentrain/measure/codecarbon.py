"""CodeCarbon 3.x's own definitions, where greentrain follows them: the emissions.csv columns, the CPU TDP
table and its name matching, the fallbacks without RAPL, and the RAM power model.

Source: codecarbon 3.3.2 (https://github.com/mlco2/codecarbon, MIT License, Copyright (c) 2019 Mila, BCG Gamma,
CometML, Haverford College; Copyright (c) 2023 Code Carbon NGO):

- columns: ``codecarbon/output_methods/emissions_data.py`` ``EmissionsData`` (38 fields, in this order);
- CPU TDP: ``codecarbon/data/hardware/cpu_power.csv`` (copied unchanged to
  ``greentrain/footprint/data/codecarbon_cpu_power.csv``; Name, TDP in W per package), matched as
  ``codecarbon/core/cpu.py`` ``TDP._get_matching_cpu`` does (exact name ignoring case; then without "(R)",
  " CPU @ ..." and "@ x.xxGHz"; then a unique token-subset match);
- unknown CPU: ``DEFAULT_POWER_PER_CORE = 4`` W per thread (``core/cpu.py``), so TDP = 4 W x threads;
- process mode (``external/hardware.py`` ``CPU._get_power_from_cpu_load``): power = TDP x sockets x CPU load /
  logical CPUs, i.e. TDP x sockets / logical CPUs per CPU-second;
- RAM (``external/ram.py`` ``RAM._calculate_ram_power``): DIMMs estimated from the memory size, 5 W per x86
  DIMM (1.5 W on ARM) with a decreasing marginal power beyond 4, 8 and 16 DIMMs, at least 2 DIMMs' worth
  (3 W on ARM). Applied to the tracked process tree's resident memory (CodeCarbon's process mode).
"""

from __future__ import annotations

import csv
import math
import os
import platform
import re
from functools import cache
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain.errors import ConfigError, csv_errors

CODECARBON_VERSION = "3.3.2"
EMISSIONS_COLUMNS = (
    "timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions", "emissions_rate",
    "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy", "energy_consumed",
    "water_consumed", "country_name", "country_iso_code", "region", "cloud_provider", "cloud_region", "os",
    "python_version", "codecarbon_version", "cpu_count", "cpu_model", "gpu_count", "gpu_model", "longitude",
    "latitude", "ram_total_size", "tracking_mode", "cpu_utilization_percent", "gpu_utilization_percent",
    "ram_utilization_percent", "ram_used_gb", "on_cloud", "pue", "wue",
)
# CodeCarbon 2.x's 32 columns (greentrain wrote these before issue 26): appended to in their own layout
EMISSIONS_COLUMNS_V2 = tuple(c for c in EMISSIONS_COLUMNS if c not in (
    "water_consumed", "cpu_utilization_percent", "gpu_utilization_percent", "ram_utilization_percent",
    "ram_used_gb", "wue"))
TEXT_COLUMNS = frozenset({"timestamp", "project_name", "run_id", "experiment_id", "country_name",
                          "country_iso_code", "region", "cloud_provider", "cloud_region", "os", "python_version",
                          "codecarbon_version", "cpu_model", "gpu_model", "tracking_mode", "on_cloud"})
W_PER_THREAD = 4.0  # core/cpu.py DEFAULT_POWER_PER_CORE ("4 W per thread")
RAM_W_PER_DIMM_X86, RAM_W_PER_DIMM_ARM, RAM_MIN_W_ARM = 5.0, 1.5, 3.0  # external/ram.py
_DIMM_SIZES_GB = (4, 8, 16, 32, 64, 128)
CPU_POWER_CSV = Path(__file__).resolve().parents[1] / "footprint" / "data" / "codecarbon_cpu_power.csv"


@cache
def cpu_power_table() -> dict[str, float]:
    """CodeCarbon's cpu_power.csv: model name -> TDP (W per package). Four rows of 3.3.2 hold a range such as
    "27.29.5" (old Celerons, where CodeCarbon's float() would fail): they are left out, so those CPUs take the
    fallback."""
    out: dict[str, float] = {}
    for line in CPU_POWER_CSV.read_text("utf-8").splitlines()[1:]:  # "Name,TDP"; names may be quoted
        name, _, tdp = line.rpartition(",")
        if tdp.replace(".", "", 1).isdigit():
            out[name[1:-1].replace('""', '"') if name.startswith('"') else name] = float(tdp)
    return out


@cache
def _token_table() -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((name, _tokens(name)) for name in cpu_power_table())


_NOT_ALNUM = {c: " " for c in range(128) if not chr(c).isalnum()}


def _tokens(text: str) -> frozenset[str]:
    """rapidfuzz's default_process: lower case, every non-alphanumeric character a space."""
    return frozenset(text.lower().translate(_NOT_ALNUM).split())


@cache
def match_cpu(model_raw: str) -> str | None:
    """The cpu_power.csv name CodeCarbon 3.x matches for a CPU model name, or None."""
    table = cpu_power_table()
    by_lower = {name.lower(): name for name in table}
    if model_raw.lower() in by_lower:
        return by_lower[model_raw.lower()]
    model = model_raw.replace("(R)", "")
    at = model.find(" CPU @ ")
    model = model[:at] if at > 0 else model
    model = re.sub(r" @\s*\d+\.\d+GHz", "", model.replace(" CPU", ""))
    if model.lower() in by_lower:
        return by_lower[model.lower()]
    # fuzz.token_set_ratio == 100: one token set contains the other; CodeCarbon (greedy=False) takes it only
    # when it is the single such name (ties with equal scores give no match)
    want = _tokens(model)
    hits = [name for name, t in _token_table() if want and (t <= want or want <= t)]
    return hits[0] if len(hits) == 1 else None


def sockets() -> int:
    """Physical CPU packages (lscpu's "Socket(s)"): distinct ``physical id`` in /proc/cpuinfo, else 1."""
    try:
        ids = {line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("physical id")}
    except OSError:
        return 1
    return max(len(ids), 1)


def cpu_power_per_cpu_s(model_name: str) -> tuple[float, str]:
    """(W per CPU-second of the tracked processes, source): TDP x sockets / logical CPUs (CodeCarbon's process
    mode), with the TDP from CodeCarbon's table, or its fallback of 4 W per thread."""
    n, k = os.cpu_count() or 1, sockets()
    name = match_cpu(model_name)
    if name is not None:
        tdp = cpu_power_table()[name]
        return tdp * k / n, f"CodeCarbon cpu_power.csv: {name} {tdp:g} W x {k} socket(s) / {n} threads"
    return W_PER_THREAD * k, f"CodeCarbon 3.x fallback: {W_PER_THREAD:g} W per thread ({n} threads, unknown CPU)"


def dimm_count(memory_gb: float) -> int:
    """external/ram.py RAM._estimate_dimm_count."""
    if memory_gb <= 2:
        return 1
    if memory_gb <= 32:
        return 2 if memory_gb <= 16 else 4
    if memory_gb <= 128:
        return 4 if memory_gb <= 64 else 8
    for size in sorted(_DIMM_SIZES_GB, reverse=True):
        if size <= memory_gb / 8:
            return min(math.ceil(memory_gb / size), 32)
    return 8


def ram_power_w(memory_bytes: float, arm: bool | None = None) -> float:
    """external/ram.py RAM._calculate_ram_power for ``memory_bytes`` (CodeCarbon's GB: 2^30 bytes)."""
    arm = platform.machine().lower().startswith(("arm", "aarch")) if arm is None else arm
    per, floor = (RAM_W_PER_DIMM_ARM, RAM_MIN_W_ARM) if arm else (RAM_W_PER_DIMM_X86, 2 * RAM_W_PER_DIMM_X86)
    n = dimm_count(memory_bytes / units.GIB)
    total = per * min(n, 4) + per * 0.9 * min(max(n - 4, 0), 4) + per * 0.8 * min(max(n - 8, 0), 8) \
        + per * 0.7 * max(n - 16, 0)
    return max(floor, total)


def read_header(path: Path) -> tuple[str, ...] | None:
    """The header of an existing emissions.csv, None when the file is absent or empty."""
    try:
        with path.open(newline="", encoding="utf-8") as f, csv_errors("emissions.csv", path):
            first = next(csv.reader(f), None)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError("emissions.csv", str(path), f"cannot be read: {e}") from None
    return tuple(first) if first else None


def check_header(path: Path) -> tuple[str, ...]:
    """The columns to append under in ``path``: CodeCarbon 3.x's for a new file, else the file's own when
    every one of them is a CodeCarbon column (2.x or 3.x, in any order); a foreign header is refused, never
    appended to (a shifted row would put a country under water_consumed)."""
    header = read_header(path)
    if header is None:
        return EMISSIONS_COLUMNS
    unknown = [c for c in header if c not in EMISSIONS_COLUMNS]
    if unknown or len(set(header)) != len(header):
        raise ConfigError("emissions.csv", str(path), f"has a header greentrain does not write (unknown or repeated "
                          f"columns: {', '.join(unknown) or 'repeated'}); give another out_dir or move the file")
    return header


def read_emissions(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an emissions.csv written by CodeCarbon (2.x or 3.x) or greentrain: numbers as floats,
    text columns as text, an empty cell as None; a row with more cells than the header is refused."""
    rows = []
    with Path(path).open(newline="", encoding="utf-8") as f, csv_errors("emissions.csv", path):
        for i, row in enumerate(csv.DictReader(f), start=2):
            if None in row:
                raise ConfigError("emissions.csv", f"{path}:{i}", "has more cells than its header")
            rows.append({k: _cell(k, v, f"{path}:{i}") for k, v in row.items()})
    return rows


def _cell(column: str, value: str | None, where: str) -> Any:
    if column in TEXT_COLUMNS:
        return value
    if value in ("", None):
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"emissions.csv {column}", value, f"must be a number ({where}: a shifted row?)") from None
