"""Issue 26 item 2: emissions.csv is CodeCarbon 3.x's (38 columns, codecarbon 3.3.2 EmissionsData), a
CodeCarbon file is appended to column-aligned or refused, CodeCarbon's files read back; CPU TDP and RAM power
follow CodeCarbon 3.x's data and fallbacks, and a missing RAPL counter is said in one line."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.measure import codecarbon, meters
from greentrain.measure.codecarbon import EMISSIONS_COLUMNS, EMISSIONS_COLUMNS_V2, read_emissions
from greentrain.measure.tracker import Tracker

# one row exactly as CodeCarbon 3.3.2 wrote it on this machine (benchmarks/bench_codecarbon.py, 2026-11-25)
CC3_ROW = ("2026-11-26T00:13:23,bench,ebb2a4d5-28b6-4509-b8bd-836a398da567,5b0fa12a-3dd7-45bb-9766-cc326314d9f1,"
           "37.43052550499988,4.250499209760678e-07,1.135570273837835e-08,1.283352535382345,0.0,10.0,"
           "1.2644289976748806e-05,0.0,9.530887099166802e-05,0.0001079531609684168,0.0,Canada,CAN,quebec,,,"
           "Linux-6.18.44-fc-v782-x86_64-with-glibc2.36,3.11.7,3.3.2,2,AMD EPYC,0,,-71.2,46.8,23.54016876220703,"
           "process,88.57142857142857,0,8.891428571428571,2.092188262939453,N,1.0,0.0")


def test_columns_are_codecarbon_3() -> None:
    assert len(EMISSIONS_COLUMNS) == 38 and len(EMISSIONS_COLUMNS_V2) == 32
    cc = pytest.importorskip("codecarbon.output_methods.emissions_data")  # when installed: its own list
    assert tuple(f.name for f in cc.EmissionsData.__dataclass_fields__.values()) == EMISSIONS_COLUMNS


def _track(out: Path) -> None:
    with Tracker(out_dir=out, region="fr", print_summary=False, interval_s=0.05):
        t_end = time.process_time() + 0.05
        while time.process_time() < t_end:  # some CPU time to measure (a sleep may use none)
            pass


def test_append_to_a_codecarbon_3_file_reads_back_aligned(tmp_path: Path) -> None:
    (tmp_path / "emissions.csv").write_text(",".join(EMISSIONS_COLUMNS) + "\n" + CC3_ROW + "\n")
    _track(tmp_path)
    cc, mine = read_emissions(tmp_path / "emissions.csv")
    assert cc["country_name"] == "Canada" and cc["water_consumed"] == 0.0 and cc["wue"] == 0.0
    assert mine["country_name"] == "France" and mine["water_consumed"] == 0.0 and mine["tracking_mode"] == "process"
    assert mine["energy_consumed"] == pytest.approx(mine["cpu_energy"] + mine["gpu_energy"] + mine["ram_energy"])
    assert 0 < mine["cpu_utilization_percent"] <= 100 and mine["ram_used_gb"] > 0


def test_append_to_a_codecarbon_2_file_keeps_its_layout(tmp_path: Path) -> None:
    path = tmp_path / "emissions.csv"
    path.write_text(",".join(EMISSIONS_COLUMNS_V2) + "\n")
    _track(tmp_path)
    rows = list(csv.reader(path.open()))
    assert all(len(r) == 32 for r in rows) and read_emissions(path)[0]["country_name"] == "France"


def test_a_foreign_header_is_refused_before_training(tmp_path: Path) -> None:
    path = tmp_path / "emissions.csv"
    path.write_text("when,what,kwh\n1,x,2\n")
    with pytest.raises(ConfigError, match="when, what, kwh"):
        Tracker(out_dir=tmp_path, print_summary=False).start()
    assert path.read_text() == "when,what,kwh\n1,x,2\n" and not (tmp_path / "greentrain.jsonl").exists()


def test_a_shifted_row_is_named_not_read(tmp_path: Path) -> None:
    path = tmp_path / "emissions.csv"
    cells = CC3_ROW.split(",")
    del cells[14]  # CodeCarbon 2's row under CodeCarbon 3's header: the country lands in water_consumed
    path.write_text(",".join(EMISSIONS_COLUMNS) + "\n" + ",".join(cells) + "\n")
    with pytest.raises(ConfigError, match="water_consumed"):
        read_emissions(path)


@pytest.mark.parametrize("name, tdp", [("Intel(R) Xeon(R) Platinum 8480+", 350.0),
                                       ("AMD EPYC 7763 64-Core Processor", 280.0),
                                       ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 150.0),
                                       ("AMD EPYC", None), ("", None)])
def test_cpu_tdp_from_codecarbon_data(name: str, tdp: float | None) -> None:
    match = codecarbon.match_cpu(name)
    assert (codecarbon.cpu_power_table()[match] if match else None) == tdp


def test_fallbacks_are_codecarbon_3s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecarbon.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(codecarbon, "sockets", lambda: 1)
    assert codecarbon.cpu_power_per_cpu_s("AMD EPYC")[0] == 4.0  # 4 W x 8 threads over 8 threads
    assert codecarbon.cpu_power_per_cpu_s("AMD EPYC 7763 64-Core Processor")[0] == 280.0 / 8
    gib = 2**30
    assert [codecarbon.ram_power_w(x * gib, arm=False) for x in (0.5, 8, 24, 100, 512, 2048)] == \
        [10.0, 10.0, 20.0, 38.0, 38.0, 5 * 4 + 4.5 * 4 + 4 * 8]  # 512 GiB: 8 x 64; 2 TiB: 16 x 128
    assert codecarbon.ram_power_w(0.5 * gib, arm=True) == 3.0


def test_one_line_when_rapl_is_absent(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(meters, "_notices", set())
    monkeypatch.setattr(meters.RaplMeter, "ROOT", Path("/nonexistent"))
    for _ in range(2):
        found = meters.default_meters(1, gpu=False)
        assert isinstance(found[0], meters.CpuEstimateMeter)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no RAPL counter" in err and "CodeCarbon" in err
