"""The real counterpart of tests/unit/measure/test_nvml_fake.py: the same NvmlMeter calls against the driver's
NVML on a GPU, checking that its readings have the shape the fake gives (names, an EnergyReading named gpu,
measured, source nvml:<indices>, energy since the meter's start in joules that grows while the GPU works).
Skipped without CUDA or nvidia-ml-py."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from greentrain.measure.meters import EnergyReading, NvmlMeter, default_meters

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
pytest.importorskip("pynvml")


def _work(seconds_of_matmuls: int = 200) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(seconds_of_matmuls):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()


def test_the_real_meter_reads_what_the_fake_one_does() -> None:
    meter = NvmlMeter([0])
    try:
        assert len(meter.names) == 1 and meter.names[0].startswith("NVIDIA")
        first = meter.read()
        assert isinstance(first, EnergyReading)
        assert (first.name, first.measured, first.source) == ("gpu", True, "nvml:0")
        assert 0.0 <= first.energy_j < 1e3  # since the meter started, not since the driver loaded
        _work()
        second = meter.read()
        assert [f.name for f in dataclasses.fields(second)] == [f.name for f in dataclasses.fields(first)]
        assert second.energy_j > first.energy_j  # 200 8k bf16 products: tens of joules on any recent GPU
    finally:
        meter.close()


def test_default_meters_put_the_real_gpu_first() -> None:
    meters = default_meters(1, cpu_tdp_w=100.0, rapl=False, gpu_indices=[0])
    try:
        assert meters[0].name == "gpu" and isinstance(meters[0], NvmlMeter)
        _work(50)
        # NVML's energy counter moves in steps (an H100 on driver 580 read 0 J after 70 ms of work): read
        # until it moves, 5 s at most
        deadline = time.monotonic() + 5.0
        while meters[0].read().energy_j <= 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert meters[0].read().energy_j > 0
    finally:
        for m in meters:
            m.close()
