"""Regenerate grid_intensity.csv from CodeCarbon's bundled data (run by hand, never at import).

    pip download codecarbon==3.3.2 --no-deps -d /tmp/cc && unzip -q /tmp/cc/*.whl -d /tmp/cc/x
    python src/greentrain/footprint/data/make_grid_csv.py /tmp/cc/x/codecarbon/data > grid_intensity.csv.new

Countries: CodeCarbon 3.3.2 ``private_infra/global_energy_mix.json`` (field ``carbon_intensity``, g CO2e/kWh,
life-cycle factors; the file is Our World in Data's energy dataset, which takes it from Ember and the Energy
Institute). US states: CodeCarbon 3.3.2 ``private_infra/2023/usa_emissions.json`` = EPA eGRID2023 field
STC2ERTA (state annual CO2e total output emission rate, lb/MWh, combustion only), converted here.
Sub-national zones outside the US are appended by hand from Electricity Maps' 2024 yearly averages (EXTRA).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from greentrain import units

OWID = ("Our World in Data energy dataset (Ember, Energy Institute) via CodeCarbon 3.3.2 "
        "global_energy_mix.json")
EGRID = "EPA eGRID2023 STC2ERTA (state CO2e output rate, lb/MWh) via CodeCarbon 3.3.2 usa_emissions.json"
EMAPS = "Electricity Maps yearly average 2024 (life-cycle) via Green Web Foundation co2.js yearly_2024.json"

# Electricity Maps 2024 yearly averages (g CO2e/kWh) of zones where clouds have regions and the country figure
# would mislead (Quebec's hydro vs Alberta's gas).
EXTRA = [
    ("CA-QC", "Quebec (Canada)", "province", 35),
    ("CA-ON", "Ontario (Canada)", "province", 91),
    ("CA-AB", "Alberta (Canada)", "province", 402),
    ("CA-BC", "British Columbia (Canada)", "province", 71),
    ("AU-NSW", "New South Wales (Australia)", "state", 541),
    ("AU-VIC", "Victoria (Australia)", "state", 496),
]

FIELDS = ["zone", "name", "kind", "grid_g_co2e_per_kwh", "basis", "source", "year"]


def main(data_dir: Path) -> None:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(FIELDS)
    mix = json.loads((data_dir / "private_infra" / "global_energy_mix.json").read_text())
    for iso3, row in sorted(mix.items()):
        if row.get("carbon_intensity", 0) > 0:
            g = round(row["carbon_intensity"], 1)
            out.writerow([iso3, row["country_name"], "country", g, "life-cycle", OWID, row["year"]])
    usa = json.loads((data_dir / "private_infra" / "2023" / "usa_emissions.json").read_text())
    year = usa["_source"]["year"]
    for name, row in sorted(usa.items()):
        if name.startswith("_") or len(row.get("regionCode", "")) != 2:
            continue  # the national eGRID row: the country table already has USA
        g = units.lb_per_mwh_to_g_per_kwh(row["emissions"])
        out.writerow([f"US-{row['regionCode']}", f"{name.title()} (USA)", "state", round(g, 1), "combustion",
                      EGRID, year])
    for zone, name, kind, g in EXTRA:
        out.writerow([zone, name, kind, g, "life-cycle", EMAPS, 2024])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
