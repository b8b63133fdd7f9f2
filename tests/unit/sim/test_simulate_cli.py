"""`greentrain simulate swarm`: outputs, and a one-line error with exit 2 for each kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli.main import main

GOOD = """devices:
  - name: gpu
    count: 2
    tflop_per_s: 100
    ingress_gbit_per_s: 10
    egress_gbit_per_s: 10
    latency_ms: 1
  - name: laptop
    flop_per_s: 2e13
    ingress_mb_per_s: 100
    egress_mb_per_s: 50
    failure_probability: 0.01
    rejoin_s: 1
    slowdown: 1.5
"""
MODEL = """name: small
num_layers: 2
hidden_size: 512
num_heads: 8
ffn_hidden_size: 2048
vocab_size: 1000
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "devices.yaml").write_text(GOOD)
    (tmp_path / "small.yaml").write_text(MODEL)
    return tmp_path


def swarm(files: Path, *extra: str, devices: str = "devices.yaml") -> list[str]:
    return ["simulate", "swarm", "--devices", str(files / devices), "--model", str(files / "small.yaml"),
            "--batch-tokens", "256", *extra]


def test_json_has_round_times_and_total(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(swarm(files, "--rounds", "3", "--json", "--scheduler", "bandwidth")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["round_times_s"]) == 3
    assert doc["total_time_s"] == pytest.approx(sum(doc["round_times_s"]))
    r0 = doc["rounds"][0]
    assert {"bytes_moved", "achieved_flop_per_s", "swarm_flop_per_s", "utilization"} <= set(r0)
    shares = r0["devices"][0]
    total = sum(shares[f"{k}_share"] for k in ("ingress", "compute", "egress", "idle"))
    assert total == pytest.approx(1.0)


def test_table_trace_and_gantt(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, gantt = files / "t.json", files / "g.png"
    assert main(swarm(files, "--trace", str(trace), "--gantt", str(gantt))) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"greentrain: wrote {trace}", f"greentrain: wrote {gantt}"]
    assert "Rounds" in out and "laptop" in out
    doc = json.loads(trace.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"gpu-0", "gpu-1", "laptop", "gpu-0.ingress", "laptop.egress"} <= names
    assert gantt.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_step_says_which_files_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate step --trace/--gantt` names each file it wrote, one line each on stderr (stdout stays the
    JSON)."""
    trace, gantt = tmp_path / "t.json", tmp_path / "g.png"
    assert main(["simulate", "step", "--pp", "4", "--tp", "8", "--dp", "2", "--trace", str(trace), "--gantt",
                 str(gantt), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["step_time_s"] > 0
    assert err.splitlines() == [f"greentrain: wrote {trace}", f"greentrain: wrote {gantt}"]
    assert trace.stat().st_size > 0 and gantt.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BAD_DEVICES = {
    "zero_rate": ("tflop_per_s: 100", "tflop_per_s: 0", "must be > 0"),
    "negative_bandwidth": ("ingress_gbit_per_s: 10", "ingress_gbit_per_s: -10", "must be > 0"),
    "unknown_key": ("latency_ms: 1", "latencyms: 1", "unknown key; did you mean latency_ms"),
    "two_rate_keys": ("tflop_per_s: 100", "tflop_per_s: 100\n    flop_per_s: 1e14", "exactly one of"),
    "no_egress": ("    egress_gbit_per_s: 10\n", "", "exactly one of egress_mb_per_s"),
    "malformed_yaml": ("count: 2", "count: [2", "malformed YAML"),
    "bad_count": ("count: 2", "count: 0", "must be >= 1"),
    "sure_failure": ("failure_probability: 0.01", "failure_probability: 1", "must be < 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_DEVICES))
def test_bad_devices_yaml_is_one_line_exit_2(case: str, files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new, message = BAD_DEVICES[case]
    assert old in GOOD
    (files / "bad.yaml").write_text(GOOD.replace(old, new, 1))
    assert main(swarm(files, devices="bad.yaml")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "message"), [
    (["--scheduler", "fifo"], "unknown scheduler"),
    (["--min-tp-size", "100000"], "cannot be tiled"),
    (["--min-tp-size", "0"], "argument --min-tp-size: '0' must be a positive integer"),
    (["--rounds", "0"], "argument --rounds: '0' must be a positive integer"),
    (["--seq-len", "0"], "argument --seq-len: '0' must be a positive integer"),
    (["--batch-tokens", "inf"], "argument --batch-tokens: 'inf' must be a finite integer"),
    (["--precision", "int4"], "must be one of"),
    (["--seq-len", "100"], "must divide batch_tokens"),
    (["--trace", "/no/such/dir/t.json"], "directory does not exist"),
    (["--gantt", "chart.svg"], "must end in .png"),
])
def test_bad_options_are_one_line_exit_2(args: list[str], message: str, files: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(swarm(files, *args)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_devices_file_must_list_devices(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "empty.yaml").write_text("devices: []\n")
    assert main(swarm(files, devices="empty.yaml")) == 2
    assert "non-empty list" in capsys.readouterr().err


def test_binary_devices_file_and_too_long_sequence(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "some.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    assert main(swarm(files, devices="some.png")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a UTF-8 text file" in err
    (files / "learned.yaml").write_text(MODEL + "max_position_embeddings: 128\n")
    argv = ["simulate", "swarm", "--devices", str(files / "devices.yaml"), "--model", str(files / "learned.yaml"),
            "--batch-tokens", "256"]
    assert main(argv) == 2  # one 256-token sequence past a 128-row position table
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--batch-tokens=256: must be <= 128" in err
    assert main([*argv, "--seq-len", "128"]) == 0
