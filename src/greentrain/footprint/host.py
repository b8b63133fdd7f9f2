"""Host overhead per accelerator: CPUs, RAM, NICs, switches and fans of the server around the chips.

Default (data/hosts.csv): the NVIDIA DGX system of the chip's generation, host share at full load =
(system max power - num_gpus x GPU TDP) / num_gpus (each DGX datasheet; the NVL72 racks from their rack power).
For a chip with no row the median host-to-TDP ratio of the listed 8-GPU servers is used (a rack-scale system's
host share, a Grace CPU per two GPUs and the NVLink switch trays, is not a server's). Both are upper bounds
(system power *max*), scaled by the same load fraction as the chip: host_w = host_max_w x device_w / TDP. This
proportional scaling is our assumption, stated in docs/footprint.md; give --host-w-per-chip to replace it with a
measurement.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from functools import cache
from importlib import resources

from greentrain.hardware.chip import Chip
from greentrain.num import Num, minimum

SERVER_GPUS = 8  # the DGX servers' GPUs; larger systems (NVL72 racks) stay out of the fallback median


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSystem:
    system: str
    chip_prefixes: tuple[str, ...]
    num_gpus: int
    system_max_w: float
    gpu_tdp_w: float
    source: str
    year: int

    @property
    def host_max_w_per_gpu(self) -> float:
        # DGX datasheet: system max power minus the GPUs' TDP, shared over the GPUs.
        return (self.system_max_w - self.num_gpus * self.gpu_tdp_w) / self.num_gpus

    @property
    def host_to_tdp_ratio(self) -> float:
        return self.host_max_w_per_gpu / self.gpu_tdp_w


@cache
def host_systems() -> tuple[HostSystem, ...]:
    text = resources.files("greentrain.footprint").joinpath("data", "hosts.csv").read_text(encoding="utf-8")
    return tuple(HostSystem(system=r["system"], chip_prefixes=tuple(r["chip_prefixes"].split()),
                            num_gpus=int(r["num_gpus"]), system_max_w=float(r["system_max_w"]),
                            gpu_tdp_w=float(r["gpu_tdp_w"]), source=r["source"], year=int(r["year"]))
                 for r in csv.DictReader(text.splitlines()))


def host_system_for(chip: Chip) -> HostSystem | None:
    name = chip.name.lower()
    for system in host_systems():
        if any(name.startswith(p) for p in system.chip_prefixes):
            return system
    return None


def host_max_w_per_chip(chip: Chip) -> float:
    """Host share of one chip at full load: its system's figure, else the servers' median ratio x the chip's TDP."""
    system = host_system_for(chip)
    if system is not None:
        return system.host_max_w_per_gpu
    ratio = statistics.median(s.host_to_tdp_ratio for s in host_systems() if s.num_gpus <= SERVER_GPUS)
    return ratio * chip.tdp_w


def default_host_power_w_per_chip(chip: Chip | None, device_power_w: Num) -> Num:
    """Host power per chip at the chip's load (0 without a chip or a TDP to scale by); a column of device
    powers gives a column."""
    if chip is None or chip.tdp_w <= 0:
        return 0.0 * device_power_w
    return host_max_w_per_chip(chip) * minimum(device_power_w / chip.tdp_w, 1.0)
