"""One measurement.json, two readers: `compare` and `calibrate` read it through the same typed view
(results.kinds.TrackResult) and compare the same measured peak with the predicted allocator_bytes
(TrackResult.allocator_peak_bytes: the reserved peak, else the allocated one, else the process RSS)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from greentrain.calibrate.profile import read_track_run
from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.measure.summary import Measurement, MeterInfo
from greentrain.results.codec import from_dict
from greentrain.results.kinds import TrackResult

ALLOCATED_BYTES, RESERVED_BYTES = 8e9, 1e10


def _measurement(**peaks: float) -> dict[str, object]:
    """What track wrote for 10 steps of 1.2 s on one GPU, with the given CUDA peaks."""
    m = Measurement(status="ok", duration_s=13.0, world_size=1, num_steps=10, step_time_s=1.2,
                    first_step_time_s=2.0, forward_s=0.4, backward_s=0.8, tokens=10 * 64 * 2048,
                    tokens_per_s=64 * 2048 / 1.2, samples_per_s=64 / 1.2, flop=1e16, flop_per_step=1e15,
                    flop_per_s=1e15 / 1.2, memory_bytes=peaks.get("peak_cuda_bytes", 3e8), peak_rss_bytes=3e8,
                    peak_cuda_bytes=peaks.get("peak_cuda_bytes", 0.0), gpu_energy_j=6000.0, cpu_energy_j=500.0,
                    ram_energy_j=50.0, it_energy_j=6550.0, energy_j=6550.0, energy_j_per_step=655.0,
                    power_w=500.0, pue=1.0, meters=(MeterInfo(name="gpu", measured=True, source="nvml"),),
                    peak_cuda_reserved_bytes=peaks.get("peak_cuda_reserved_bytes", 0.0))
    return m.to_json()


def _run_dir(tmp_path: Path, **peaks: float) -> Path:
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / "measurement.json").write_text(json.dumps(_measurement(**peaks)))
    (d / "scenario.yaml").write_text(yaml.safe_dump({
        "model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
        "workload": {"global_batch_size": 64, "seq_len": 2048, "num_steps": 10},
        "strategy": {"dp": 8, "micro_batch_size": 1}}))
    return d


def _compared_memory(tmp_path: Path, run: Path) -> float:
    plan = tmp_path / "plan.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", "--model", "llama3.2-1b", "--chip", "h100-sxm", "--num-chips", "8", "--global-batch",
                     "64", "--seq-len", "2048", "--dp", "8", "--json"]) == 0
    plan.write_text(out.getvalue())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["compare", str(plan), str(run / "measurement.json"), "--json"]) == 0
    rows = {r["quantity"]: r for r in json.loads(out.getvalue())["rows"]}
    return float(rows["memory_bytes"]["measured"])


def test_compare_and_calibrate_read_the_same_peak(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, peak_cuda_bytes=ALLOCATED_BYTES, peak_cuda_reserved_bytes=RESERVED_BYTES)
    calibrated = read_track_run(run).measured.peak_memory_bytes
    compared = _compared_memory(tmp_path, run)
    assert calibrated == compared == RESERVED_BYTES  # the reserved peak, which allocator_bytes predicts


@pytest.mark.parametrize(("peaks", "expected"), [
    ({"peak_cuda_bytes": ALLOCATED_BYTES, "peak_cuda_reserved_bytes": RESERVED_BYTES}, RESERVED_BYTES),
    ({"peak_cuda_bytes": ALLOCATED_BYTES}, ALLOCATED_BYTES),  # records from before the reserved peak was kept
    ({}, 3e8),  # no CUDA: the process's peak RSS (memory_bytes)
])
def test_the_rule_is_one_field(peaks: dict[str, float], expected: float) -> None:
    view = from_dict(_measurement(**peaks))
    assert isinstance(view, TrackResult) and view.allocator_peak_bytes == expected


def test_calibrate_refuses_a_file_that_is_not_a_measurement(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    (run / "measurement.json").write_text(json.dumps({"kind": "track", "schema_version": 1, "status": "ok"}))
    with pytest.raises(ConfigError, match=r"measurement\.json: duration_s=None: is missing"):
        read_track_run(run)
