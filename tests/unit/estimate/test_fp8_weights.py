"""fp8 primary weights (Workload.fp8_weights; Transformer Engine's Float8Tensor parameters, NeMo fp8_params,
Megatron-LM --fp8-param-gather): 1 byte per parameter for the model's copy and its ZeRO gather, the fp32 master
unchanged; said in a scenario file, a flag or a runs-CSV cell, and refused in one line without fp8."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict
from greentrain.workload import Workload

BASE = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                           "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 10,
                                        "precision": "fp8"}})


def test_the_weights_take_one_byte_and_the_master_stays() -> None:
    fp8w = dataclasses.replace(BASE, workload=dataclasses.replace(BASE.workload, fp8_weights=True))
    for zero in (0, 1):  # ZeRO 1: the gathered weights are fp8, the exchange smaller
        s = Strategy(dp=16, micro_batch_size=1, recompute="full", zero=zero)
        a, b = estimate_step(BASE, s, check_fit=False), estimate_step(fp8w, s, check_fit=False)
        assert b.memory.weights_bytes == pytest.approx(a.memory.weights_bytes / 2)
        assert b.memory.optimizer_bytes == pytest.approx(a.memory.optimizer_bytes)
        assert b.dp_comm_time_s <= a.dp_comm_time_s


def test_a_file_says_it_and_reads_it_back() -> None:
    w = Workload.from_dict({"global_batch_size": 8, "seq_len": 1024, "precision": "fp8", "fp8_weights": "true"})
    assert w.fp8_weights and w.to_dict()["fp8_weights"] is True
    assert dataclasses.replace(w, fp8_weights=False).to_dict()["fp8_weights"] is False  # said: kept
    assert "fp8_weights" not in dataclasses.replace(w, fp8_weights=None).to_dict()  # unset: the framework's
    with pytest.raises(ConfigError, match=r"workload.fp8_weights.*applies to precision fp8 only"):
        Workload(global_batch_size=8, seq_len=1024, precision="bf16", fp8_weights=True)


def test_the_flag_needs_fp8(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--precision", "bf16", "--fp8-weights"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--fp8-weights=True: applies to --precision fp8 only" in err[0]
    assert main(["plan", "--precision", "fp8", "--fp8-weights"]) == 0
    assert "weights kept and gathered in fp8" in capsys.readouterr().out
    assert main(["plan", "--precision", "fp8", "--fp8-weights", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fp8_weights"] is True


def test_a_runs_csv_cell(tmp_path: Path) -> None:
    head = "run_id,model,chip,num_chips,seq_len,global_batch,micro_batch,precision,fp8_weights,status," \
           "measured_step_time_s\n"
    p = tmp_path / "runs.csv"
    p.write_text(head + "r1,llama3-8b,h100-sxm,8,2048,8,1,fp8,true,ok,1\nr2,llama3-8b,h100-sxm,8,2048,8,1,fp8,,ok,1\n")
    r1, r2 = read_runs(p)
    assert r1.scenario.workload.fp8_weights is True and r2.scenario.workload.fp8_weights is None
    for cell, rule in (("maybe", "must be true or false"), ("true", "applies to precision fp8 only")):
        p.write_text(head + f"r1,llama3-8b,h100-sxm,8,2048,8,1,{'bf16' if cell == 'true' else 'fp8'},{cell},ok,1\n")
        with pytest.raises(ConfigError, match=rf"runs\[r1\].fp8_weights.*{rule}"):
            read_runs(p)


def test_the_nemo_family_keeps_fp8_weights_by_default() -> None:
    """NeMo 2's and Megatron Bridge's fp8 precision presets set fp8_param_gather (efficiency.yaml fp8_weights);
    Megatron-LM's --fp8-param-gather and torchtitan's float8 all-gather are off unless asked; a bf16 run has none."""
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.estimate.state_dtypes import workload_fp8_weights

    w = BASE.workload
    for framework, kept in (("nemo", True), ("megatron-bridge", True), ("nemo-deepep", True), ("megatron", False),
                            ("torchtitan", False)):
        assert workload_fp8_weights(w, efficiency_for("h100-sxm", framework)) is kept, framework
    nemo = efficiency_for("h100-sxm", "nemo")
    assert not workload_fp8_weights(dataclasses.replace(w, fp8_weights=False), nemo)
    assert not workload_fp8_weights(dataclasses.replace(w, precision="bf16"), nemo)


def test_plan_says_whose_choice_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--framework", "nemo", "--precision", "fp8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fp8_weights"] is True
    assert main(["plan", "--framework", "nemo", "--precision", "fp8", "--no-fp8-weights", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fp8_weights"] is False
