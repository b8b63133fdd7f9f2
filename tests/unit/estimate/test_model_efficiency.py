"""A profile as it runs one model (compose.model_efficiency): NeMo AutoModel trains Hugging Face dense models with
their eager norms and GLU, and its own MoE models with Transformer Engine's RMSNorm and a fused SwiGLU."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.estimate.compose import model_efficiency
from greentrain.estimate.compute import is_eager
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.estimate.vector import estimate_steps
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import scenario_from_dict


def test_automodel_fuses_its_moe_models_norms_and_glu_only() -> None:
    am = efficiency_for("h100-sxm", "nemo-automodel")
    moe = model_efficiency(am, load_model("qwen3-30b-a3b"))
    assert am.eager_ops == ("norm", "rope", "glu", "gelu") and not am.fused_glu
    assert moe.eager_ops == ("rope", "glu", "gelu") and moe.fused_glu  # every norm fused (TE RMSNorm)
    assert model_efficiency(am, load_model("deepseek-v3")) is moe  # one object per profile (the caches key on it)
    ops = {op.name: op for g in model_ops(load_model("deepseek-v3"), 1, 4096, 2.0, 0, True).layers for op in g.ops}
    # the routed experts' GLU is Megatron's fused kernel; the dense layers' and the shared expert's stay eager
    assert not is_eager(ops["mlp.experts.act"], moe)
    assert is_eager(ops["mlp.act"], moe) and is_eager(ops["mlp.shared.act"], moe)
    assert is_eager(ops["attn.rope"], moe)  # its RoPE: torch ops
    assert model_efficiency(am, load_model("llama3-8b")) is am  # a Hugging Face dense model: as the profile says
    ddp = efficiency_for("h100-sxm", "ddp")  # transformers' own MoE blocks: eager as its dense models
    assert model_efficiency(ddp, load_model("qwen3-30b-a3b")) is ddp


def test_the_plan_and_the_search_run_the_moe_model_fused() -> None:
    sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}})
    am = efficiency_for("h100-sxm", "nemo-automodel")
    s = Strategy(dp=8, ep=8, zero=3, recompute="full", micro_batch_size=4)
    fused = estimate_step(sc, s, check_fit=False, eff=am)
    eager = estimate_step(sc, s, check_fit=False, eff=dataclasses.replace(am, moe_fused_ops=()))
    assert fused.step_time_s < 0.9 * eager.step_time_s  # the eager norm and GLU chains were a tenth of it and more
    vec = estimate_steps(sc, StrategyTable.from_strategies([s]), check_fit=False, eff=am)
    assert vec.step_time_s[0] == fused.step_time_s


def test_megatron_runs_a_yarn_scaled_rope_unfused() -> None:
    """Megatron Core >= 0.16 falls back to its unfused RoPE when YaRN's factor is not 1 (TE's fused kernel takes
    none): gpt-oss under the NeMo profiles pays the eager chain; Llama (no YaRN) and the frameworks whose rope is
    eager or compiled anyway are as their profiles say."""
    gpt_oss, llama = load_model("gpt-oss-120b"), load_model("llama3-8b")
    nemo = efficiency_for("h100-sxm", "nemo")
    assert not nemo.scaled_rope_fused and "rope" not in nemo.eager_ops
    scaled = model_efficiency(nemo, gpt_oss)
    assert scaled.eager_ops == ("rope",) and model_efficiency(nemo, load_model("gpt-oss-20b")) is scaled
    assert model_efficiency(nemo, llama) is nemo
    for fw in ("torchtitan", "torchtitan-compile", "ddp"):
        eff = efficiency_for("h100-sxm", fw)
        assert model_efficiency(eff, gpt_oss) is eff
    rope = next(op for g in model_ops(gpt_oss, 1, 4096, 2.0, 0, True).layers for op in g.ops if op.name == "attn.rope")
    assert is_eager(rope, scaled) and not is_eager(rope, nemo)
    sc = scenario_from_dict({"model": "gpt-oss-120b", "cluster": {"chip": "h100-sxm", "num_chips": 64},
                             "workload": {"global_batch_size": 1280, "seq_len": 4096, "num_steps": 1}})
    s = Strategy(dp=16, pp=4, ep=8, zero=1, micro_batch_size=1)
    unfused = estimate_step(sc, s, check_fit=False, eff=nemo)
    fused = estimate_step(sc, s, check_fit=False, eff=dataclasses.replace(nemo, scaled_rope_fused=True))
    assert 1.01 * fused.step_time_s < unfused.step_time_s < 1.10 * fused.step_time_s
    vec = estimate_steps(sc, StrategyTable.from_strategies([s]), check_fit=False, eff=nemo)
    assert vec.step_time_s[0] == pytest.approx(unfused.step_time_s, rel=1e-9)
