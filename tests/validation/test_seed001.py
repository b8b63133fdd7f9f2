"""Seed 001 (davidsj/ml_par_sim README, commit 520dcff): both examples reproduce digit for digit.

Tolerance: none; the printed text is compared line for line. The only difference allowed is the order of
the axes on the seed's `P:` line, which the seed printed from a Python set (its order varied between runs,
seed-systems.md §1.6): greentrain prints the fixed order DATA, PIPE, EXP, SEQ, TENSOR_INT, TENSOR_EXT.
"""

from __future__ import annotations

import shlex

import pytest

from greentrain.cli.main import main

TRAFFIC_CMD = (
    "--cluster_flop_rate 156e12 --num_experts 8 --batch_size 8192 --seq_len 8192 --dataset_size 13e12 "
    "--num_layers 120 --d_model 15360 --p_pipe 15 --p_data 16 --p_seq 1 --p_exp 8 --p_tensor_int 8 "
    "--p_tensor_ext 1"
)
TRAFFIC_README = """\
N: 2.267e+12 (2.834e+11 effective)
D: 1.300e+13
b: 8192 (microbatch size must be in [16, 32, 64, 128] to be efficient)
P: 15360 = {TENSOR_EXT: 1, DATA: 16, TENSOR_INT: 8, SEQ: 1, EXP: 8, PIPE: 15}


FULL TRAINING RUN COST
    Metric            Fwd            Bwd          Total
      FLOP      8.198e+24      1.640e+25      2.460e+25
        Tx      1.923e+20      2.308e+20      4.231e+20
        Rx      3.746e+20      3.746e+20      7.492e+20
       net      5.669e+20      6.054e+20      1.172e+21

Cluster FLOP/sec:    1.560e+14
Cluster bytes/sec:   1.487e+10 (5.367e+09 Tx, 9.501e+09 Rx)

Total FLOP/sec:      2.396e+18
Total bytes/sec:     2.284e+14 (8.243e+13 Tx, 1.459e+14 Rx)

Runtime:             118.8 days
"""

BATCH_CMD = (
    "--chip A100_40GB --n_layers 120 --d_model 12288 --batch_size 30720 --microbatch_size 48 --n_experts 16 "
    "--n_routed_experts 2 --pp 15 --pipeline_interleaving 8 --tp 8 --dp 12"
)
BATCH_README = """\
Model Shape: 120 x (12288 x 61440) (top 2 of 16 routing)
Parameters: 2.90e+12, Training Tokens: 5.80e+13
23040 A100_40GBs
Pipeline steps: 15 stages x 8 interleaving; boundary interval: 1; bubble layers: 14
FLOP per batch: 1.37e+20
Matmuls per chip per layer: 2 matrices x 1 experts = 2
Matmul shape: 7680 d_int x 12288 d_model x 1024 tokens

BATCH TIME
Pipeline bubble time:    0.0273 secs
Pipeline full time:      9.5150 secs
Gradient reduction:      0.0050 secs
Total batch time:        9.5473 secs

Utilization:             0.9966

TOTAL RUN TIME
 101.8 days
"""


def _p_line_as_set(line: str) -> tuple[str, frozenset[str]]:
    head, _, axes = line.partition("{")
    return head, frozenset(a.strip() for a in axes.rstrip("}").split(","))


def _run(capsys: pytest.CaptureFixture[str], sub: str, cmd: str) -> str:
    assert main([sub, *shlex.split(cmd)]) == 0
    return capsys.readouterr().out


def test_traffic_readme_example_digit_for_digit(capsys):
    got, want = _run(capsys, "traffic", TRAFFIC_CMD).splitlines(), TRAFFIC_README.splitlines()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if w.startswith("P: "):
            assert _p_line_as_set(g) == _p_line_as_set(w)
            assert g == "P: 15360 = {DATA: 16, PIPE: 15, EXP: 8, SEQ: 1, TENSOR_INT: 8, TENSOR_EXT: 1}"
        else:
            assert g == w


def test_traffic_readme_example_in_kebab_case(capsys):
    kebab = " ".join(w.replace("_", "-") if w.startswith("--") else w for w in TRAFFIC_CMD.split())
    assert _run(capsys, "traffic", kebab) == _run(capsys, "traffic", TRAFFIC_CMD)


def test_batch_time_readme_example_digit_for_digit(capsys):
    assert _run(capsys, "batch-time", BATCH_CMD) == BATCH_README


def test_batch_time_head_revision_of_the_readme_command(capsys):
    """seed-systems.md §1.1: the HEAD script (d9c1248) prints 169.7 days for the README command."""
    out = _run(capsys, "batch-time", BATCH_CMD + " --v2")
    assert " Run time:  169.7 days" in out.splitlines()
    assert "23040 A100_40GBs: (624.0 8-bit TFLOP/s; 1.55 TB/s IO; 600.0 GB/s network), Base Utilization: 0.60" in out


def test_batch_time_stage_crossing_halved_in_v2_changes_the_bubble(capsys):
    """Commit 0480468 halved the stage-crossing term: 0.0272 instead of 0.0273 s at full utilization."""
    out = _run(capsys, "batch-time", BATCH_CMD + " --v2 --base_utilization 1")
    assert "Pipeline bubble time:    0.0272 secs" in out
