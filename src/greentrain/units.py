"""The only place where units are converted.

Everything inside greentrain is SI (seconds, bytes, FLOP, watts, joules, kg CO2e, US dollars).
Human units appear only in YAML keys, CLI flags and rendered tables; they are converted here, once.
"""

from __future__ import annotations

from collections.abc import Callable

# Bytes
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 2.0**10
MIB = 2.0**20
GIB = 2.0**30
TIB = 2.0**40

# Bits on a wire
GBIT = 1e9 / 8.0  # bytes in one gigabit

# Work
GFLOP = 1e9
TFLOP = 1e12
PFLOP = 1e15

# Time
US_S = 1e-6
MS_S = 1e-3
MINUTE_S = 60.0
HOUR_S = 3600.0
DAY_S = 86400.0

# Energy
UJ_J = 1e-6  # joules in one microjoule (Linux powercap's energy_uj counters)
KWH_J = 3.6e6
MWH_J = 3.6e9

# Counts: figures per million (kg CO2e per million tokens) and the SI prefixes of a rendered number
MILLION = 1e6
SI_PREFIXES = ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))

# Mass
G_PER_KG = 1000.0
KG_PER_T = 1000.0
LB_KG = 0.45359237  # international avoirdupois pound (exact by definition)


def _times(factor: float) -> Callable[[float], float]:
    """x -> x * factor: a conversion into SI (GiB -> bytes, hours -> s)."""

    def convert(x: float) -> float:
        return x * factor

    return convert


def _per(factor: float) -> Callable[[float], float]:
    """x -> x / factor: a conversion out of SI (J -> kWh, s -> hours)."""

    def convert(x: float) -> float:
        return x / factor

    return convert


# Into SI: what YAML keys and flags say in GiB, GB/s, Gbit/s, TFLOP/s, kWh, hours... (a rate converts as its amount)
gib_to_bytes = _times(GIB)
gb_to_bytes = gb_per_s_to_bytes_per_s = _times(GB)
gbit_per_s_to_bytes_per_s = _times(GBIT)
mb_per_s_to_bytes_per_s = _times(MB)
tflop_per_s_to_flop_per_s = _times(TFLOP)
kwh_to_j = _times(KWH_J)
kg_to_g = _times(G_PER_KG)
ms_to_s = _times(MS_S)
us_to_s = _times(US_S)
hours_to_s = _times(HOUR_S)
days_to_s = _times(DAY_S)
# Out of SI, for tables and the files other tools read
j_to_kwh = _per(KWH_J)
usd_per_kwh_to_usd_per_j = _per(KWH_J)
s_to_hours = _per(HOUR_S)
s_to_days = _per(DAY_S)
bytes_to_gib = _per(GIB)


def g_per_kwh_to_kg_per_j(x: float) -> float:
    """Grid carbon intensity: g CO2e per kWh -> kg CO2e per joule."""
    return x / G_PER_KG / KWH_J


def kg_per_j_to_g_per_kwh(x: float) -> float:
    return x * G_PER_KG * KWH_J


def lb_per_mwh_to_g_per_kwh(x: float) -> float:
    """Grid intensity in lb CO2e/MWh (EPA eGRID's unit) -> g CO2e/kWh."""
    return x * LB_KG * G_PER_KG / 1000.0


def years_to_s(x: float) -> float:
    """Calendar years of 365 days (hardware lifetimes)."""
    return x * 365.0 * DAY_S
