"""`greentrain traffic`: flags, --json, --model, --chip, --plot and one-line errors with exit status 2."""

from __future__ import annotations

import json
import shlex

import pytest

from greentrain.cli.main import main

README = (
    "--cluster_flop_rate 156e12 --num_experts 8 --batch_size 8192 --seq_len 8192 --dataset_size 13e12 "
    "--num_layers 120 --d_model 15360 --p_pipe 15 --p_data 16 --p_seq 1 --p_exp 8 --p_tensor_int 8 "
    "--p_tensor_ext 1"
)


def run(capsys: pytest.CaptureFixture[str], cmd: str) -> tuple[int, str, str]:
    rc = main(["traffic", *shlex.split(cmd)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_has_unit_named_keys(capsys):
    rc, out, _ = run(capsys, README + " --json")
    assert rc == 0
    data = json.loads(out)
    assert data["runtime_s"] / 86400 == pytest.approx(118.8, abs=0.05)
    assert data["flop_total"] == pytest.approx(2.460e25, rel=1e-3)
    assert data["tx_elements_total"] == pytest.approx(4.231e20, rel=1e-3)
    assert data["cluster_tx_bytes_per_s"] == pytest.approx(5.367e9, rel=1e-3)
    assert data["degrees"] == {"DATA": 16, "PIPE": 15, "EXP": 8, "SEQ": 1, "TENSOR_INT": 8, "TENSOR_EXT": 1}
    assert data["allowed_microbatch_sizes"] == [16, 32, 64, 128]


def test_without_a_rate_only_the_table_is_printed(capsys):
    rc, out, _ = run(capsys, README.replace("--cluster_flop_rate 156e12 ", ""))
    assert rc == 0 and out.rstrip().endswith("1.172e+21") and "Runtime" not in out


def test_fwd_only_prints_one_column(capsys):
    rc, out, _ = run(capsys, README + " --fwd_only")
    assert rc == 0
    assert "    Metric            Fwd" in out.splitlines() and "Bwd" not in out


def test_skip_efficiency_check_prints_plain_batch(capsys):
    rc, out, _ = run(capsys, README + " --skip_efficiency_check")
    assert rc == 0 and "b: 8192\n" in out


def test_chip_sets_cluster_rate_from_catalog_peak_and_utilization(capsys):
    # A100 bf16 peak 312e12 x the default utilization 0.5 = 156e12: the README's rate.
    rc, out, _ = run(capsys, README.replace("--cluster_flop_rate 156e12", "--chip a100"))
    assert rc == 0 and "Cluster FLOP/sec:    1.560e+14" in out and "118.8 days" in out
    rc, out, _ = run(capsys, README.replace("--cluster_flop_rate 156e12", "--chip a100 --utilization 0.25"))
    assert "Cluster FLOP/sec:    7.800e+13" in out and "237.7 days" in out  # 2 x 118.85 (printed 118.8)


def test_model_preset_gives_the_shape(capsys):
    # gpt3-175b: 96 layers, d 12288, 96 heads of 128, MHA, d_ffn 49152.
    rc, out, _ = run(
        capsys,
        "--model gpt3-175b --dataset_size 3e11 --batch_size 1536 --p_data 8 --p_pipe 8 "
        "--p_tensor_int 8 --chip a100 --json",
    )
    assert rc == 0
    data = json.loads(out)
    # N = L*(2dA + 2d*A_kv + 2df) = 96*(4*12288^2 + 2*12288*49152) = 1.7396e11 (no embeddings).
    assert data["num_params"] == 96 * (4 * 12288**2 + 2 * 12288 * 49152)


def test_model_flags_override_the_preset(capsys):
    rc, out, _ = run(capsys, "--model gpt3-175b --num_layers 48 --dataset_size 3e11 --skip_efficiency_check --json")
    assert rc == 0 and json.loads(out)["num_params"] == 48 * (4 * 12288**2 + 2 * 12288 * 49152)


def test_plot_writes_a_png(capsys, tmp_path):
    path = tmp_path / "traffic.png"
    rc, _, err = run(capsys, README + f" --plot {path}")
    assert rc == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {path}" in err  # issue 16 item 14: a command that writes a file says so


def test_plot_into_a_missing_folder_is_refused_before_any_work(capsys, tmp_path):
    rc, _, err = run(capsys, README + f" --plot {tmp_path / 'no' / 'traffic.png'}")
    assert rc == 2 and err.count("\n") == 1 and "--plot=" in err


@pytest.mark.parametrize(
    ("cmd", "needle"),
    [
        (
            README.replace("--num_experts 8", "--num_experts 1").replace("--p_exp 8", "--p_exp 1"),
            "b*expert_l = 8192*8192 = 67108864 > 8388608 = 4096*2048",
        ),
        (README.replace("--p_pipe 15", "--p_pipe 16"), "num_layers=120: must be divisible by p_pipe=16"),
        (README.replace("--seq_len 8192", "--seq_len 8190"), "seq_len=8190"),
        (README + " --d_ffn 4096 --d_ffn_ratio 4", "cannot be given together with --d_ffn_ratio"),
        (README + " --num_heads 240 --total_attn_width_ratio 1", "total_attn_width_ratio"),
        (README.replace("--cluster_flop_rate 156e12", "--chip nosuchchip"), "unknown chip"),
        (README + " --chip a100", "cannot be given together with --cluster_flop_rate"),
        ("--dataset_size 1e9 --d_model 1024", "num_layers=None: is required (or --model)"),
        ("--dataset_size 1e9 --model nosuchmodel", "unknown model preset"),
        (README + " --p_data x", "invalid int value"),
        (README.replace("--dataset_size 13e12", "--dataset_size 1"),
         "dataset_size=1.0: must hold at least one batch: round(dataset_size / (batch_size*seq_len = 67108864)) is 0"),
        (README.replace("--dataset_size 13e12", "--dataset_size inf"), "'inf' must be a finite number"),
        (README.replace("--cluster_flop_rate 156e12", "--cluster_flop_rate nan"), "'nan' must be a finite number"),
        ("--model gpt3-175b --seq_len 4096 --dataset_size 3e11", "seq_len=4096: must be <= 2048"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, cmd, needle):
    rc, out, err = run(capsys, cmd)
    assert rc == 2 and out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
