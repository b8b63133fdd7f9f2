"""`greentrain footprint` output: footprints as JSON dicts (units in the keys) and Rich tables (human units,
converted through units.py)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain import units
from greentrain.footprint.compare import TIE_RULE, RegionFootprint
from greentrain.footprint.model import Footprint
from greentrain.footprint.schedule import BestStart
from greentrain.footprint.site import Site
from greentrain.hardware.chip import Chip


def _text(table: Table) -> str:
    console = Console(width=120, record=True, force_terminal=False, color_system=None)
    with console.capture() as cap:
        console.print(table)
    return cap.get().rstrip()


def best_start_dict(start: BestStart) -> dict[str, Any]:
    return {"job_hours": start.job_hours, "best_start_index": start.start_index,
            "best_start_time": start.start_time, "best_mean_g_co2e_per_kwh": start.best_mean_g_co2e_per_kwh,
            "now_mean_g_co2e_per_kwh": start.now_mean_g_co2e_per_kwh,
            "worst_mean_g_co2e_per_kwh": start.worst_mean_g_co2e_per_kwh,
            "saving_vs_now_fraction": start.saving_vs_now}


def footprint_dict(fp: Footprint, start: BestStart | None = None) -> dict[str, Any]:
    out = fp.to_dict()
    if start is not None:
        out["best_start"] = best_start_dict(start)
    return out


def footprint_table(fp: Footprint, site: Site, chip: Chip | None, start: BestStart | None = None,
                    mfu: bool = False) -> str:
    t = Table(title="greentrain footprint", show_header=True, header_style="bold")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_column("how", overflow="fold")
    how_power = "measured" if fp.power_measured else "predicted: idle + (TDP - idle) x utilization"
    if mfu:
        how_power += " (MFU used as utilization: understates power)"
    rows = [
        ("chips", f"{fp.num_chips} x {chip.name if chip else 'unnamed chip'}", ""),
        ("run time", f"{units.s_to_hours(fp.duration_s):,.2f} h", f"{fp.device_hours:,.1f} device-hours"),
        ("power per chip", f"{fp.power_w_per_chip:,.1f} W", how_power),
        ("host per chip", f"{fp.host_power_w_per_chip:,.1f} W", "CPU, RAM, network share"),
        ("PUE", f"{fp.pue:.2f}", site.source.split(";")[-1].strip() if site.region else "given"),
        ("energy", f"{fp.energy_kwh:,.1f} kWh", f"{fp.energy_basis}: (devices + host) x PUE"),
        ("grid intensity", f"{fp.grid_g_co2e_per_kwh:,.1f} g/kWh", site.region or "given"),
        ("operational CO2e", f"{fp.operational_kg_co2e:,.1f} kg", "energy x grid intensity"),
        ("embodied CO2e", f"{fp.embodied_kg_co2e:,.1f} kg",
         f"amortized over {fp.lifetime_s / units.years_to_s(1.0):g} years"),
        ("total CO2e", f"{fp.emissions_kg_co2e:,.1f} kg", ""),
        ("cost", f"{fp.cost_usd:,.2f} USD", fp.cost_basis),
    ]
    for row in rows:
        t.add_row(*row)
    text = _text(t)
    if start is not None:
        text += (f"\nbest start: {start.start_time} (row {start.start_index}), mean "
                 f"{start.best_mean_g_co2e_per_kwh:.1f} g/kWh vs {start.now_mean_g_co2e_per_kwh:.1f} now "
                 f"({100 * start.saving_vs_now:.1f} % less operational CO2e)")
    for note in fp.notes:
        text += f"\nnote: {note}"
    return text


def compare_dict(ranked: tuple[RegionFootprint, ...]) -> dict[str, Any]:
    return {"tie_rule": TIE_RULE,
            "regions": [{"region": r.region.code, "provider": r.region.provider, "name": r.region.name,
                         "co2e_rank": r.co2e_rank, "cost_rank": r.cost_rank, **r.footprint.to_dict()}
                        for r in ranked]}


def compare_table(ranked: tuple[RegionFootprint, ...]) -> str:
    t = Table(title="regions ranked by CO2e", caption=TIE_RULE, header_style="bold")
    for name in ("#", "region", "name", "grid g/kWh", "PUE", "energy kWh", "CO2e kg", "cost USD", "cost #"):
        t.add_column(name, justify="left" if name in ("region", "name") else "right")
    for r in ranked:
        fp = r.footprint
        t.add_row(str(r.co2e_rank), r.region.code, r.region.name, f"{fp.grid_g_co2e_per_kwh:,.0f}",
                  f"{fp.pue:.2f}", f"{fp.energy_kwh:,.0f}", f"{fp.emissions_kg_co2e:,.1f}",
                  f"{fp.cost_usd:,.2f}" if fp.cost_basis != "unknown" else "?", str(r.cost_rank))
    return _text(t)
