"""Number formats of every rendered result (console tables and the HTML page), so a number reads the same in
both: durations, counts, masses of CO2e, bytes, energies and percentages."""

from __future__ import annotations

from greentrain import units


def dur(seconds: float) -> str:
    if seconds >= units.DAY_S:
        return f"{seconds / units.DAY_S:.1f} days"
    if seconds >= units.HOUR_S:
        return f"{seconds / units.HOUR_S:.1f} h"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3 or seconds == 0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} us"


def num(x: float) -> str:
    """Whole numbers from 100 up (thousands separators), three significant digits below."""
    return f"{x:,.0f}" if abs(x) >= 100 or x == 0 else f"{x:.3g}"


def mass(kg: float) -> str:
    if abs(kg) >= 1000:
        return f"{kg / 1000:,.2f} t"
    if abs(kg) >= 1 or kg == 0:
        return f"{num(kg)} kg"
    return f"{num(kg * units.G_PER_KG)} g"


def pct(x: float) -> str:
    return f"{x:.1%}"


def signed_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def si(x: float, unit: str) -> str:
    for factor, prefix in ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                           (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def gib(n_bytes: float) -> str:
    return f"{units.bytes_to_gib(n_bytes):.2f} GiB"


def energy(kwh: float) -> str:
    """kWh from 0.1 kWh up, else joules (a measured step is a few J)."""
    return f"{num(kwh)} kWh" if abs(kwh) >= 0.1 else f"{num(units.kwh_to_j(kwh))} J"
