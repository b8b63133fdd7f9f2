"""Regenerate country_codes.csv: ISO 3166-1 alpha-2 codes of the country zones of grid_intensity.csv (run by
hand, never at import), so that a region may be given as ``fr`` as well as ``FRA``.

    pip install pycountry==26.2.16
    python src/greentrain/footprint/data/make_country_codes.py > country_codes.csv.new

Zones without an ISO 3166-1 entry (OWID aggregates such as Kosovo's XKX) are left out.
"""

from __future__ import annotations

import csv
import sys
from importlib import resources

import pycountry  # type: ignore[import-not-found, unused-ignore]

SOURCE = f"ISO 3166-1 via pycountry {pycountry.__version__ if hasattr(pycountry, '__version__') else '26.2.16'}"


def main() -> None:
    text = resources.files("greentrain.footprint").joinpath("data", "grid_intensity.csv").read_text("utf-8")
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["alpha_2", "alpha_3", "source"])
    for row in csv.DictReader(text.splitlines()):
        if row["kind"] != "country":
            continue
        country = pycountry.countries.get(alpha_3=row["zone"])
        if country is not None:
            out.writerow([country.alpha_2, row["zone"], SOURCE])


if __name__ == "__main__":
    main()
