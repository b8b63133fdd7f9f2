"""What a Tracker prints when it stops: the plain-text summary by default (measure/ imports neither Rich nor
report/), the caller's printer when handed one (report/track.py's Rich tables, as `greentrain track` prints
them), nothing with print_summary=False; the Rich tables and the plain text show the same rows."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

import greentrain
from greentrain.measure.outputs import module_rows, print_summary_text, summary_rows
from greentrain.measure.summary import Measurement, MeterInfo, ModuleStats
from greentrain.report.track import render_table


def _measurement() -> Measurement:
    mods = (ModuleStats(name="blocks.0", calls=10, forward_s=1.5e-3, backward_s=2.7e-3, forward_flop=13.6e6,
                        backward_flop=27.3e6, memory_bytes=1e6, energy_j=0.05),)
    return Measurement(status="ok", duration_s=5.39, world_size=1, num_steps=10, step_time_s=0.01009,
                       first_step_time_s=0.1066, forward_s=0.0047, backward_s=0.0037, tokens=1280.0,
                       tokens_per_s=6485.7, samples_per_s=202.7, flop=9.44e8, flop_per_step=9.44e7,
                       flop_per_s=4.78e9, memory_bytes=3.37e8, peak_rss_bytes=3.37e8, peak_cuda_bytes=0.0,
                       gpu_energy_j=0.0, cpu_energy_j=135.6, ram_energy_j=0.5, it_energy_j=136.1, energy_j=156.5,
                       energy_j_per_step=0.573, power_w=25.2, pue=1.15,
                       meters=(MeterInfo(name="cpu", measured=False, source="TDP x load"),), region="us-east-1",
                       grid_g_co2e_per_kwh=245.0, emissions_kg_co2e=1.06e-5, modules=mods, notes=("a note",))


def test_plain_text_and_rich_tables_show_the_same_rows() -> None:
    m = _measurement()
    plain, rich = io.StringIO(), io.StringIO()
    print_summary_text(m, plain)
    render_table(m, rich)
    lines = plain.getvalue().splitlines()
    assert lines[0] == "greentrain measurement (ok)" and lines[-1] == "note: a note"
    assert "greentrain measurement (ok)" in rich.getvalue() and "note: a note" in rich.getvalue()
    for row in [*summary_rows(m), *module_rows(m)]:
        for cell in row:
            assert cell in plain.getvalue() and cell in rich.getvalue()
    assert ("CPU energy", "135.6 J (estimated)") in summary_rows(m)
    assert module_rows(m) == [("blocks.0", "1.50", "2.70", "13.6 M", "27.3 M", "0.05")]
    assert "┃" in rich.getvalue() and "┃" not in plain.getvalue()


@pytest.mark.parametrize("printer", [True, False, "callable"])
def test_the_tracker_prints_through_its_printer(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                printer: object) -> None:
    seen: list[Measurement] = []
    arg = seen.append if printer == "callable" else printer
    with greentrain.Tracker(out_dir=tmp_path, print_summary=arg, meters=False) as t:  # type: ignore[arg-type]
        time.sleep(0.01)
    out, err = capsys.readouterr()
    if printer == "callable":
        assert seen == [t.measurement] and "greentrain measurement" not in out
    assert ("greentrain measurement (ok)\n  quantity" in out) is (printer is True)
    assert ("greentrain: wrote" in err) is (printer is not False)


def test_a_tracker_loads_no_rich() -> None:
    """The plain-text default needs no Rich: a run with a Tracker never imports it."""
    code = ("import sys, tempfile, greentrain\n"
            "with greentrain.Tracker(out_dir=tempfile.mkdtemp(), meters=False):\n    pass\n"
            "assert 'rich' not in sys.modules, 'rich imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
