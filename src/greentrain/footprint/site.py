"""Site: where a run happens. Grid carbon intensity, PUE, electricity price (SI units inside)."""

from __future__ import annotations

from dataclasses import dataclass

from greentrain import units
from greentrain.config import BOUNDS

# Uptime Institute Global Data Center Survey 2024: average annual PUE 1.56 at respondents' largest data
# center (2022: 1.55, 2023: 1.58). Used for an unknown operator; data/pue.csv carries the same row.
DEFAULT_PUE = 1.56


@dataclass(frozen=True, slots=True, kw_only=True)
class Site:
    region: str = ""  # a region code, or "" when the intensity was given directly
    carbon_intensity_kg_co2e_per_j: float = 0.0
    pue: float = DEFAULT_PUE
    electricity_usd_per_j: float = 0.0  # 0: unknown
    source: str = ""

    def __post_init__(self) -> None:  # ranges and their reasons: config.BOUNDS (docs/bad-input.md)
        BOUNDS["grid_g_co2e_per_kwh"].check(units.kg_per_j_to_g_per_kwh(self.carbon_intensity_kg_co2e_per_j),
                                            "site.grid_g_co2e_per_kwh")
        BOUNDS["pue"].check(self.pue, "site.pue")
        BOUNDS["electricity_usd_per_kwh"].check(self.electricity_usd_per_j * units.KWH_J,
                                                "site.electricity_usd_per_kwh")

    @property
    def grid_g_co2e_per_kwh(self) -> float:
        return units.kg_per_j_to_g_per_kwh(self.carbon_intensity_kg_co2e_per_j)

    @classmethod
    def from_intensity(cls, grid_g_co2e_per_kwh: float, pue: float = DEFAULT_PUE, region: str = "",
                       electricity_usd_per_kwh: float = 0.0, source: str = "") -> Site:
        BOUNDS["grid_g_co2e_per_kwh"].check(grid_g_co2e_per_kwh, "grid_g_co2e_per_kwh")
        intensity = units.g_per_kwh_to_kg_per_j(grid_g_co2e_per_kwh)
        return cls(region=region, carbon_intensity_kg_co2e_per_j=intensity, pue=pue,
                   electricity_usd_per_j=units.usd_per_kwh_to_usd_per_j(electricity_usd_per_kwh),
                   source=source)
