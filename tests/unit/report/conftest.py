"""Result files written by the commands themselves (plan, search, simulate step and its trace, footprint,
footprint --compare-regions, compare) and by the Measurement writer (track), once per test session."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from report_inputs import BATCH_TIME, TRAFFIC

from greentrain.cli.main import main
from greentrain.measure.summary import Measurement, MeterInfo, ModuleStats

SCENARIO = ["--model", "llama3-8b", "--chip", "h100-sxm", "--num-chips", "64", "--region", "us-east-1"]


def run_json(argv: list[str], path: Path) -> Path:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0, argv
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def measurement() -> Measurement:
    """What `greentrain track` measured on a 2-layer d=64 model (10 CPU steps, us-east-1)."""
    mods = tuple(ModuleStats(name=f"blocks.{i}", calls=10, forward_s=1.5e-3 * (i + 1), backward_s=2.7e-3,
                             forward_flop=13.6e6, backward_flop=27.3e6, memory_bytes=1e6, energy_j=0.05 * (i + 1))
                 for i in range(2))
    return Measurement(status="ok", duration_s=5.39, world_size=1, num_steps=10, step_time_s=0.01009,
                       first_step_time_s=0.1066, forward_s=0.0047, backward_s=0.0037, tokens=1280.0,
                       tokens_per_s=6485.7, samples_per_s=202.7, flop=9.44e8, flop_per_step=9.44e7, flop_per_s=4.78e9,
                       memory_bytes=3.37e8, peak_rss_bytes=3.37e8, peak_cuda_bytes=0.0, gpu_energy_j=0.0,
                       cpu_energy_j=135.6, ram_energy_j=0.5, it_energy_j=136.1, energy_j=156.5,
                       energy_j_per_step=0.573, power_w=25.2, pue=1.15, cpu_model="test CPU",
                       meters=(MeterInfo(name="cpu", measured=False, source="TDP x load"),),
                       region="us-east-1", grid_g_co2e_per_kwh=245.0, emissions_kg_co2e=1.06e-5, cost_usd=3.9e-6,
                       modules=mods, notes=("a test note <b>escaped</b>",))


@pytest.fixture(scope="session")
def result_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("results")
    files = {
        "plan": run_json(["plan", *SCENARIO, "--json"], d / "plan.json"),
        "search": run_json(["search", *SCENARIO, "--top", "5", "--pareto", "--json"], d / "search.json"),
        "simulate": run_json(["simulate", "step", "--pp", "4", "--tp", "8", "--dp", "2", "--json", "--trace",
                              str(d / "trace.json")], d / "simulate.json"),
        "footprint": run_json(["footprint", "--chip", "h100-sxm", "--num-chips", "8", "--hours", "24", "--region",
                               "us-east-1", "--json"], d / "footprint.json"),
        "regions": run_json(["footprint", "--chip", "h100-sxm", "--num-chips", "8", "--hours", "24",
                             "--compare-regions", "us-east-1,FRA,europe-north1", "--json"], d / "regions.json"),
    }
    hours = [f"2026-01-01T{h:02d}:00:00,{300 + 100 * ((h % 12) - 6) ** 2 // 36}" for h in range(24)]
    (d / "hourly.csv").write_text("timestamp,g_co2e_per_kwh\n" + "\n".join(hours) + "\n")
    files["footprint_best"] = run_json(["footprint", "--chip", "h100-sxm", "--num-chips", "8", "--hours", "3",
                                        "--grid-g-per-kwh", "300", "--intensity-csv", str(d / "hourly.csv"),
                                        "--json"], d / "footprint_best.json")
    files["trace"] = d / "trace.json"
    files["track"] = d / "measurement.json"
    files["track"].write_text(json.dumps(measurement().to_json(), indent=2), encoding="utf-8")
    files["compare"] = run_json(["compare", str(files["plan"]), str(files["track"]), "--json"], d / "compare.json")
    files["traffic"] = run_json(["traffic", *TRAFFIC, "--json"], d / "traffic.json")
    files["batch_time"] = run_json(["batch-time", *BATCH_TIME, "--json"], d / "batch_time.json")
    files["offload_heatmap"] = run_json(["offload", "heatmap", "--model", "1", "--seq-len", "4096,8192", "--device-gib",
                                         "16,48", "--host-gib", "32,128", "--json"], d / "heatmap.json")
    files["experiment"] = experiment_results(d / "experiment")
    return files


def experiment_results(out: Path) -> Path:
    """results.json of an experiment folder with two measured variants (experiment/'s own writers)."""
    from greentrain.experiment.report import build_report
    from greentrain.experiment.results import VariantResult, write_result
    from greentrain.experiment.runner import variant_dir
    from greentrain.report.experiment import write_report_files

    manifest = {"kind": "greentrain.experiment", "name": "two", "file": "", "combine": "one-at-a-time",
                "site": {"grid_g_co2e_per_kwh": 300.0, "pue": 1.5, "usd_per_hour": 3.6},
                "variants": [{"variant_id": v, "config_hash": v, "max_steps": 10, "axis_values": []}
                             for v in ("base", "lora")]}
    out.mkdir(parents=True)
    (out / "experiment.json").write_text(json.dumps(manifest))
    for vid, energy_j, train_s in (("base", 3.6e3, 50.0), ("lora", 1.8e3, 30.0)):
        r = VariantResult(variant_id=vid, config_hash=vid, status="ok", wall_s=2 * train_s, train_s=train_s,
                          energy_j=energy_j, train_energy_j=energy_j, cpu_energy_j=energy_j, pue=1.5,
                          facility_energy_j=1.5 * energy_j, grid_g_co2e_per_kwh=300.0,
                          emissions_kg_co2e=1.5 * energy_j / 3.6e6 * 0.3, cost_usd=0.1, cost_basis="cloud",
                          rouge1=40.0, num_steps=10, flop=1e10, flop_per_step=1e9, predicted_train_s=0.8 * train_s)
        (variant_dir(out, vid)).mkdir(parents=True)
        write_result(variant_dir(out, vid) / "result.json", r)
    write_report_files(out, build_report(out, []))
    return out / "results.json"
