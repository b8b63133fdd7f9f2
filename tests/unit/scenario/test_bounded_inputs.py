"""Issue 16 items 10 and 11: input files, alias expansion, nesting, counts and run sizes are bounded; each
refusal is one line naming field, value and rule, exit status 2, in well under 2 s (docs/bad-input.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.config import MAX_INPUT_BYTES, load_mapping
from greentrain.errors import ConfigError, shorten

DEVICE = """  - name: {name}
    count: {count}
    tflop_per_s: 100
    ingress_gbit_per_s: {ingress}
    egress_gbit_per_s: 10
"""
MODEL = "name: small\nnum_layers: 2\nhidden_size: 512\nnum_heads: 8\nffn_hidden_size: 2048\nvocab_size: 1000\n"


def _laughs(levels: int = 9) -> str:
    """The "billion laughs": 9 levels of 9 aliases expand to 9**9 strings from ~500 bytes."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _merge_bomb(levels: int = 40) -> str:
    """Merge keys: PyYAML's constructor copies merged entries, doubling at each level."""
    lines = ["m0: &m0 {x: 1}"]
    lines += [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], y{i}: 1}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str], text: str) -> str:
    t0 = time.perf_counter()
    assert main(argv) == 2
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400 and text in err, err[:500]
    assert elapsed < 20.0, f"{elapsed:.2f} s"  # a hang guard (an unguarded bomb takes minutes), not a speed test
    return err


@pytest.mark.parametrize("text, rule", [
    (_laughs(), "expands (through YAML aliases) to more than"),
    (_merge_bomb(), "expands (through YAML aliases) to more than"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "levels deep"),
    ("workload: {global_batch_size: &x [" + ",".join(["1"] * 5000) + "]}\n", "workload.global_batch_size"),
])
def test_scenario_bombs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                     rule: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    _one_line_exit_2(["plan", str(path)], capsys, rule)


def test_deep_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.json"
    path.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _one_line_exit_2(["plan", str(path)], capsys, "levels deep")


def test_oversized_file_is_refused_without_reading_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:  # sparse: 120 MB on paper, nothing on disk
        f.truncate(120 * 10**6)
    err = _one_line_exit_2(["plan", str(path)], capsys, f"input files are limited to {MAX_INPUT_BYTES // 2**20} MiB")
    assert "114.4 MiB" in err


def test_a_file_just_under_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: 1\n" + "#" * (MAX_INPUT_BYTES - 10) + "\n")
    assert load_mapping(path) == {"a": 1}


def test_normal_anchors_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {x: 1, y: [1, 2]}\nother: {<<: *b, z: 3}\nlist: [*b, *b]\n")
    assert load_mapping(path)["other"] == {"x": 1, "y": [1, 2], "z": 3}


def test_error_messages_shorten_what_they_quote() -> None:
    assert len(str(ConfigError("f", "x" * 10**6, "rule"))) < 200
    assert "1,000,000 chars" in shorten("x" * 10**6)
    nested: list[object] = ["lol"] * 9
    for _ in range(30):  # 9**30 leaves if repr walked them all
        nested = [nested] * 9
    assert len(str(ConfigError("f", nested, "rule"))) < 200


@pytest.mark.parametrize("count, ingress, rule", [
    ("1e9", "10", "count=1000000000: must be <= 10,000"),
    ("6000", "10", "must be <= 10,000 in a swarm"),  # two groups of 6,000
    ("1", "1e-300", "ingress_gbit_per_s=1e-300: must be between"),
    ("1", "1e30", "ingress_gbit_per_s=1e+30: must be between"),
])
def test_swarm_counts_and_rates_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], count: str,
                                           ingress: str, rule: str) -> None:
    (tmp_path / "small.yaml").write_text(MODEL)
    devices = "devices:\n" + "".join(DEVICE.format(name=n, count=count, ingress=ingress) for n in ("a", "b"))
    (tmp_path / "devices.yaml").write_text(devices)
    _one_line_exit_2(["simulate", "swarm", "--devices", str(tmp_path / "devices.yaml"), "--model",
                      str(tmp_path / "small.yaml"), "--batch-tokens", "256"], capsys, rule)


@pytest.mark.parametrize("argv, rule", [
    (["plan", "--tokens", "1e40"], "workload.train_tokens=1e+40: must be <= 1e+16"),
    (["plan", "--steps", "1e15"], "workload.num_steps"),
    (["traffic", "--dataset_size", "1e40", "--num_layers", "2", "--d_model", "64"], "dataset_size=1e+40"),
    (["traffic", "--dataset_size", "1e9", "--num_layers", "10000000000", "--d_model", "64"], "num_layers"),
    (["batch-time", "--n_layers", "2", "--d_model", "64", "--dataset_size", "1e40"], "dataset_size=1e+40"),
    (["batch-time", "--n_layers", "2", "--d_model", "64", "--v2", "--network_bandwidth", "1e-300"],
     "network_bandwidth=1e-300"),
])
def test_absurd_run_sizes_are_refused(argv: list[str], rule: str, capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_exit_2(argv, capsys, rule)
