"""A run from a `greentrain plan --json`, `track` or hand-written JSON file, checked.

cli/footprint.py reads the file (a plan or track result through results/codec.py) and hands over a RunFile.
Keys used (others are ignored): ``num_chips``; ``run_time_s`` (or ``device_hours`` / num_chips); ``chip``;
``region``; and the device power, the first present of: ``device_energy_kwh`` (measured energy of all chips),
``power_w_per_chip`` (measured or planned), ``utilization``, ``mfu`` (used as the utilization: it understates
a busy chip's power, see docs/footprint.md), else ``energy_kwh`` divided by ``pue`` (facility energy as
greentrain writes it). A missing key is a one-line ConfigError that names it.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain import units
from greentrain.config import BOUNDS, as_float, as_int, require
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

    def __post_init__(self) -> None:  # ranges and reasons: config.BOUNDS (a file's values, as the flags')
        BOUNDS["num_chips"].check_int(self.num_chips, "num_chips")
        d = BOUNDS["duration_s"]
        require(d.ok(self.duration_s), "run_time_s", self.duration_s,
                f"must be at most {units.s_to_days(d.hi):,.0f} days ({d.hi:.3g} s): {d.reason}")
        if self.power_w is not None:
            BOUNDS["chip_power_w"].check(self.power_w, "power_w_per_chip")
        if self.pue is not None:
            BOUNDS["pue"].check(self.pue, "pue")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFile:
    """The keys of a run file footprint reads, typed by the reader (cli/footprint.py reads the file, through
    results/codec.py when it is a plan or track result); None: the key is absent. ``where`` (the file's name)
    starts every error."""

    where: str = "run"
    num_chips: int | None = None
    run_time_s: float | None = None
    device_hours: float | None = None
    chip: str = ""
    region: str = ""
    pue: float | None = None
    device_energy_kwh: float | None = None
    power_w_per_chip: float | None = None
    utilization: float | None = None
    mfu: float | None = None
    energy_kwh: float | None = None
    predicted: bool = False  # a plan file: its power per chip is modelled, never measured


def _num(value: float | None, key: str, where: str, minimum: float = 0.0) -> float | None:
    return None if value is None else as_float(value, f"{where}.{key}", minimum=minimum)


def _duration_s(run: RunFile, num_chips: int) -> float:
    run_time = _num(run.run_time_s, "run_time_s", run.where)
    if run_time is not None:
        return run_time
    device_hours = _num(run.device_hours, "device_hours", run.where)
    if device_hours is not None:
        return units.hours_to_s(device_hours) / num_chips
    raise ConfigError(f"{run.where}.run_time_s", None, "is required (or device_hours)")


def run_inputs(run: RunFile) -> RunInputs:
    """The footprint's inputs from a run file: the device power is the first present of device_energy_kwh,
    power_w_per_chip, utilization, mfu, else energy_kwh / pue."""
    where = run.where
    if run.num_chips is None:
        raise ConfigError(f"{where}.num_chips", None, "is required")
    num_chips = as_int(run.num_chips, f"{where}.num_chips", minimum=1)
    duration = _duration_s(run, num_chips)
    pue = _num(run.pue, "pue", where, minimum=1.0)
    energy = _num(run.device_energy_kwh, "device_energy_kwh", where)
    power = _num(run.power_w_per_chip, "power_w_per_chip", where)
    util = _num(run.utilization, "utilization", where)
    mfu = _num(run.mfu, "mfu", where)
    for name, v in (("utilization", util), ("mfu", mfu)):
        if v is not None and v > 1.0:
            raise ConfigError(f"{where}.{name}", v, "must be in [0, 1]")
    if energy is None and power is None and util is None and mfu is None:
        facility = _num(run.energy_kwh, "energy_kwh", where)
        if facility is None:
            raise ConfigError(f"{where}.power_w_per_chip", None,
                              "is required (or device_energy_kwh, utilization, mfu, or energy_kwh with pue)")
        if pue is None:
            raise ConfigError(f"{where}.pue", None, "is required with energy_kwh (facility = IT x PUE)")
        energy = facility / pue
    return RunInputs(num_chips=num_chips, duration_s=duration, chip=run.chip, region=run.region,
                     utilization=util if util is not None else mfu,
                     power_w=power, device_energy_j=units.kwh_to_j(energy) if energy is not None else None,
                     pue=pue, mfu_as_utilization=util is None and mfu is not None,
                     power_predicted=run.predicted)
