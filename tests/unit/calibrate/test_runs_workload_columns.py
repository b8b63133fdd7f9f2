"""The runs CSV's optional workload columns (finetune, lora_rank, lora_targets, optimizer_dtype), selective
recomputation modes in the recompute cell, and the framework's defaults for empty cells; every bad cell names the
run, the column, the value and the rule, and the CLI exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.calibrate.validate import run_efficiency
from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for, framework_names
from greentrain.estimate.state_dtypes import workload_grad_dtype, workload_master_weights, workload_optimizer_dtype

HEADER = "run_id,framework,model,chip,num_chips,seq_len,global_batch,micro_batch,zero,recompute," \
         "optimizer_dtype,finetune,lora_rank,lora_targets,status,measured_step_time_s"


def _csv(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "runs.csv"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    return p


def test_pure_bf16_and_lora_cells(tmp_path: Path) -> None:
    (run,) = read_runs(_csv(tmp_path, "r1,fsdp2,llama3-8b,h100-sxm,8,2048,64,1,3,full,bf16,lora,32,q;v,ok,2"
                            .replace(";", " ")), frameworks=framework_names())
    w = run.scenario.workload
    # the grad dtype is left unset and resolves to bf16 under pure bf16 whatever the framework's
    assert (w.optimizer_dtype, w.master_weights, w.grad_dtype) == ("bf16", False, "")
    assert workload_grad_dtype(w, efficiency_for("h100-sxm", "fsdp2")) == "bf16"
    assert w.finetune.mode == "lora" and w.finetune.lora_rank == 32


def test_framework_defaults_fill_empty_cells(tmp_path: Path) -> None:
    """torchtune's recipes train in pure bf16 with full checkpointing; torchtitan's JobConfig default is
    selective layer-2; an op cell is torchtitan's op-SAC under any framework."""
    rows = ("r1,torchtune,llama3-8b,h100-sxm,8,2048,64,1,3,,,,,,ok,2",
            "r2,torchtitan,llama3-8b,h100-sxm,8,2048,64,1,3,,,,,,ok,2",
            "r3,megatron,llama3-8b,h100-sxm,8,2048,64,1,1,op,,,,,ok,2")
    r1, r2, r3 = read_runs(_csv(tmp_path, *rows), frameworks=framework_names())
    w1, tune = r1.scenario.workload, run_efficiency(r1)  # left unset: torchtune's precision recipe resolves them
    assert (w1.optimizer_dtype, w1.master_weights) == ("", None) and r1.strategy.recompute == "full"
    assert (workload_optimizer_dtype(w1, tune), workload_master_weights(w1, tune)) == ("bf16", False)
    assert r2.strategy.recompute == "selective" and run_efficiency(r2).selective_recompute == "layer-2"
    assert r3.strategy.recompute == "selective" and run_efficiency(r3).selective_recompute == "op"


@pytest.mark.parametrize(("row", "needle"), [
    ("r1,fsdp2,llama3-8b,h100-sxm,8,2048,64,1,3,,fp16,,,,ok,2",
     "runs[r1].optimizer_dtype='fp16': must be one of fp32, bf16"),
    ("r1,fsdp2,llama3-8b,h100-sxm,8,2048,64,1,3,sometimes,,,,,ok,2", "runs[r1].recompute='sometimes'"),
    ("r1,fsdp2,llama3-8b,h100-sxm,8,2048,64,1,3,,,full,8,,ok,2", "runs[r1].lora_rank='8'"),
    ("r1,torchtitn,llama3-8b,h100-sxm,8,2048,64,1,3,,,,,,ok,2", "did you mean torchtitan"),
])
def test_bad_cells(tmp_path: Path, row: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as e:
        read_runs(_csv(tmp_path, row), frameworks=framework_names())
    assert needle in str(e.value)


def test_lora_dtype_cell(tmp_path: Path) -> None:
    """The optional lora_dtype column: the adapters' precision of a LoRA row; a bad name or one on a full-training
    row names the run, the column, the value and the rule."""
    header = "run_id,framework,model,chip,num_chips,seq_len,global_batch,finetune,lora_dtype,status," \
             "measured_step_time_s"
    p = tmp_path / "runs.csv"
    p.write_text(f"{header}\nr1,ddp,llama3-8b,h200,1,4096,2,lora,fp32,ok,1\nr2,ddp,llama3-8b,h200,1,4096,2,lora,,ok,1\n")
    r1, r2 = read_runs(p, frameworks=framework_names())
    assert r1.scenario.workload.finetune.lora_dtype == "fp32" and r2.scenario.workload.finetune.lora_dtype is None
    for cells, needle in (("lora,fp16", "runs[r1].lora_dtype='fp16': must be one of model, fp32, fp32-autocast"),
                          ("full,fp32", "runs[r1].lora_dtype='fp32': applies to finetune: lora only")):
        p.write_text(f"{header}\nr1,ddp,llama3-8b,h200,1,4096,2,{cells},ok,1\n")
        with pytest.raises(ConfigError) as e:
            read_runs(p, frameworks=framework_names())
        assert needle in str(e.value)
    header = header.replace("lora_dtype", "lora_dropout")  # the optional lora_dropout column: 0 <= p < 1
    p.write_text(f"{header}\nr1,ddp,llama3-8b,h200,1,4096,2,lora,0.05,ok,1\n")
    assert read_runs(p, frameworks=framework_names())[0].scenario.workload.finetune.lora_dropout == 0.05
    p.write_text(f"{header}\nr1,ddp,llama3-8b,h200,1,4096,2,lora,1,ok,1\n")
    with pytest.raises(ConfigError, match=r"runs\[r1\].lora_dropout=1.0: must be >= 0 and < 1"):
        read_runs(p, frameworks=framework_names())


def test_cli_exit_2_on_bad_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path, "r1,fsdp2,llama3-8b,h100-sxm,8,2048,64,1,3,,fp16,,,,ok,2")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "runs[r1].optimizer_dtype='fp16'" in err and "Traceback" not in err


def test_cli_unknown_attention_kernel_names_the_known(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "llama3-8b", "--chip", "h100-sxm", "--num-chips", "8", "--global-batch", "64",
                 "--seq-len", "2048", "--attention-kernel", "fa4"]) == 2
    err = capsys.readouterr().err
    assert "fa4" in err and "fa3" in err


def test_validate_kernel_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--attention-kernel and --selective-recompute apply to every run; an unknown name exits 2 naming the known."""
    path = _csv(tmp_path, "r1,torchtitan,llama3-8b,a100-80gb,8,8192,8,1,3,selective,,,,,ok,20")
    times = []
    for kernel in ("fa2", "fa1-triton"):
        assert main(["validate", str(path), "--attention-kernel", kernel, "--json"]) == 0
        times.append(json.loads(capsys.readouterr().out)["rows"][0]["step_time_s"])
    assert times[1] > times[0]
    assert main(["validate", str(path), "--selective-recompute", "layer-0"]) == 2
    assert "layer-N" in capsys.readouterr().err
