"""Validation scores on hand-made cases, and calibration recovering constants it is given runs of."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from greentrain.calibrate.fit import calibrate
from greentrain.calibrate.runs import Measured, Run, read_runs
from greentrain.calibrate.validate import predict, spearman, summarize, validate
from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for, with_calibration
from greentrain.estimate.step import estimate_step

HEADER = "run_id,framework,model,chip,num_chips,seq_len,global_batch,micro_batch,dp,tp,pp,zero,status," \
         "measured_step_time_s,measured_mfu,measured_peak_memory_gib"
LAYOUTS = [(8, 1, 1), (4, 2, 1), (2, 4, 1), (4, 1, 2), (2, 2, 2), (2, 1, 4), (1, 8, 1), (1, 2, 4), (1, 4, 2),
           (1, 1, 8)]


def test_spearman_matches_definition() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties take average ranks: ranks (1.5, 1.5, 3) and (1, 2, 3) -> Pearson of the ranks
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(np.corrcoef([1.5, 1.5, 3], [1, 2, 3])[0, 1])


def _runs_from_truth(tmp_path: Path, truth_eff: object, mbs: tuple[int, ...] = (1, 2, 4)) -> list[Run]:
    """Runs of llama3.2-1b on 8 H100 whose 'measured' times are greentrain's own under ``truth_eff``."""
    rows = []
    for dp, tp, pp in LAYOUTS:
        for mb in mbs:
            rows.append(f"{dp}-{tp}-{pp}-{mb},,llama3.2-1b,h100-sxm,8,2048,64,{mb},{dp},{tp},{pp},0,ok,1,0.5,")
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    runs = []
    for r in read_runs(p):
        try:
            t = estimate_step(r.scenario, r.strategy, check_fit=False, eff=truth_eff).step_time_s  # type: ignore
        except Exception:
            continue
        runs.append(dataclasses.replace(r, measured=Measured(status="ok", step_time_s=t, mfu=0.5)))
    return runs


def test_scores_of_a_perfect_prediction(tmp_path: Path) -> None:
    eff = efficiency_for("h100-sxm", "megatron")
    runs = _runs_from_truth(tmp_path, eff)
    _, s = validate(runs, eff=eff)
    assert s.mfu_error_mean == pytest.approx(0.0, abs=1e-9)
    assert s.rank_correlation_median == pytest.approx(1.0)
    assert s.best_pick_exact == 1.0 and s.best_pick_good == 1.0


def test_mfu_error_is_on_the_measured_flop_count(tmp_path: Path) -> None:
    """A run measured at MFU 0.5 that greentrain predicts twice as fast is predicted at MFU 1.0: +50 points."""
    eff = efficiency_for("h100-sxm", "megatron")
    run = _runs_from_truth(tmp_path, eff)[0]
    t = predict(run, eff).step_time_s
    assert t
    slow = dataclasses.replace(run, measured=Measured(status="ok", step_time_s=2 * t, mfu=0.5))
    assert predict(slow, eff).measured_mfu_error == pytest.approx(0.5)


def test_best_pick_that_crashed_reaches_nothing(tmp_path: Path) -> None:
    eff = efficiency_for("h100-sxm", "megatron")
    runs = _runs_from_truth(tmp_path, eff)
    preds = [predict(r, eff) for r in runs]
    fastest = int(np.argmin([p.step_time_s for p in preds]))
    runs[fastest] = dataclasses.replace(runs[fastest], measured=Measured(status="failed"))
    s = summarize(runs, preds)
    assert s.best_pick_exact == 0.0 and s.best_pick_good == 0.0 and s.crashes_missed == 1


def test_calibration_recovers_the_constants_it_was_made_with(tmp_path: Path) -> None:
    start = efficiency_for("h100-sxm", "megatron")
    truth = dataclasses.replace(start, kernel_efficiency=0.62, host_layer_s=0.003)
    runs = _runs_from_truth(tmp_path, truth)
    c = calibrate(runs, start, holdout=0.25, seed=1, names=("kernel_efficiency", "host_layer_s"))
    assert c.fitted.kernel_efficiency == pytest.approx(0.62, rel=0.02)
    assert c.fitted.host_layer_s == pytest.approx(0.003, rel=0.1)
    assert c.holdout_after is not None and c.holdout_before is not None
    assert c.holdout_after.mfu_error_mean < 0.1 * c.holdout_before.mfu_error_mean


def test_profile_round_trip_and_bad_profiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth = dataclasses.replace(efficiency_for("h100-sxm", "megatron"), kernel_efficiency=0.6)
    runs = _runs_from_truth(tmp_path, truth)
    csv = tmp_path / "measured.csv"
    lines = [HEADER] + [f"{r.run_id},,llama3.2-1b,h100-sxm,8,2048,64,{r.strategy.micro_batch_size},{r.strategy.dp},"
                        f"{r.strategy.tp},{r.strategy.pp},0,ok,{r.measured.step_time_s},0.5," for r in runs]
    csv.write_text("\n".join(lines) + "\n")
    prof = tmp_path / "p.yaml"
    assert main(["calibrate", str(csv), "-o", str(prof), "--fit", "kernel_efficiency", "--json"]) == 0
    data = yaml.safe_load(prof.read_text())
    assert data["kind"] == "calibration" and data["chip"] == "h100-sxm"
    assert data["constants"]["kernel_efficiency"] == pytest.approx(0.6, rel=0.02)
    assert data["provenance"]["num_fit"] + data["provenance"]["num_holdout"] == len(runs)
    capsys.readouterr()
    assert main(["validate", str(csv), "--calibration", str(prof), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["mfu_error_mean_points"] < 1.0
    row = out["rows"][0]
    for k in ("run_id", "fits", "step_time_s", "mfu", "tokens_per_s_per_chip", "peak_memory_gib", "reason"):
        assert k in row
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: greentrain-calibration\nconstants: {kernel_efficiency: 1.7}\n")
    with pytest.raises(ConfigError, match="kernel_efficiency"):
        with_calibration(efficiency_for("h100-sxm"), str(bad))
    bad.write_text("kind: greentrain-calibration\nconstants: {kernel_effic: 0.7}\n")
    with pytest.raises(ConfigError, match="did you mean"):
        with_calibration(efficiency_for("h100-sxm"), str(bad))
    assert main(["plan", "--calibration", str(bad)]) == 2
    assert data["schema_version"] == 2
    # a profile written before schema 2 fitted reserved bytes against the device total: refused, one line
    bad.write_text("kind: greentrain-calibration\nconstants: {reserved_bytes: 3.0e9}\nprovenance: {num_fit: 9}\n")
    with pytest.raises(ConfigError, match=r"calibration\.constants\.reserved_bytes.*refit"):
        with_calibration(efficiency_for("h100-sxm"), str(bad))
    bad.write_text("kind: greentrain-calibration\nschema_version: 3\nconstants: {kernel_efficiency: 0.7}\n")
    with pytest.raises(ConfigError, match="schema_version"):
        with_calibration(efficiency_for("h100-sxm"), str(bad))


def test_few_runs_fit_kernel_efficiency_only(tmp_path: Path) -> None:
    """One or two runs of a user's job support one constant: kernel_efficiency, fitted on every run, and the
    result says so; no run at all is an error."""
    eff = efficiency_for("h100-sxm", "megatron")
    truth = dataclasses.replace(eff, kernel_efficiency=0.7)
    runs = _runs_from_truth(tmp_path, truth, mbs=(1,))[:2]
    c = calibrate(runs, eff)
    assert c.fitted_names == ("kernel_efficiency",) and c.num_fit == 2 and c.num_holdout == 0
    assert "only kernel_efficiency" in c.note
    assert c.fitted.kernel_efficiency == pytest.approx(0.7, abs=0.01)
    assert c.fitted.host_layer_s == c.start.host_layer_s
    failed = [dataclasses.replace(r, measured=Measured(status="failed")) for r in runs]
    with pytest.raises(ConfigError, match="no run to fit"):
        calibrate(failed, eff)
    # asked for constants these runs cannot support, and not for the one they can: refused, not replaced
    with pytest.raises(ConfigError, match=r"fit='host_layer_s': 2 run\(s\) support one constant, kernel_efficiency"):
        calibrate(runs, eff, names=("host_layer_s",))


def _measurement(step_time_s: float, peak_cuda_bytes: float = 0.0,
                 peak_cuda_reserved_bytes: float = 0.0) -> dict[str, object]:
    """measurement.json as `greentrain track` writes it (measure/summary.py), 10 steps of ``step_time_s``."""
    from greentrain.measure.summary import Measurement

    return Measurement(status="ok", duration_s=10 * step_time_s, world_size=1, num_steps=10,
                       step_time_s=step_time_s, first_step_time_s=step_time_s, forward_s=0.0, backward_s=0.0,
                       tokens=0.0, tokens_per_s=0.0, samples_per_s=0.0, flop=0.0, flop_per_step=0.0,
                       flop_per_s=0.0, memory_bytes=peak_cuda_bytes or 1e9, peak_rss_bytes=1e9,
                       peak_cuda_bytes=peak_cuda_bytes, gpu_energy_j=0.0, cpu_energy_j=0.0, ram_energy_j=0.0,
                       it_energy_j=0.0, energy_j=0.0, energy_j_per_step=0.0, power_w=0.0, pue=1.0,
                       peak_cuda_reserved_bytes=peak_cuda_reserved_bytes).to_json()


def test_track_directories_are_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`greentrain track` outputs (measurement.json) with the scenario that was run calibrate like CSV rows."""
    truth = dataclasses.replace(efficiency_for("h100-sxm", "megatron"), kernel_efficiency=0.65)
    dirs = []
    for r in _runs_from_truth(tmp_path, truth):
        d = tmp_path / f"track-{r.run_id}"
        d.mkdir()
        s = r.strategy
        (d / "scenario.yaml").write_text(yaml.safe_dump({
            "model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
            "workload": {"global_batch_size": 64, "seq_len": 2048, "num_steps": 10},
            "strategy": {"dp": s.dp, "tp": s.tp, "pp": s.pp, "micro_batch_size": s.micro_batch_size}}))
        (d / "measurement.json").write_text(json.dumps(_measurement(r.measured.step_time_s)))
        dirs.append(str(d))
    prof = tmp_path / "p.yaml"
    assert main(["calibrate", *dirs, "-o", str(prof), "--fit", "kernel_efficiency"]) == 0
    assert yaml.safe_load(prof.read_text())["constants"]["kernel_efficiency"] == pytest.approx(0.65, rel=0.03)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "measurement.json").write_text("{}")
    capsys.readouterr()
    assert main(["calibrate", str(empty), "-o", str(tmp_path / "q.yaml")]) == 2
    assert "scenario" in capsys.readouterr().err


def test_track_run_reads_the_reserved_peak(tmp_path: Path) -> None:
    """A track directory's peak memory is the caching allocator's reserved peak when it was recorded (what
    MemoryBreakdown.allocator_bytes predicts); older records with the allocated peak only are read as it."""
    from greentrain.calibrate.profile import read_track_run

    d = tmp_path / "run"
    d.mkdir()
    (d / "scenario.yaml").write_text(yaml.safe_dump({
        "model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
        "workload": {"global_batch_size": 64, "seq_len": 2048, "num_steps": 10},
        "strategy": {"dp": 8, "micro_batch_size": 1}}))
    m = _measurement(1.0, peak_cuda_bytes=3e10, peak_cuda_reserved_bytes=3.6e10)
    (d / "measurement.json").write_text(json.dumps(m))
    assert read_track_run(d).measured.peak_memory_bytes == 3.6e10
    (d / "measurement.json").write_text(json.dumps({k: v for k, v in m.items() if "reserved" not in k}))
    assert read_track_run(d).measured.peak_memory_bytes == 3e10


def test_calibration_recovers_the_cross_node_pipeline_floor(tmp_path: Path) -> None:
    """Runs on 4 nodes with pipelines across them, measured as greentrain's own with a per-TP-rank host floor
    of 2 ms (and 3 ms of host time per layer): the fit finds both."""
    start = efficiency_for("h100-sxm", "megatron")
    truth = dataclasses.replace(start, host_layer_s=0.003, host_layer_s_per_tp_pp_nodes=0.002)
    rows = [f"{dp}-{tp}-{pp}-{mb},,llama3.2-1b,h100-sxm,32,2048,64,{mb},{dp},{tp},{pp},0,ok,1,0.5,"
            for dp, tp, pp in [(32, 1, 1), (16, 2, 1), (8, 4, 1), (8, 1, 4), (4, 2, 4), (2, 4, 4), (1, 8, 4),
                               (4, 8, 1), (2, 8, 2), (16, 1, 2), (8, 2, 2), (4, 4, 2)] for mb in (1, 2)]
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    runs = [dataclasses.replace(r, measured=Measured(status="ok", mfu=0.5, step_time_s=estimate_step(
        r.scenario, r.strategy, check_fit=False, eff=truth).step_time_s)) for r in read_runs(p)]
    c = calibrate(runs, start, holdout=0.2, seed=0, names=("host_layer_s", "host_layer_s_per_tp_pp_nodes"))
    assert c.fitted.host_layer_s == pytest.approx(0.003, rel=0.1)
    assert c.fitted.host_layer_s_per_tp_pp_nodes == pytest.approx(0.002, rel=0.1)
