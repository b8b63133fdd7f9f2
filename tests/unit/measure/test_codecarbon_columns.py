"""Issue 16 item 8: emissions.csv columns carry CodeCarbon's meanings (codecarbon docs/output: "country_iso_code:
3-letter alphabet ISO Code of the respective country", "region: Province/State/City where the compute
infrastructure is hosted", "on_cloud: Y if on cloud, N for private infrastructure", "cloud_provider: one of
aws/azure/gcp", "cloud_region: e.g. us-east-2 for aws", "cpu_model: e.g. Intel(R) Core(TM) i7-1065G7 CPU @
1.30GHz", "energy_consumed: sum of cpu_energy, gpu_energy and ram_energy (kWh)"), and every energy figure says
whether it is predicted or measured."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import greentrain
from greentrain.cli.main import main
from greentrain.measure.meters import cpu_model_name


def _row(tmp_path: Path, **site: Any) -> dict[str, str]:
    with greentrain.Tracker(out_dir=tmp_path, print_summary=False, **site):
        time.sleep(0.2)
    return next(csv.DictReader((tmp_path / "emissions.csv").open()))


def test_a_country(tmp_path: Path) -> None:
    row = _row(tmp_path, region="DEU")
    assert (row["country_name"], row["country_iso_code"], row["region"]) == ("Germany", "DEU", "")
    assert (row["on_cloud"], row["cloud_provider"], row["cloud_region"]) == ("N", "", "")


def test_a_cloud_region(tmp_path: Path) -> None:
    row = _row(tmp_path, region="us-east-1")
    assert (row["on_cloud"], row["cloud_provider"], row["cloud_region"]) == ("Y", "aws", "us-east-1")
    assert (row["country_name"], row["country_iso_code"], row["region"]) == ("United States", "USA", "virginia")


def test_a_given_intensity_claims_no_location(tmp_path: Path) -> None:
    row = _row(tmp_path, grid_g_per_kwh=300.0)
    assert all(row[c] == "" for c in ("country_name", "country_iso_code", "region", "cloud_provider",
                                       "cloud_region", "on_cloud"))


def test_hardware_and_energy_columns(tmp_path: Path) -> None:
    row = _row(tmp_path, grid_g_per_kwh=300.0, pue=1.5)
    assert row["cpu_model"] == cpu_model_name() and not row["cpu_model"].startswith("estimate")
    assert row["gpu_model"] == "" and row["gpu_count"] == "0"  # no GPU measured here
    parts = sum(float(row[c]) for c in ("cpu_energy", "gpu_energy", "ram_energy"))
    assert float(row["energy_consumed"]) == pytest.approx(parts, rel=1e-9) and float(row["pue"]) == 1.5
    assert float(row["emissions_rate"]) == pytest.approx(float(row["emissions"]) / float(row["duration"]))
    card = yaml.safe_load((tmp_path / "model_card_co2.yaml").read_text())["co2_eq_emissions"]
    assert card["hardware_used"] == cpu_model_name() and "estimated" in card["source"]


def test_footprint_of_a_plan_is_predicted_not_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = {"model": "llama3-8b", "chip": "h100-sxm", "num_chips": 64, "step_time_s": 6.0, "mfu": 0.4,
            "run_time_s": 3600.0, "power_w_per_chip": 650.0, "region": "us-east-1", "pue": 1.15}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["footprint", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["power_measured"] is False and out["energy_basis"] == "predicted"
    assert main(["footprint", str(path), "--power-w", "600", "--json"]) == 0  # a measured power replaces it
    assert json.loads(capsys.readouterr().out)["energy_basis"] == "measured"
