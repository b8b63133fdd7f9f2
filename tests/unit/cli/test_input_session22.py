"""Bad input refused in one line, and one answer per question (the session-22 review of the command line): a run
counted in steps has the token bound a run in tokens has; a chip or region listed twice in search; traffic's
chip-only flags without a chip; a calibration profile of another chip or framework; a simulation too large to
event; runs-CSV cells named once with their run; plan's whole MoE strategy and optimizer dtype as validate reads
the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.calibrate.validate import validate
from greentrain.cli.main import main


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    return err[0]


def test_a_run_counted_in_steps_has_the_token_bound(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["plan", "--steps", "1e10", "--global-batch", "100000000", "--seq-len", "8192", "--json"], capsys)
    assert "num_steps=10000000000" in line and "1e+16 tokens" in line


@pytest.mark.parametrize("flag, value", [("--chip", "h100,h100-sxm"), ("--region", "FRA,FRA")])
def test_search_lists_each_chip_and_region_once(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["search", "--model", "llama3.2-1b", "--num-chips", "8", "--seq-len", "2048", "--global-batch",
                     "64", flag, value], capsys)
    assert f"{flag}='{value}'" in line and "twice" in line


@pytest.mark.parametrize("flag, value", [("--utilization", "2"), ("--precision", "foo")])
def test_traffic_chip_flags_need_a_chip(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["traffic", "--dataset_size", "1e12", "--num_layers", "8", "--d_model", "1024", flag, value],
                    capsys)
    assert "applies with --chip only" in line


@pytest.mark.parametrize("chip, framework, said", [("a100-80gb", "megatron", "on chip a100-80gb, not h100-sxm"),
                                                    ("h100", "nemo", "for framework nemo, not megatron")])
def test_a_calibration_profile_applies_to_its_own_chip_and_framework(
        chip: str, framework: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(f"kind: calibration\nschema_version: 2\nchip: {chip}\nframework: {framework}\n"
                    "constants: {kernel_efficiency: 0.5}\n", encoding="utf-8")
    assert said in _refused(["plan", "--dp", "64", "--calibration", str(prof)], capsys)


def test_a_simulation_too_large_to_event_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["simulate", "step", "--model", "llama3.2-1b", "--num-chips", "8", "--seq-len", "16",
                     "--global-batch", "100000000", "--dp", "4", "--pp", "2", "--tp", "1", "--zero", "1",
                     "--recompute", "full", "--micro-batch", "1"], capsys)
    assert "step.num_micro_batches=25000000" in line


HEAD = "run_id,model,chip,num_chips,seq_len,global_batch"


@pytest.mark.parametrize("extra, cell, said", [
    ("flash_attention", "2", "runs[r1].flash_attention='2': must be true or false"),
    ("sp", "maybe", "runs[r1].sp='maybe': must be true or false"),
    ("precision", "fp8", "runs[r1].precision='fp8': chip a100-80gb has no fp8 peak"),
])
def test_a_bad_cell_is_named_once_with_its_run(extra: str, cell: str, said: str, tmp_path: Path) -> None:
    from greentrain.errors import ConfigError

    path = tmp_path / "runs.csv"
    path.write_text(f"{HEAD},{extra}\nr1,llama3-8b,a100-80gb,8,4096,64,{cell}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        validate(read_runs(path))
    assert str(e.value).startswith(said)


def test_a_sequence_past_the_learned_positions_names_its_run(tmp_path: Path) -> None:
    from greentrain.errors import ConfigError

    path = tmp_path / "runs.csv"
    path.write_text(f"{HEAD}\nr1,gpt3-175b,h100-sxm,8,4096,64\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^runs\[r1\]\.seq_len=4096: must be <= 2048"):
        read_runs(path)


def test_excel_utf8_and_open_quotes(tmp_path: Path) -> None:
    from greentrain.errors import ConfigError

    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + f"{HEAD}\nr1,llama3-8b,h100-sxm,8,4096,64\n".encode())
    assert read_runs(bom)[0].run_id == "r1"
    quote = tmp_path / "quote.csv"
    quote.write_text(f'{HEAD}\nr1,"llama3-8b,h100-sxm,8,4096,64\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a CSV greentrain can read"):
        read_runs(quote)


def test_a_measured_figure_without_a_status_is_a_run_that_ran(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text(f"{HEAD},measured_step_time_s\nr1,llama3.2-1b,h100-sxm,8,4096,64,0.9\n", encoding="utf-8")
    (run,) = read_runs(path)
    assert run.measured.ran is True
    _, summary = validate((run,))
    assert summary.num_ran == 1 and summary.throughput_error_mean is not None


def _plan(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["plan", "--json", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


def test_plan_answers_what_validate_answers_for_the_same_run(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A nemo MoE row without etp runs its experts at etp 1 (Megatron-Bridge's presets) in plan as in validate, and
    --optimizer-dtype bf16 alone is the runs CSV's pure bf16 (no fp32 master)."""
    moe = ["--model", "mixtral-8x7b", "--chip", "h100-sxm", "--num-chips", "64", "--seq-len", "4096",
           "--global-batch", "256", "--micro-batch", "1", "--framework", "nemo", "--dp", "8", "--tp", "2",
           "--pp", "4", "--ep", "8", "--zero", "1", "--sp", "--recompute", "full"]
    bf16 = ["--model", "llama3-8b", "--chip", "h100-sxm", "--num-chips", "16", "--seq-len", "4096",
            "--global-batch", "64", "--micro-batch", "1", "--dp", "16", "--tp", "1", "--pp", "1", "--zero", "1",
            "--recompute", "none", "--optimizer-dtype", "bf16"]
    plan_moe, plan_bf16 = _plan(moe, capsys), _plan(bf16, capsys)
    assert plan_moe["strategy"]["etp"] == 1  # type: ignore[index]
    assert _plan([*moe, "--etp", "2"], capsys)["step_time_s"] != plan_moe["step_time_s"]
    path = tmp_path / "runs.csv"
    path.write_text("run_id,framework,model,chip,num_chips,seq_len,global_batch,micro_batch,dp,tp,pp,ep,zero,sp,"
                    "recompute,optimizer_dtype\n"
                    "moe,nemo,mixtral-8x7b,h100-sxm,64,4096,256,1,8,2,4,8,1,true,full,\n"
                    "bf16,megatron,llama3-8b,h100-sxm,16,4096,64,1,16,1,1,1,1,false,none,bf16\n", encoding="utf-8")
    preds, _ = validate(read_runs(path))
    assert preds[0].step_time_s == pytest.approx(plan_moe["step_time_s"], rel=1e-12)
    assert preds[1].step_time_s == pytest.approx(plan_bf16["step_time_s"], rel=1e-12)
    state = plan_bf16["optimizer_state"]
    assert isinstance(state, dict) and state["master_weights"] is False


def test_a_partial_strategy_in_a_file_is_pins_in_plan_as_in_search(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`strategy: {tp: 2}` pins tp and leaves the rest to the planner (it was a whole strategy with dp 1, refused),
    the answer search gives for the same file."""
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3.2-1b\ncluster: {chip: h100-sxm, num_chips: 8}\n"
                   "workload: {global_batch_size: 16, seq_len: 2048, train_tokens: 1.0e+9}\nstrategy: {tp: 2}\n",
                   encoding="utf-8")
    plan = _plan([str(job)], capsys)
    assert plan["strategy"]["tp"] == 2 and plan["strategy"]["chosen_by_planner"]  # type: ignore[index]
    assert main(["search", str(job), "--top", "1", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["ranked"][0]
    assert best["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("framework, zero", [("torchtitan", 3), ("llm-foundry", 3), ("nemo", 1), ("megatron", 0),
                                             ("", 0)])
def test_an_empty_zero_cell_is_the_frameworks_default(framework: str, zero: int, tmp_path: Path) -> None:
    """A torchtitan row without a zero cell ran FSDP's full sharding (it was ZeRO 0, which torchtitan does not run,
    so the row was predicted not to run); a nemo row the distributed optimizer."""
    path = tmp_path / "runs.csv"
    path.write_text(f"{HEAD},framework\nr1,llama3-8b,h100-sxm,8,4096,64,{framework}\n", encoding="utf-8")
    (run,) = read_runs(path)
    assert run.strategy.zero == zero
    preds, _ = validate((run,))
    assert preds[0].step_time_s is not None


def test_an_empty_market_is_not_on_demand(capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["footprint", "--chip", "h100", "--num-chips", "8", "--hours", "10", "--region", "FRA",
                     "--market", ""], capsys)
    assert "--market=''" in line and "on-demand, spot" in line


MEASURED_HEAD = "chip,host_mem_gib,dev_mem_gib,seq_len,model_b,tokens_per_s\n"


@pytest.mark.parametrize("row, said", [("h100-sxm,64,16,4096,1", "needs one cell per column"),
                                       ("h100-sxm,64,16,4096,1,nan", "tokens_per_s='nan': must be finite and >= 0"),
                                       ("h100-sxm,64,16,4096,1,-5", "tokens_per_s='-5': must be finite and >= 0")])
def test_a_measured_sweep_row_is_checked(row: str, said: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A short row was a TypeError traceback; NaN and negative rates were scored (and NaN written as bare JSON)."""
    csv_path = tmp_path / "m.csv"
    csv_path.write_text(MEASURED_HEAD + row + "\n", encoding="utf-8")
    line = _refused(["offload", "heatmap", "--model", "1", "--seq-len", "4096", "--device-gib", "16", "--host-gib",
                     "64", "--measured", str(csv_path), "--json"], capsys)
    assert "measured line 2" in line and said in line


def test_a_damaged_experiment_result_is_refused_not_taken_as_not_run(tmp_path: Path) -> None:
    from greentrain.errors import ConfigError
    from greentrain.experiment.results import read_result

    path = tmp_path / "result.json"
    assert read_result(path) is None  # never written: not run
    path.write_text("{bad", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot be read"):
        read_result(path)  # a report would have dropped the variant's measured row from every summary


def test_summarizing_a_run_again_replaces_its_emissions_row(tmp_path: Path) -> None:
    from greentrain.measure.codecarbon import read_emissions
    from greentrain.measure.outputs import _emissions_text

    path = tmp_path / "emissions.csv"
    row = {"run_id": "r1", "project_name": "p", "emissions": 1.0}
    path.write_text(_emissions_text(path, row), encoding="utf-8")
    path.write_text(_emissions_text(path, {**row, "emissions": 2.0}), encoding="utf-8")  # the same run again
    path.write_text(_emissions_text(path, {**row, "run_id": "r2"}), encoding="utf-8")  # another run
    rows = read_emissions(path)
    assert [(r["run_id"], r["emissions"]) for r in rows] == [("r1", 2.0), ("r2", 1.0)]


@pytest.mark.parametrize("argv, said", [
    (["experiment", "run", "examples/tiny-causal-lm.yaml", "--out", "OUT", "--ray-address", "x:1"],
     "--ray-address='x:1': applies to --executor ray (not local)"),
    (["footprint", "--chip", "h100-sxm", "--num-chips", "1", "--hours", "1", "--grid-g-per-kwh", "56",
      "--market-based"], "--market-based=True: applies to a --region's grid"),
    (["offload", "train", "1", "0.01", "512", "tiny", "--host-gib", "500", "--device", "cpu", "--steps", "1"],
     "--host-gib='500': conflicts with the positional"),
])
def test_a_flag_the_others_make_moot_is_refused(argv: list[str], said: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[3])  # the repository: examples/
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert said in _refused(argv, capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra", ["--backend gloo", "--collectives native", "--timeout-s 60", "--help"])
def test_a_cases_line_takes_no_launch_option_even_at_its_default(extra: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cases = tmp_path / "c.txt"
    cases.write_text(f"matmul --mesh 1x2 --m 8 --k 8 --n 8 --a 1x1,1x2 --b 1x2,1x1 --c 1x1,1x1 {extra}\n",
                     encoding="utf-8")
    line = _refused(["emulate", "cases", str(cases)], capsys)
    assert f"{cases}:1=" in line and extra.split()[0] in line


def test_footprint_reads_a_track_measurement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A measurement.json names its ranks world_size and its span duration_s: footprint takes them, and its
    measured energy comes back (it refused the file for a missing num_chips, flags or not)."""
    out = tmp_path / "t"
    assert main(["track", "--grid-g-per-kwh", "56", "--out", str(out), "--", "true"]) == 0
    measured = json.loads((out / "measurement.json").read_text())
    capsys.readouterr()
    got = _json_of(["footprint", str(out / "measurement.json"), "--region", "fr", "--json"], capsys)
    assert got["energy_kwh"] == pytest.approx(measured["energy_kwh"], rel=1e-9)
    flags = _json_of(["footprint", str(out / "measurement.json"), "--region", "fr", "--num-chips", "8",
                      "--hours", "1", "--json"], capsys)
    assert flags["device_hours"] == pytest.approx(8.0)


def _json_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


def test_a_study_shows_its_own_tasks_quality_before_any_result() -> None:
    """A causal-lm study showed ROUGE columns until its first variant finished (the default task's)."""
    from greentrain.experiment.results import QUALITY_BY_TASK, quality_of

    assert quality_of([], "causal-lm") == QUALITY_BY_TASK["causal-lm"] != QUALITY_BY_TASK["summarization"]
    assert quality_of([]) == QUALITY_BY_TASK["summarization"]


@pytest.mark.parametrize(("argv", "said"), [
    (["plan", "--micro-batches", "1e12"], "--micro-batches=1000000000000: must be a whole number from 1 to 100,000"),
    (["plan", "--host-threads", "200000"], "--host-threads=200000: must be a whole number from 1 to 100,000"),
    (["plan", "--host-threads", "0"], "--host-threads=0: must be a whole number >= 1"),  # said as given, not 0.0
    (["train", "--micro-batches", "1e12", "--steps", "1"],
     "offload.micro_batches=1000000000000: must be a whole number from 1 to 100,000"),
])
def test_offload_bounds_name_the_flag(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """(Session 23.) The planner's bound on micro-batches and host threads is said by the flag that gave the value
    (it named the policy's field, offload.rounds_per_step); `train`'s micro-batches are bounded before they become
    a global batch."""
    caps = ["--model", "1", "--seq-len", "128", "--device-gib", "1", "--host-gib", "2"]
    assert said in _refused(["offload", argv[0], *caps, *argv[1:]], capsys)
