"""`greentrain footprint`: outputs, JSON input, and one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from greentrain.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["footprint", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--chip", "a100-80gb", "--num-chips", "8", "--hours", "10", "--region", "FRA",
                      "--json")
    assert rc == 0
    d = json.loads(out)
    for key in ("energy_kwh", "emissions_kg_co2e", "operational_kg_co2e", "embodied_kg_co2e", "cost_usd",
                "device_hours"):
        assert key in d
    assert d["device_hours"] == pytest.approx(80.0)
    assert d["emissions_kg_co2e"] == pytest.approx(d["operational_kg_co2e"] + d["embodied_kg_co2e"])


def test_table_and_power_without_chip(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--power-w", "300", "--num-chips", "2", "--days", "1",
                      "--grid-g-per-kwh", "500")
    assert rc == 0
    assert "operational CO2e" in out and "embodied carbon not counted: no chip given" in out


def test_compare_and_model_card(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--chip", "h100", "--num-chips", "8", "--hours", "5", "--compare-regions",
                      "us-east-1,europe-north1", "--json")
    assert rc == 0
    assert [r["region"] for r in json.loads(out)["regions"]] == ["europe-north1", "us-east-1"]
    rc, out, _ = _run(capsys, "--chip", "h100", "--num-chips", "8", "--hours", "5", "--region", "us-west1",
                      "--model-card")
    assert rc == 0
    block = yaml.safe_load(out)["co2_eq_emissions"]
    assert set(block) == {"emissions", "source", "training_type", "geographical_location", "hardware_used"}


def test_from_plan_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"num_chips": 16, "chip": "h100-sxm", "run_time_s": 7200, "mfu": 0.4,
                                "region": "us-east-1", "device_hours": 32}))
    rc, out, _ = _run(capsys, str(plan), "--json")
    assert rc == 0
    assert json.loads(out)["device_hours"] == pytest.approx(32.0)
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"chip": "h100-sxm", "run_time_s": 10}))
    rc, _, err = _run(capsys, str(missing))
    assert rc == 2 and "num_chips" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, needle", [
    (["--chip", "h100", "--num-chips", "8", "--hours", "1", "--region", "us-east-l"], "did you mean"),
    (["--chip", "h100", "--num-chips", "8", "--hours", "-2", "--region", "FRA"], "--hours"),
    (["--chip", "h100", "--num-chips", "8", "--days", "0", "--region", "FRA"], "'0' must be > 0"),
    (["--chip", "h100", "--num-chips", "8", "--hours", "1", "--region", "FRA", "--utilization", "1.2"],
     "--utilization"),
    (["--chip", "h100", "--num-chips", "8", "--hours", "1", "--region", "FRA", "--pue", "0.9"], "--pue"),
    (["--num-chips", "8", "--hours", "1", "--region", "FRA"], "--chip"),
    (["--chip", "h100", "--num-chips", "8", "--hours", "1"], "--region"),
])
def test_bad_input_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    rc, out, err = _run(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert needle in err and err.count("\n") == 1


def test_chip_without_tdp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chip = tmp_path / "mychip.yaml"
    chip.write_text("memory_gib: 16\nmemory_bandwidth_gb_per_s: 500\nbf16_tflop_per_s: 100\n")
    rc, _, err = _run(capsys, "--chip", str(chip), "--num-chips", "1", "--hours", "1", "--region", "FRA")
    assert rc == 2 and "tdp_w" in err and err.count("\n") == 1


BASE = ["--chip", "h100", "--num-chips", "8", "--hours", "24", "--region", "us-east-1"]


@pytest.mark.parametrize("argv, needle", [
    ([*BASE, "--power-w", "5000"], "--power-w=5000.0: must be <= 1050 W (1.5 x the h100-sxm TDP of 700 W)"),
    ([*BASE, "--power-w", "nan"], "argument --power-w: 'nan' must be a finite number"),
    ([*BASE, "--power-w", "-1"], "argument --power-w: '-1' must be in [0, 100,000] W"),
    (["--num-chips", "8", "--hours", "inf", "--power-w", "300", "--grid-g-per-kwh", "400"],
     "argument --hours: 'inf' must be a finite number"),
    (["--chip", "h100", "--num-chips", "8", "--days", "inf", "--region", "FRA"], "argument --days: 'inf'"),
    (["--chip", "h100", "--num-chips", "inf", "--days", "1", "--region", "FRA"], "argument --num-chips: 'inf'"),
    ([*BASE, "--price-usd-per-hour", "2", "--hardware-usd-per-chip", "30000"],
     "argument --hardware-usd-per-chip: not allowed with argument --price-usd-per-hour"),
    ([*BASE, "--market", "on-demand", "--spot"], "--market='on-demand': conflicts with --spot"),
    ([*BASE, "--power-w", "300", "--utilization", "0.5"],
     "argument --utilization: not allowed with argument --power-w"),
    ([*BASE, "--model-card", "--json"], "argument --json: not allowed with argument --model-card"),
    (["--chip", "h100", "--num-chips", "8", "--hours", "2", "--compare-regions", "us-east-1,,FRA"],
     "--compare-regions='us-east-1,,FRA': must be a comma-separated list of names, none of them empty"),
    (["--chip", "h100", "--num-chips", "8", "--hours", "2", "--compare-regions", "us-east-1,"], "none of them empty"),
    ([*BASE, "--compare-regions", "FRA,DEU"], "--region='us-east-1': conflicts with --compare-regions"),
])
def test_audit_bad_input(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_binary_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "some.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    for argv, needle in (([str(png)], "run_json="), ([*BASE, "--intensity-csv", str(png)], "intensity_csv="),
                         ([str(tmp_path)], "is a directory")):
        rc, out, err = _run(capsys, *argv)
        assert rc == 2 and out == "" and needle in err and err.count("\n") == 1


def test_power_within_the_margin_and_utilization_flag_replaces_file_power(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _out, _ = _run(capsys, *BASE, "--power-w", "1000", "--json")  # 1.43 x TDP: within the 1.5 x margin
    assert rc == 0
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"num_chips": 8, "chip": "h100-sxm", "run_time_s": 3600, "power_w_per_chip": 650,
                               "region": "FRA"}))
    _, measured, _ = _run(capsys, str(run), "--json")
    rc, idle, _ = _run(capsys, str(run), "--utilization", "0", "--json")
    assert rc == 0
    assert json.loads(idle)["energy_kwh"] < json.loads(measured)["energy_kwh"]  # the flag was not ignored
