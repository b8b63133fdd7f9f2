"""The GPU energy meter's read path without a GPU: a fake ``pynvml`` in sys.modules (as Zeus tests its NVML
code) answers NvmlMeter's calls, so the counter arithmetic, the device selection and NVML's start and
shutdown are checked on every machine. tests/gpu/test_track_gpu.py reads the real counter on a GPU."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from greentrain.measure.meters import EnergyReading, NvmlMeter, default_meters


class FakeNvml(types.ModuleType):
    """nvidia-ml-py's functions NvmlMeter calls, over ``counters_mj`` (one total-energy counter per GPU, in
    millijoules since the driver loaded, as nvmlDeviceGetTotalEnergyConsumption returns)."""

    class NVMLError(Exception):
        pass

    def __init__(self, counters_mj: list[int], supported: bool = True) -> None:
        super().__init__("pynvml")
        self.counters_mj = counters_mj
        self.supported = supported
        self.calls: list[str] = []

    def nvmlInit(self) -> None:  # pynvml's names
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.counters_mj)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> tuple[str, int]:
        return ("handle", i)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: tuple[str, int]) -> int:
        if not self.supported:  # before Volta: NVML_ERROR_NOT_SUPPORTED
            raise self.NVMLError("Not Supported")
        return self.counters_mj[handle[1]]

    def nvmlDeviceGetName(self, handle: tuple[str, int]) -> str:
        return f"NVIDIA H100 80GB HBM3 #{handle[1]}"

    utilization_percent = (40, 80, 100)  # per GPU, as nvmlUtilization_t.gpu

    def nvmlDeviceGetUtilizationRates(self, handle: tuple[str, int]) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=self.utilization_percent[handle[1]], memory=0)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(counters_mj: list[int], supported: bool = True) -> FakeNvml:
        module = FakeNvml(counters_mj, supported)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


def test_reading_is_the_energy_since_start_of_the_chosen_gpus(fake: Any) -> None:
    nvml = fake([5_000_000, 7_000_000, 9_000_000])
    meter = NvmlMeter([0, 2])
    assert meter.names == ["NVIDIA H100 80GB HBM3 #0", "NVIDIA H100 80GB HBM3 #2"]
    assert meter.read() == EnergyReading(name="gpu", energy_j=0.0, measured=True, source="nvml:0,2")
    nvml.counters_mj[0] += 1_500  # 1.5 J on GPU 0
    nvml.counters_mj[1] += 99_000  # not measured: GPU 1 is not ours
    nvml.counters_mj[2] += 250_000  # 250 J on GPU 2
    reading = meter.read()
    assert reading.energy_j == pytest.approx(251.5) and reading.measured
    meter.close()
    assert nvml.calls == ["init", "shutdown"]


def test_indices_past_the_device_count_are_dropped_and_none_means_all(fake: Any) -> None:
    fake([1_000, 2_000])
    assert NvmlMeter([1, 5]).read().source == "nvml:1"
    assert NvmlMeter(None).read().source == "nvml:0,1"


@pytest.mark.parametrize(("counters", "supported", "why"), [
    ([1_000], False, "NVML: Not Supported"),  # a GPU without the energy counter (before Volta)
    ([], True, "NVML: no NVIDIA GPU"),  # NVML loads, no device is visible
])
def test_an_unusable_gpu_is_an_oserror_and_nvml_is_shut_down(fake: Any, counters: list[int], supported: bool,
                                                            why: str) -> None:
    nvml = fake(counters, supported)
    with pytest.raises(OSError, match=why):
        NvmlMeter()
    assert nvml.calls == ["init", "shutdown"]  # left as found: the caller falls back to another meter


def test_default_meters_measure_the_gpu_through_nvml(fake: Any) -> None:
    nvml = fake([10_000, 20_000])
    meters = default_meters(1, cpu_tdp_w=100.0, rapl=False, gpu_indices=[1])
    assert meters[0].name == "gpu" and isinstance(meters[0], NvmlMeter)
    nvml.counters_mj[1] += 3_000
    assert meters[0].read().energy_j == pytest.approx(3.0)
    for m in meters:
        m.close()


def test_utilization_is_the_mean_of_the_meters_gpus(fake: Any) -> None:
    fake([1_000, 2_000, 3_000])
    assert NvmlMeter([0, 1]).utilization_percent() == pytest.approx(60.0)


def test_the_tracker_samples_utilization_into_emissions_csv(fake: Any, tmp_path: Any) -> None:
    """The sampler records NVML's utilisation beside the energy; the summary and emissions.csv carry its mean
    (CodeCarbon's gpu_utilization_percent column), as they carry the CPU's."""
    from greentrain.measure.codecarbon import read_emissions
    from greentrain.measure.tracker import Tracker

    fake([5_000, 5_000])
    with Tracker(None, out_dir=tmp_path, print_summary=False, interval_s=0.05, cpu_tdp_w=10.0) as t:
        t.step()
    m = t.measurement
    assert m is not None and m.gpu_utilization_percent == pytest.approx(60.0)  # GPUs 0 and 1: 40 and 80 %
    assert float(read_emissions(tmp_path / "emissions.csv")[-1]["gpu_utilization_percent"]) == pytest.approx(60.0)
