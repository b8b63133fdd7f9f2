"""`greentrain search` output: the ranked top-k and the Pareto front as Rich tables, and the JSON rows."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain import units
from greentrain.search.engine import Candidate, SearchResult


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    return {"chip": c.chip, "num_chips": c.num_chips, "region": c.region, "strategy": c.strategy.to_dict(),
            "describe": c.strategy.describe(),
            "step_time_s": c.step_time_s, "run_time_s": c.run_time_s, "cost_usd": c.cost_usd,
            "emissions_kg_co2e": c.emissions_kg_co2e, "energy_kwh": units.j_to_kwh(c.energy_j),
            "memory_bytes_per_device": c.memory_bytes, "mfu": c.mfu, "cost_basis": c.cost_basis}


_HEADERS = ("#", "chip", "chips", "region", "strategy", "days", "USD", "kg CO2e", "kWh", "GiB/dev", "MFU")


def _table(title: str, rows: tuple[Candidate, ...]) -> Table:
    """Every column but the strategy keeps its full width (numbers are never cut); on a narrow terminal the
    strategy wraps instead."""
    cells = [(str(i), c.chip, str(c.num_chips), c.region or "-", c.strategy.describe(),
              f"{units.s_to_days(c.run_time_s):.2f}", f"{c.cost_usd:,.0f}" + ("" if c.cost_basis == "cloud" else " e"),
              f"{c.emissions_kg_co2e:,.0f}", f"{units.j_to_kwh(c.energy_j):,.0f}",
              f"{units.bytes_to_gib(c.memory_bytes):.1f}", f"{c.mfu:.1%}") for i, c in enumerate(rows, 1)]
    t = Table(title=title)
    for k, col in enumerate(_HEADERS):
        width = max([len(col), *(len(r[k]) for r in cells)])
        t.add_column(col, justify="left" if col in ("chip", "region", "strategy") else "right",
                     no_wrap=col != "strategy", min_width=16 if col == "strategy" else width,
                     overflow="fold")
    for r in cells:
        t.add_row(*r)
    return t


def render_search(result: SearchResult, console: Console, pareto: bool = False) -> None:
    console.print(_table(f"Top {len(result.ranked)} strategies by {result.objective}", result.ranked))
    if pareto:
        console.print(_table("Pareto front: run time x cost x CO2e", result.pareto))
    console.print(f"{result.num_feasible:,} of {result.num_candidates:,} candidates feasible, "
                  f"searched in {result.search_time_s:.2f} s")
    for note in result.notes:
        console.print(f"note: {note}")
