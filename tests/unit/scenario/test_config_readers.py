"""config.py readers and the CLI's argparse types: every kind of bad input is one ConfigError naming it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from greentrain.cli import argtypes
from greentrain.config import as_float, as_int, load_mapping, read_text, split_list
from greentrain.errors import ConfigError

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


def test_read_text_directory_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        read_text(tmp_path, "scenario")
    with pytest.raises(ConfigError, match="file does not exist"):
        read_text(tmp_path / "nope.yaml")
    png = tmp_path / "some.png"
    png.write_bytes(PNG)
    with pytest.raises(ConfigError, match=r"^model='.*some.png': is not a UTF-8 text file \(byte 0x89 at offset 0\)$"):
        read_text(png, "model")
    with pytest.raises(ConfigError, match="is not a UTF-8 text file"):
        load_mapping(png)


@pytest.mark.parametrize(("name", "text", "key"), [
    ("top.yaml", "seq_len: 1\nmodel: x\nseq_len: 2\n", "seq_len"),
    ("nested.yaml", "workload: {seq_len: 1, seq_len: 2}\n", "seq_len"),
    ("block.yaml", "site:\n  pue: 1.1\n  region: FRA\n  pue: 1.3\n", "pue"),
    ("dup.json", '{"cluster": {"num_chips": 8, "num_chips": 16}}', "num_chips"),
])
def test_duplicate_keys_are_refused(tmp_path: Path, name: str, text: str, key: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"duplicate key '{key}'") as e:
        load_mapping(path)
    assert "\n" not in str(e.value)


def test_merge_keys_and_distinct_keys_still_load(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n")
    assert load_mapping(path) == {"base": {"x": 1, "y": 2}, "c": {"x": 3, "y": 2}}
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"a": {"b": 1}, "b": 2}))
    assert load_mapping(path) == {"a": {"b": 1}, "b": 2}


@pytest.mark.parametrize("text", ["", " ", "us-east-1,", ",FRA", "us-east-1,,FRA", "a, ,b"])
def test_split_list_refuses_empty_items(text: str) -> None:
    with pytest.raises(ConfigError, match="none of them empty"):
        split_list(text, "--compare-regions")


def test_split_list_strips() -> None:
    assert split_list(" us-east-1 , FRA", "--region") == ["us-east-1", "FRA"]


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "inf", "nan", "1e400"])
def test_numbers_must_be_finite(value: object) -> None:
    with pytest.raises(ConfigError, match="finite"):
        as_float(value, "workload.train_tokens")
    with pytest.raises(ConfigError):
        as_int(value, "workload.num_steps")


def test_integer_beyond_float_range() -> None:
    with pytest.raises(ConfigError, match="must be finite"):
        as_float(10**400, "workload.train_tokens")  # float() raises OverflowError


@pytest.mark.parametrize(("func", "text"), [
    (argtypes.finite_float, "inf"), (argtypes.finite_float, "nan"), (argtypes.finite_float, "-inf"),
    (argtypes.finite_float, "x"), (argtypes.nonneg_float, "-1"), (argtypes.positive_float, "0"),
    (argtypes.positive_int, "inf"), (argtypes.positive_int, "0"), (argtypes.positive_int, "1.5"),
    (argtypes.positive_int, "nan"), (argtypes.nonneg_int, "-1"), (argtypes.whole, "ten"),
])
def test_argtypes_refuse(func: object, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        func(text)  # type: ignore[operator]


def test_argtypes_accept() -> None:
    assert argtypes.positive_int("1e6") == 1_000_000
    assert argtypes.positive_int("64.0") == 64
    assert argtypes.whole("123456789012345678901") == 123456789012345678901  # no float rounding
    assert argtypes.nonneg_float("0") == 0.0
    assert argtypes.finite_float("-2.5") == -2.5
