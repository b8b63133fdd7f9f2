"""The report from a hand-made output folder: files, emissions rows per variant and phase, re-pricing, status of
pending and stale variants, and no torch needed."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greentrain.experiment.report import build_report, load_results
from greentrain.experiment.results import PHASES, VariantResult, write_result
from greentrain.experiment.runner import variant_dir
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


@pytest.mark.parametrize(("regions", "named"), [(["FRA", "FRA"], "name each region once"),
                                              (["FRA", "fra"], "name each region once"),
                                              ([""], "must name a region")])
def test_a_region_given_twice_or_empty_is_refused(tmp_path: Path, make_folder: Any, regions: list[str],
                                                  named: str) -> None:
    """--reprice FRA FRA summed the variants twice in F10; --reprice '' re-priced nowhere without a word."""
    from greentrain.errors import ConfigError

    out = tmp_path / "out"
    make_folder(out)
    with pytest.raises(ConfigError, match=named) as e:
        build_report(out, regions)
    assert e.value.field == "--reprice"


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


def test_with_repeats_the_report_shows_mean_and_sd(tmp_path: Path) -> None:
    from greentrain.report.experiment import markdown

    ids = ["base@seed0", "base@seed1"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "experiment.json").write_text(json.dumps({
        "kind": "greentrain.experiment", "name": "rep", "site": {"grid_g_co2e_per_kwh": 300.0},
        "variants": [{"variant_id": v, "config_hash": v, "max_steps": 10, "axis_values": []} for v in ids]}))
    for vid, wall_s, rouge1 in ((ids[0], 100.0, 40.0), (ids[1], 120.0, 44.0)):
        folder = variant_dir(out, vid)
        folder.mkdir(parents=True)
        write_result(folder / "result.json", VariantResult(
            variant_id=vid, config_hash=vid, status="ok", wall_s=wall_s, train_s=wall_s, energy_j=3.6e3,
            emissions_kg_co2e=1e-3, cost_usd=wall_s / 100, rouge1=rouge1, cost_basis="cloud"))
    rep = build_report(out, [])
    md = markdown(rep)
    assert "## Over the seeds (mean ± sd)" in md
    assert "| base | 2 | 110 ± 14 | 1 ± 0 | 1 ± 0 | 1.1 ± 0.14 | 42 ± 2.8 |" in md
    (entry,) = rep.to_dict()["repeats"]
    assert entry["runs"] == 2 and entry["rouge1_mean"] == 42.0 and entry["train_s_sd"] == pytest.approx(200 ** 0.5)


def test_the_progress_bar_follows_variants_and_steps(tmp_path: Path) -> None:
    import time

    from greentrain.report.experiment import RichProgress

    (tmp_path / "train.jsonl").write_text('{"type":"step"}\n' * 3 + '{"type":"summary"}\n')
    bar = RichProgress(2)
    try:
        bar.begin("base", 10, tmp_path)
        deadline = time.monotonic() + 10
        while bar.progress.tasks[1].completed != 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert bar.progress.tasks[1].completed == 3 and bar.progress.tasks[1].total == 10
        assert bar.progress.tasks[1].description == "base"
        bar.end()
        assert bar.progress.tasks[0].completed == 1 and bar.path is None
    finally:
        bar.close()


@pytest.mark.parametrize(("text", "rule"), [('{"name": ', "malformed JSON at line 1"),
                                            ("[1, 2]", "top level must be a mapping")])
def test_a_broken_manifest_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                       rule: str) -> None:
    """`experiment report` and `status` on a folder whose experiment.json is truncated or not a mapping."""
    from greentrain.cli.main import main

    (tmp_path / "experiment.json").write_text(text)
    for action in ("report", "status"):
        assert main(["experiment", action, str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"dir='{tmp_path / 'experiment.json'}': {rule}" in err and err.count("\n") == 1
