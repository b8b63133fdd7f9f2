"""Sharding specs, policy derivation, predicted statistics and bad input of `greentrain emulate` (no ranks)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from greentrain.cli.main import main
from greentrain.emulate.cases import FfnCase, MatMulCase, MatMulPolicy, PipelineCase, derive_policy, parse_policy
from greentrain.emulate.predict import predict
from greentrain.emulate.sharding import DimSharding, Mesh2D, TensorSharding
from greentrain.errors import ConfigError

MESH = Mesh2D(x_size=2, y_size=4)


def ts(text: str) -> TensorSharding:
    return TensorSharding.parse(text, "t")


def test_shard_index_and_group_follow_the_seed_formulas():
    # seed shard_tensor: (x % xs)·ys + (y % ys); get_dim_sharding_group: (x // xs, y // ys)
    d = DimSharding(x_shards=1, y_shards=4)
    assert [d.shard_index(MESH, r) for r in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert d.group_ranks(MESH, 5) == (4, 5, 6, 7)
    col = DimSharding(x_shards=2, y_shards=1)
    assert col.group_ranks(MESH, 6) == (2, 6) and col.shard_index(MESH, 6) == 1
    half = DimSharding(x_shards=1, y_shards=2)
    assert half.all_groups(MESH) == ((0, 1), (2, 3), (4, 5), (6, 7))
    both = DimSharding(x_shards=2, y_shards=4)
    assert [both.shard_index(MESH, r) for r in range(8)] == list(range(8))
    assert ts("2x1,1x4").local_slices(MESH, (8, 16), 6) == (slice(4, 8), slice(8, 12))


@pytest.mark.parametrize(("a", "b", "c", "policy"), [
    # the seed's test cases (seed-systems.md §3.8)
    ("1x1,1x1", "1x1,1x1", "1x1,1x1", MatMulPolicy.UNSHARDED),
    ("1x1,1x4", "1x4,1x1", "1x1,1x1", MatMulPolicy.MATCHED_INNER),
    ("1x1,2x1", "2x1,1x1", "1x1,1x1", MatMulPolicy.MATCHED_INNER),
    ("1x1,2x4", "2x4,1x1", "1x1,1x1", MatMulPolicy.MATCHED_INNER),
    ("1x1,1x4", "2x1,1x1", "1x1,1x1", MatMulPolicy.UNMATCHED_INNER),
    ("2x1,1x4", "2x1,1x1", "1x1,1x1", MatMulPolicy.OUTER),
    ("2x1,1x4", "2x1,1x4", "1x1,1x1", MatMulPolicy.FULL),
    # inner shardings with C sharded fall through to outer/full, as in the seed
    ("1x1,1x4", "1x4,1x1", "2x1,1x1", MatMulPolicy.OUTER),
])
def test_policy_derivation_matches_seed(a, b, c, policy):
    assert derive_policy(ts(a), ts(b), ts(c)) is policy
    case = MatMulCase(mesh=MESH, m=64, k=64, n=64, a=ts(a), b=ts(b), c=ts(c), policy=policy)
    assert case.derived_policy is policy


def test_seed_example_matched_inner_statistics():
    # seed-systems.md §3.8: matched (1,4) on 2x4 "gives 2 rows × 4·3 messages = 24 messages of 4096·4096·4 B each"
    case = MatMulCase(mesh=MESH, m=4096, k=2048, n=4096, a=ts("1x1,1x4"), b=ts("1x4,1x1"), c=ts("1x1,1x1"))
    stats = predict(case)
    assert stats.d2d_messages == 24
    assert stats.d2d_bytes == 24 * 4096 * 4096 * 4
    assert stats.flops == 8 * 2 * 4096 * (2048 // 4) * 4096
    # ring all-reduce: 2 (g-1)/g of the buffer per rank (estimate.comm), 8 ranks
    assert stats.ring_bytes == 8 * 2 * 3 / 4 * 4096 * 4096 * 4


def test_flops_do_not_depend_on_sharding_except_duplication():
    kw = {"mesh": MESH, "m": 64, "k": 128, "n": 64, "c": ts("1x1,1x1")}
    full_work = 2 * 64 * 128 * 64
    matched = predict(MatMulCase(a=ts("1x1,2x4"), b=ts("2x4,1x1"), **kw))
    fully = predict(MatMulCase(a=ts("2x1,1x4"), b=ts("2x1,1x4"), **kw))
    assert matched.flops == fully.flops == full_work  # no duplicated work
    assert predict(MatMulCase(a=ts("1x1,1x1"), b=ts("1x1,1x1"), **kw)).flops == 8 * full_work


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"a": "1x1,1x3"}, "a"),  # 3 does not divide the 4-wide mesh axis
    ({"a": "1x1,1x4", "b": "1x4,1x1", "m": 64, "k": 6}, "a"),  # k=6 not divisible by 4
    ({"a": "1x4"}, "a"),  # one dim for a 2-D tensor
    ({"a": "1x4,1x4"}, "a"),  # mesh axis y shards two dims
    ({"a": "2x1,1x4", "b": "2x1,2x1"}, "b"),  # full sharding with m and n on the same axis: blocks missing
])
def test_bad_matmul_shardings(kwargs, field):
    spec = {"a": "1x1,1x1", "b": "1x1,1x1", "c": "1x1,1x1", "m": 64, "k": 64, "n": 64, **kwargs}
    with pytest.raises(ConfigError) as e:
        MatMulCase(mesh=MESH, m=spec["m"], k=spec["k"], n=spec["n"], a=ts(spec["a"]), b=ts(spec["b"]),
                   c=ts(spec["c"]))
    assert e.value.field == field


@pytest.mark.parametrize("text", ["", "1x", "x4", "1x4,", "1*4", "0x4", "a,b"])
def test_malformed_sharding(text):
    with pytest.raises(ConfigError):
        TensorSharding.parse(text, "a")


def test_policy_mismatch_and_unknown_policy():
    with pytest.raises(ConfigError, match="give matched_inner"):
        MatMulCase(mesh=MESH, m=8, k=8, n=8, a=ts("1x1,1x4"), b=ts("1x4,1x1"), c=ts("1x1,1x1"),
                   policy=MatMulPolicy.FULL)
    with pytest.raises(ConfigError, match="did you mean"):
        parse_policy("outter")


def test_ffn_and_pipeline_validation():
    with pytest.raises(ConfigError, match="batch"):
        FfnCase(mesh=MESH, batch=3, seq=4, d_model=16, d_ff=16)
    FfnCase(mesh=MESH, batch=3, seq=4, d_model=16, d_ff=16, gspmd=False)  # unsharded: anything goes
    with pytest.raises(ConfigError, match="micro-batches"):
        PipelineCase(units=(4, 4), micro_batches=3, batch=8)
    with pytest.raises(ConfigError, match="units"):
        PipelineCase(units=(4,), micro_batches=1, batch=8)


@pytest.mark.parametrize("argv", [
    ["matmul", "--mesh", "2x4", "--a", "1x1,1x3"],
    ["matmul", "--mesh", "2by4"],
    ["matmul", "--a", "1x1,1x4", "--b", "1x4,1x1", "--policy", "full"],
    ["matmul", "--m", "0"],
    ["ffn", "--batch", "3"],
    ["pipeline", "--units", "256,,256"],
    ["pipeline", "--stages", "3"],
    ["matmul", "--timeout-s", "0"],
    ["matmul", "--mesh", "64x64", "--m", "64", "--k", "64", "--n", "64"],  # 4,096 local processes
])
def test_cli_bad_input_is_one_line_exit_2(argv, capsys):
    assert main(["emulate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("greentrain emulate: error:")


def test_emulate_cases_import_without_torch():
    code = ("import sys, greentrain.emulate, greentrain.emulate.predict, greentrain.cli.emulate; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
