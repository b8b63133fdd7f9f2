"""The report from a hand-made output folder: files, emissions rows per variant and phase, re-pricing, status of
pending and stale variants, and no torch needed."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.experiment.report import build_report, load_results
from greentrain.experiment.results import PHASES
from greentrain.report.experiment import write_report_files


def test_report_files_and_numbers(tmp_path: Path, make_folder: Any) -> None:
    out = tmp_path / "out"
    make_folder(out)
    _, results = load_results(out)
    assert [r.status for r in results] == ["ok", "ok", "pending", "pending"]  # "stale": another hash
    rep = build_report(out, ["FRA"])
    write_report_files(out, rep)
    with (out / "emissions.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows] == [f"{v}:{p}" for v in ("base", "fast") for p in PHASES]
    base_rows = [r for r in rows if r["run_id"].startswith("base:")]
    assert sum(float(r["energy_consumed"]) for r in base_rows) == pytest.approx(1.5 * 3.6e3 / 3.6e6)
    assert sum(float(r["emissions"]) for r in base_rows) == pytest.approx(1.5 * 1e-3 * 0.3)
    for r in base_rows:  # CodeCarbon: the parts (with PUE) sum to energy_consumed
        parts = float(r["cpu_energy"]) + float(r["gpu_energy"]) + float(r["ram_energy"])
        assert parts == pytest.approx(float(r["energy_consumed"]))
    # base: $0.10 and 0.45 g; fast: $0.05 and 0.9 g -> cheapest (fast) is not greenest (base)
    f1 = next(f for f in rep.findings if f.kind == "F1")
    assert f1.variants == ("fast", "base")
    assert rep.pareto == ("base", "fast")
    fra = {x.variant_id: x for x in rep.repriced}
    assert fra["base"].cost_usd == pytest.approx(0.1)  # same hourly price, another grid
    assert fra["base"].emissions_kg_co2e != pytest.approx(results[0].emissions_kg_co2e)
    md = (out / "report.md").read_text()
    assert "| base | ok * |" in md and "cheapest is not greenest" in md


def test_status_and_report_need_no_torch(tmp_path: Path, make_folder: Any) -> None:
    out = tmp_path / "out"
    make_folder(out)
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
            "from greentrain.cli.main import main\n"
            f"assert main(['experiment', 'status', {str(out)!r}]) == 0\n"
            f"assert main(['experiment', 'report', {str(out)!r}, '--json']) == 0\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert '"variants"' in proc.stdout


def test_freeze_turns_off_the_gradients_of_the_part(make_experiment: object) -> None:
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.experiment.spec import experiment_from_dict

    data = make_experiment()  # type: ignore[operator]
    data["axes"] = {"model.freeze": [["encoder"], ["embeddings"]]}
    variants = experiment_from_dict(data).variants
    counts = []
    for v in variants:
        model = build_model(v.job, 100)
        counts.append(sum(p.numel() for p in model.parameters() if p.requires_grad))
    total = sum(p.numel() for p in build_model(variants[0].job, 100).parameters())
    assert counts[0] == total and counts[1] < total and counts[2] < total
    assert [v.variant_id for v in variants] == ["base", "model.freeze=['encoder']", "model.freeze=['embeddings']"]


def test_the_experiment_package_imports_no_renderer(tmp_path: Path, make_folder: Any) -> None:
    """Issue 17: Rich and matplotlib only in report/; experiment/ computes (its torch-free modules, loaded here)."""
    out = tmp_path / "out"
    make_folder(out)
    code = ("import sys\n"
            "import greentrain.experiment.runner, greentrain.experiment.plan, greentrain.experiment.spec\n"
            "from pathlib import Path\n"
            "from greentrain.experiment.report import build_report\n"
            f"build_report(Path({str(out)!r}), ['FRA'])\n"
            "print(sorted(m for m in ('rich', 'matplotlib', 'torch') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
