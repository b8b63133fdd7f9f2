"""The seed-001 batch-time model: hand-derived cases, chips, the v2 revision, and bad input."""

from __future__ import annotations

import json
import shlex

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.batch_time import BatchTimeConfig, batch_time, get_batch_chip

H100 = get_batch_chip("H100")


def test_small_pipeline_by_hand():
    cfg = BatchTimeConfig(num_layers=4, d_model=1024, batch_size=8, seq_len=1024, pp=2)
    r = batch_time(cfg, H100)
    # One chip's matmul: 5120 (d_int = 5*1024) x 1024 x 1024 tokens; 2*5120*1024*1024 FLOP at 1979e12
    # = 5.4257e-6 s beats memory (5120*1024 + 1024*1024 + 5120*1024 elements / 3.35e12 = 3.44e-6 s).
    mt = 2 * 5120 * 1024 * 1024 / 1979e12
    assert r.matmul_time_s == pytest.approx(mt, rel=1e-15)
    # interval = 4 // 2 = 2, bubble layers = (2-1)*2 = 2: both 2 matmuls x 3 passes; the second crosses a
    # stage: 2 * tx_rx(1*1024*1024 elements, shared by dp*tp*tp2*ep = 1 chip) = 2 * 2 * 1048576 bytes / 900e9.
    assert (r.boundary_interval, r.bubble_layers) == (2, 2)
    assert r.bubble_time_s == pytest.approx(12 * mt + 2 * 2 * 1048576 / 900e9, rel=1e-12)
    # Steady state: 3 passes x (4//2) layers x 2 matmuls x 8 micro-batches = 96 matmuls; no gradient reduce.
    assert r.full_time_s == pytest.approx(96 * mt, rel=1e-12) and r.grad_reduction_time_s == 0
    # P = 4 layers * 2 * 1024 * 5120 = 41,943,040; D = 20 P = 838,860,800 tokens = 102,400 batches of 8192.
    assert r.num_params == 41_943_040 and r.num_batches == 102_400
    assert r.utilization == pytest.approx(6 * 41_943_040 * 8192 / (2 * 1979e12 * r.batch_time_s), rel=1e-12)
    assert r.run_time_s == pytest.approx(r.batch_time_s * 102_400)


def test_expert_hop_without_a_stage_crossing():
    # 4 experts, top-1, tp 1: a non-crossing bubble layer still moves a token to another expert with
    # probability 3/4: + 2 * (3/4) * tx_rx(4*1024*1024 elements over dp*tp*tp2*ep = 4 chips).
    cfg = BatchTimeConfig(
        num_layers=4, d_model=1024, num_experts=4, batch_size=8, microbatch_size=4, seq_len=1024, pp=2
    )
    r = batch_time(cfg, H100)
    tx_rx = 2 * (4 * 1024 * 1024 / 4) / 900e9
    crossing = 2 * tx_rx
    assert r.bubble_time_s == pytest.approx(12 * r.matmul_time_s + 2 * 0.75 * tx_rx + crossing, rel=1e-12)


def test_gradient_reduction_with_data_parallelism():
    cfg = BatchTimeConfig(num_layers=4, d_model=1024, batch_size=8, seq_len=1024, dp=4)
    r = batch_time(cfg, H100)
    # In-network all-reduce of P = 41,943,040 one-byte weights scattered over p/dp = 1 chip: 2 * P / 900e9.
    assert r.grad_reduction_time_s == pytest.approx(2 * 41_943_040 / 900e9, rel=1e-12)


def test_precision_scales_compute_time():
    base = BatchTimeConfig(num_layers=4, d_model=4096, batch_size=8, seq_len=4096)
    r8 = batch_time(base, H100)
    r16 = batch_time(BatchTimeConfig(num_layers=4, d_model=4096, batch_size=8, seq_len=4096, precision_bits=16), H100)
    assert r16.matmul_time_s == pytest.approx(2 * r8.matmul_time_s)


def test_catalog_h100_is_the_seed_h100():
    chip = get_batch_chip("h100-sxm")
    # fp8 1979 TFLOP/s, 3.35 TB/s, NVLink 4 at 450 GB/s each way = 900e9 both ways.
    assert (chip.flop_per_s_8bit, chip.memory_bytes_per_s, chip.net_bytes_per_s) == (1979e12, 3.35e12, 900e9)


def test_catalog_chip_without_fp8_doubles_bf16():
    chip = get_batch_chip("a100-80gb")
    assert chip.flop_per_s_8bit == 624e12 and chip.net_bytes_per_s == 600e9


def test_seed_names_ignore_case_and_pod_network_changes_in_v2():
    assert get_batch_chip("h100") == H100
    assert get_batch_chip("H100_x64_pod").net_bytes_per_s == 125e8
    assert get_batch_chip("H100_x64_pod", v2=True).net_bytes_per_s == 1e9
    assert get_batch_chip("RTX4090", net_bytes_per_s=5e9).net_bytes_per_s == 5e9


def test_v2_full_time_is_max_of_flop_and_network():
    cfg = dict(num_layers=8, d_model=2048, batch_size=16, seq_len=2048, pp=2, tp=4, tp2=2, v2=True)
    slow = batch_time(BatchTimeConfig(**cfg), get_batch_chip("H100", v2=True, net_bytes_per_s=1e8))
    fast = batch_time(BatchTimeConfig(**cfg), get_batch_chip("H100", v2=True))
    assert slow.full_time_s == slow.full_net_time_s > slow.full_flop_time_s
    assert fast.full_time_s == fast.full_flop_time_s > fast.full_net_time_s
    assert slow.full_flop_time_s == fast.full_flop_time_s


def run(capsys: pytest.CaptureFixture[str], cmd: str) -> tuple[int, str, str]:
    rc = main(["batch-time", *shlex.split(cmd)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_default_chip_is_h100(capsys):
    rc, out, _ = run(capsys, "--n_layers 24 --d_model 2048")
    assert rc == 0 and "1 H100s" in out.splitlines()


def test_cli_json_and_kebab_case(capsys):
    rc, out, _ = run(capsys, "--n-layers 24 --d-model 2048 --chip-type A100_40GB --json")
    data = json.loads(out)
    assert rc == 0 and data["chip"]["name"] == "A100_40GB" and data["batch_time_s"] > 0
    assert data["run_time_days"] == pytest.approx(data["run_time_s"] / 86400)


def test_cli_v2_network_bandwidth_is_printed(capsys):
    rc, out, _ = run(capsys, "--n_layers 24 --d_model 2048 --v2 --network_bandwidth 12.34e9")
    assert rc == 0 and "12.3 GB/s network), Base Utilization: 0.60" in out


@pytest.mark.parametrize(
    ("cmd", "needle"),
    [
        ("--n_layers 24 --d_model 2048 --microbatch_size 3", "microbatch size must divide batch size"),
        ("--n_layers 24 --d_model 2048 --pipeline_interleaving 2", "can't interleave a single pipeline stage"),
        ("--n_layers 24 --d_model 2048 --pp 5", "need integer number of virtual pipeline stages"),
        ("--n_layers 24 --d_model 2048 --n_experts 3 --n_routed_experts 2", "routed experts must divide"),
        ("--n_layers 24 --d_model 2048 --tp 3", "tensor-parallel degree must divide internal dimension"),
        ("--n_layers 24 --d_model 2048 --tp2 3", "exterior tensor-parallel degree must divide"),
        ("--n_layers 24 --d_model 2048 --dp 3", "need integer number of tokens per matmul"),
        ("--n_layers 24 --d_model 2048 --base_utilization 0.5", "exists only in the v2 model"),
        ("--n_layers 24 --d_model 2048 --v2 --base_utilization 0", "base_utilization=0.0"),
        ("--n_layers 24 --d_model 2048 --chip nosuch", "unknown chip"),
        ("--n_layers 0 --d_model 2048", "num_layers=0"),
        ("--d_model 2048", "required"),
        ("--n_layers 24 --d_model 2048 --dataset_size inf", "'inf' must be a finite number"),
        ("--n_layers 24 --d_model 2048 --v2 --network_bandwidth inf", "'inf' must be a finite number"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(capsys, cmd, needle):
    rc, out, err = run(capsys, cmd)
    assert rc == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_config_error_names_the_field():
    with pytest.raises(ConfigError) as err:
        BatchTimeConfig(num_layers=4, d_model=1024, batch_size=8, microbatch_size=3)
    assert err.value.field == "microbatch_size"
