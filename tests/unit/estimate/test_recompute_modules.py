"""Megatron Core's recompute_modules as selective-recomputation modes (estimate/recompute.py): what each module
repeats (time, FLOPs, communication) and frees (memory)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.memory import layer_activation, layer_activation_bytes
from greentrain.estimate.recompute import check_selective_mode, modules_mask, op_module_masks
from greentrain.estimate.step import estimate_step
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict

BIT = {m: modules_mask(m) for m in ("core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts",
                                    "mla_up_proj")}


def _masks(model: str) -> dict[str, int]:
    ops = model_ops(load_model(model), 1, 1024, 2.0, 0, True)
    out: dict[str, int] = {}
    for g in ops.layers:
        out.update({op.name: m for op, m in zip(g.ops, op_module_masks(g.ops), strict=True)})
    return out


def test_modes_name_megatron_modules_once_each() -> None:
    assert check_selective_mode("layernorm+moe_act") == "layernorm+moe_act"
    assert modules_mask("moe_act+layernorm") == BIT["layernorm"] | BIT["moe_act"]
    assert modules_mask("attention") == modules_mask("op") == modules_mask("layer-2") == 0
    for bad in ("layernorm+layernorm", "layernorm+bogus", "+", "core-attn"):
        with pytest.raises(ConfigError, match=r"core_attn, layernorm, mlp, moe, moe_act"):
            check_selective_mode(bad)


def test_each_op_belongs_to_the_module_that_megatron_recomputes() -> None:
    dense = _masks("llama3-8b")
    assert dense["attn.flash"] == BIT["core_attn"]
    assert dense["mlp.norm"] == dense["mlp.up"] == dense["mlp.down"] == BIT["mlp"]  # the norm fused in fc1
    assert dense["attn.norm"] == 0  # fused into the QKV LayerNormLinear: not recomputable on its own
    moe = _masks("qwen3-30b-a3b")
    assert moe["mlp.norm"] == BIT["layernorm"]  # a TENorm module before the MoE block
    assert moe["mlp.experts.act"] == BIT["moe"] | BIT["moe_act"]
    assert moe["mlp.router"] == moe["mlp.experts.up"] == BIT["moe"]
    mla = _masks("deepseek-v3")
    assert mla["attn.norm"] == BIT["layernorm"]
    assert mla["attn.q_up"] == mla["attn.kv_up"] == mla["attn.rope"] == BIT["mla_up_proj"]
    assert mla["mlp.shared.up"] == BIT["moe"] | BIT["shared_experts"]


def test_output_discarding_modules_free_their_outputs() -> None:
    spec = load_model("gpt-oss-120b")
    b, s, e = 1, 4096, 2.0
    la = layer_activation(spec, b, s, e, moe=True, flash=True)
    def kept(mode: str) -> float:
        return float(layer_activation_bytes(la, tp=1, sp=False, recompute="selective", mode=mode))
    none = float(layer_activation_bytes(la, tp=1, sp=False, recompute="none"))
    t, h = b * s, spec.hidden_size
    assert none - kept("layernorm") == pytest.approx(e * t * h)  # the router's bf16 input
    assert none - kept("moe_act") == pytest.approx(e * t * spec.top_k * spec.expert_ffn_hidden_size)
    assert kept("moe") < kept("layernorm+moe_act") < none
    assert kept("moe+moe_act") == pytest.approx(kept("moe"))  # moe_act is inside the MoE block
    assert none - kept("core_attn") == pytest.approx(la.scores_bytes)  # a fused kernel's log-sum-exp


def _gpt_oss(precision: str = "bf16"):  # type: ignore[no-untyped-def]
    return scenario_from_dict({"model": "gpt-oss-120b",
                               "cluster": {"chip": "b200", "num_chips": 16, "chips_per_node": 8},
                               "workload": {"global_batch_size": 32, "seq_len": 4096, "num_steps": 1,
                                            "precision": precision}})


def test_the_moe_module_repeats_its_all_to_alls_and_core_attn_its_fused_kernel() -> None:
    sc = _gpt_oss()
    eff = efficiency_for("b200", "nemo")
    s = Strategy(dp=16, ep=16, etp=1, zero=1, micro_batch_size=1, recompute="selective")
    def step(mode: str, recompute: str = "selective"):  # type: ignore[no-untyped-def]
        e = dataclasses.replace(eff, selective_recompute=mode)
        return estimate_step(sc, dataclasses.replace(s, recompute=recompute), check_fit=False, eff=e)
    none, moe = step("moe", "none"), step("moe")
    assert moe.ep_comm_time_s == pytest.approx(1.5 * none.ep_comm_time_s)  # 3 passes instead of 2
    assert step("core_attn").recompute_time_s > 0.0 == step("attention").recompute_time_s  # flash: nothing more
    assert 0.0 < step("layernorm+moe_act").recompute_time_s < step("moe").recompute_time_s


def test_under_fp8_inputs_moe_act_frees_nothing_transformer_engine_keeps() -> None:
    sc = _gpt_oss("fp8")
    eff = dataclasses.replace(efficiency_for("b200", "nemo"), selective_recompute="moe_act")
    s = Strategy(dp=16, ep=16, etp=1, zero=1, micro_batch_size=1)
    act = [estimate_step(sc, dataclasses.replace(s, recompute=r), check_fit=False, eff=eff).memory.activations_bytes
           for r in ("none", "selective")]
    assert act[1] == pytest.approx(act[0])  # fc2 keeps its fp8 copy; the 16-bit output was never kept


def test_a_runs_csv_names_the_modules_in_its_recompute_cell(tmp_path: Path) -> None:
    head = "run_id,framework,model,chip,num_chips,seq_len,global_batch,micro_batch,ep,recompute\n"
    ok = tmp_path / "ok.csv"
    ok.write_text(head + "r1,nemo,gpt-oss-120b,b200,16,4096,32,1,16,layernorm+moe_act\n", encoding="utf-8")
    (run,) = read_runs(ok)
    assert run.strategy.recompute == "selective" and run.selective_recompute == "layernorm+moe_act"
    bad = tmp_path / "bad.csv"
    bad.write_text(head + "r1,nemo,gpt-oss-120b,b200,16,4096,32,1,16,layernorm+moe_ac\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"r1.*recompute.*layernorm\+moe_ac.*Megatron Core modules"):
        read_runs(bad)


def test_plan_says_what_selective_recomputation_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from greentrain.cli.main import main

    assert main(["plan", "--framework", "nemo", "--recompute", "selective", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["efficiency"]["selective_recompute"] == "core_attn"
    assert main(["plan", "--framework", "nemo", "--recompute", "selective",
                 "--selective-recompute", "layernorm+mlp"]) == 0
    assert "layernorm+mlp" in capsys.readouterr().out


def test_lora_adapters_are_recomputed_with_their_base_ops_module() -> None:
    """Megatron Core's ``mlp`` module repeats the MLP's LoRA adapters (their GEMMs and element-wise kernels) with
    their base GEMMs: each adapter op takes its base op's module, whatever its target's name (``gate`` beside the
    fused gate/up GEMM included); the attention projections' adapters belong to no module."""
    from greentrain.model.finetune import Finetune
    from greentrain.model.load import load_model
    from greentrain.model.ops import model_ops

    ft = Finetune(mode="lora", lora_targets=("q", "gate", "up", "down"), lora_dtype="fp32")
    ops = model_ops(load_model("llama3-8b"), 1, 1024, 2.0, 0, True, ft).layers[-1].ops
    masks = {op.name: m for op, m in zip(ops, op_module_masks(ops), strict=True) if ".lora_" in op.name}
    mlp = modules_mask("mlp")
    assert {n for n, m in masks.items() if m == mlp} == {n for n in masks if n.startswith("mlp.")}
    assert len([n for n in masks if n.startswith("mlp.")]) == 12  # A, B, add and cast of gate, up and down
    assert all(m == 0 for n, m in masks.items() if n.startswith("attn."))
