"""`greentrain plan`: the default scenario, JSON keys, and one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.cli.main import main

KEYS = ("step_time_s", "tokens_per_s", "mfu", "hfu", "memory_bytes_per_device", "run_time_s", "device_hours",
        "energy_kwh", "cost_usd", "emissions_kg_co2e")


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_default_scenario_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _plan(capsys, "--json")
    assert code == 0
    d = json.loads(out)
    for k in KEYS:
        assert k in d
    assert d["model"] == "llama3-8b" and d["num_chips"] == 64
    assert d["strategy"]["chosen_by_planner"] is True
    mem = d["memory_bytes_per_device"]
    parts = mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"] + mem["reserved"]
    assert mem["total"] == pytest.approx(parts)
    assert mem["total"] <= mem["capacity"]
    assert 0 < d["mfu"] <= d["hfu"] < 1
    assert d["run_time_s"] == pytest.approx(d["step_time_s"] * d["num_steps"])


def test_default_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _plan(capsys)
    assert code == 0 and "MFU" in out and "memory per device" in out


def test_explicit_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _plan(capsys, "--model", "gpt3-175b", "--chip", "a100-80gb", "--num-chips", "64",
                         "--tp", "8", "--pp", "8", "--vpp", "3", "--global-batch", "64", "--seq-len", "2048",
                         "--recompute", "selective", "--no-flash-attention", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["strategy"]["dp"] == 1 and d["strategy"]["sp"] is True
    assert d["step_time_s"] == pytest.approx(13.75, rel=0.05)  # Korthikanti et al. 2022 Table 5


@pytest.mark.parametrize(("args", "needle"), [
    (["--model", "llama3-8"], "did you mean"),
    (["--chip", "h1000"], "did you mean"),
    (["--num-chips", "24", "--tp", "3"], "num_heads"),
    (["--num-chips", "64", "--tp", "8", "--pp", "2", "--dp", "2"], "!= num_chips"),
    (["--global-batch", "0"], "positive integer"),
    (["--seq-len", "-5"], "positive integer"),
    (["--pue", "0.5"], "pue"),
    (["--region", "atlantis"], "region"),
    (["--model", "gpt3-175b", "--num-chips", "8", "--tp", "8", "--recompute", "none"], "does not fit"),
])
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    code, out, err = _plan(capsys, *args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == ""


def test_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_yaml = tmp_path / "s.yaml"
    bad_yaml.write_text("model: [llama3-8b\n")
    unknown_key = tmp_path / "u.yaml"
    unknown_key.write_text("model: llama3-8b\nworkload: {global_batch_size: 8, seq_len: 128, sequence_len: 3}\n")
    bad_json = tmp_path / "config.json"
    bad_json.write_text('{"model_type": "llama", "hidden_size": ')
    for args, needle in ((["plan", str(bad_yaml)], "malformed YAML"),
                         (["plan", str(unknown_key)], "did you mean seq_len"),
                         (["plan", "--model", str(bad_json)], "malformed JSON")):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1


def test_scenario_file_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("model: megatron-22b\ncluster: {chip: a100-80gb, num_chips: 8}\n"
                 "strategy: {tp: 8, sp: true, recompute: selective, micro_batch_size: 4, flash_attention: false}\n"
                 "workload: {global_batch_size: 4, seq_len: 2048, num_steps: 10}\n"
                 "site: {grid_g_co2e_per_kwh: 400, pue: 1.1}\n")
    code, out, _ = _plan(capsys, str(f), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["num_steps"] == 10 and d["grid_g_co2e_per_kwh"] == pytest.approx(400)
    assert d["step_time_s"] == pytest.approx(1.10, rel=0.05)  # Korthikanti et al. 2022 Table 5


def test_cli_process_exit_status() -> None:
    r = subprocess.run([sys.executable, "-m", "greentrain.cli.main", "plan", "--chip", "nope"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "unknown chip" in r.stderr
