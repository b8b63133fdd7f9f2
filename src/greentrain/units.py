"""The only place where units are converted.

Everything inside greentrain is SI (seconds, bytes, FLOP, watts, joules, kg CO2e, US dollars).
Human units appear only in YAML keys, CLI flags and rendered tables; they are converted here, once.
"""

from __future__ import annotations

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


def gib_to_bytes(x: float) -> float:
    return x * GIB


def gb_to_bytes(x: float) -> float:
    return x * GB


def gb_per_s_to_bytes_per_s(x: float) -> float:
    return x * GB


def gbit_per_s_to_bytes_per_s(x: float) -> float:
    return x * GBIT


def mb_per_s_to_bytes_per_s(x: float) -> float:
    return x * MB


def tflop_per_s_to_flop_per_s(x: float) -> float:
    return x * TFLOP


def j_to_kwh(x: float) -> float:
    return x / KWH_J


def kwh_to_j(x: float) -> float:
    return x * KWH_J


def g_per_kwh_to_kg_per_j(x: float) -> float:
    """Grid carbon intensity: g CO2e per kWh -> kg CO2e per joule."""
    return x / G_PER_KG / KWH_J


def kg_per_j_to_g_per_kwh(x: float) -> float:
    return x * G_PER_KG * KWH_J


def usd_per_kwh_to_usd_per_j(x: float) -> float:
    return x / KWH_J


def lb_per_mwh_to_g_per_kwh(x: float) -> float:
    """Grid intensity in lb CO2e/MWh (EPA eGRID's unit) -> g CO2e/kWh."""
    return x * LB_KG * G_PER_KG / 1000.0


def kg_to_g(x: float) -> float:
    return x * G_PER_KG


def years_to_s(x: float) -> float:
    """Calendar years of 365 days (hardware lifetimes)."""
    return x * 365.0 * DAY_S


def ms_to_s(x: float) -> float:
    return x * MS_S


def us_to_s(x: float) -> float:
    return x * US_S


def s_to_hours(x: float) -> float:
    return x / HOUR_S


def s_to_days(x: float) -> float:
    return x / DAY_S


def hours_to_s(x: float) -> float:
    return x * HOUR_S


def days_to_s(x: float) -> float:
    return x * DAY_S


def bytes_to_gib(x: float) -> float:
    return x / GIB
