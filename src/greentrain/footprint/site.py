"""Site: where a run happens. Grid carbon intensity, PUE, electricity price (SI units inside)."""

from __future__ import annotations

from dataclasses import dataclass

from greentrain import units
from greentrain.config import require

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

    def __post_init__(self) -> None:
        require(self.carbon_intensity_kg_co2e_per_j >= 0, "site.grid_g_co2e_per_kwh",
                units.kg_per_j_to_g_per_kwh(self.carbon_intensity_kg_co2e_per_j), "must be >= 0")
        require(self.pue >= 1.0, "site.pue", self.pue, "must be >= 1 (facility energy / IT energy)")
        require(self.electricity_usd_per_j >= 0, "site.electricity_usd_per_kwh",
                self.electricity_usd_per_j * units.KWH_J, "must be >= 0")

    @property
    def grid_g_co2e_per_kwh(self) -> float:
        return units.kg_per_j_to_g_per_kwh(self.carbon_intensity_kg_co2e_per_j)

    @classmethod
    def from_intensity(cls, grid_g_co2e_per_kwh: float, pue: float = DEFAULT_PUE, region: str = "",
                       electricity_usd_per_kwh: float = 0.0, source: str = "") -> Site:
        require(grid_g_co2e_per_kwh >= 0, "grid_g_co2e_per_kwh", grid_g_co2e_per_kwh, "must be >= 0")
        intensity = units.g_per_kwh_to_kg_per_j(grid_g_co2e_per_kwh)
        return cls(region=region, carbon_intensity_kg_co2e_per_j=intensity, pue=pue,
                   electricity_usd_per_j=units.usd_per_kwh_to_usd_per_j(electricity_usd_per_kwh),
                   source=source)
