"""Energy meters, /proc readers and the JSONL record (no torch needed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.measure import meters
from greentrain.measure.records import JsonlWriter, read_jsonl


def test_cpu_estimate_is_tdp_per_thread_times_cpu_seconds() -> None:
    m = meters.CpuEstimateMeter(os.getpid(), tdp_w=100.0, threads=4)
    t = time.process_time()
    while time.process_time() - t < 0.2:  # burn 0.2 CPU seconds
        pass
    r = m.read()
    assert not r.measured and "given 100 W" in r.source
    assert r.energy_j == pytest.approx(100.0 / 4 * m.cpu_s) and m.cpu_s >= 0.15
    m.settle(m.cpu_s + 1.0)  # CPU time the samples missed is added at TDP / threads per second
    assert m.read().energy_j == pytest.approx(r.energy_j + 25.0, rel=0.05)


def test_bad_tdp() -> None:
    with pytest.raises(ConfigError, match="cpu_tdp_w"):
        meters.CpuEstimateMeter(os.getpid(), tdp_w=0.0)


def test_rapl_wraparound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "max_energy_range_uj").write_text("1000000\n")
    (zone / "energy_uj").write_text("900000\n")
    monkeypatch.setattr(meters.RaplMeter, "ROOT", tmp_path)
    m = meters.RaplMeter()
    (zone / "energy_uj").write_text("100000\n")  # wrapped: +0.1 J to the top, +0.1 J after
    r = m.read()
    assert r.measured and r.energy_j == pytest.approx(0.2)


def test_no_rapl_no_gpu_falls_back_to_estimates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meters.RaplMeter, "ROOT", tmp_path)  # nothing there
    with pytest.raises(OSError):
        meters.RaplMeter()
    got = meters.default_meters(os.getpid(), gpu=False)
    assert [type(x).__name__ for x in got] == ["CpuEstimateMeter", "RamEstimateMeter"]


def test_nvml_meter_skips_cleanly_without_gpu() -> None:
    try:
        m = meters.NvmlMeter()
    except OSError:
        pytest.skip("no NVIDIA GPU / NVML here")
    r = m.read()
    m.close()
    assert r.measured and r.energy_j >= 0


def test_process_tree_readers() -> None:
    assert os.getpid() in meters.process_tree(os.getpid())
    assert meters.tree_rss_bytes([os.getpid()]) > 1e6
    rss = meters.RssReader()
    assert rss.read_bytes() > 1e6
    rss.close()


def test_jsonl_torn_last_line_is_skipped(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "r.jsonl")
    w.append({"type": "start"})
    w.append({"type": "step", "step": 0})
    w.close()
    with (tmp_path / "r.jsonl").open("a") as f:
        f.write('{"type": "st')  # a writer killed mid-line
    assert [r["type"] for r in read_jsonl(tmp_path / "r.jsonl")] == ["start", "step"]
    (tmp_path / "bad.jsonl").write_text('{"a": \n{"type": "x"}\n')
    with pytest.raises(ConfigError, match="malformed"):
        read_jsonl(tmp_path / "bad.jsonl")
