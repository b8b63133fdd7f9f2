"""GPT-OSS's experts as Megatron Core runs them (model/routing.py expert_extra_ops): the clamp of the GLU's inputs
before the fused activation, and the down projection's bias scaled by each row's fp32 routing probability."""

from __future__ import annotations

import dataclasses
import json

import pytest

from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.model.hf import spec_from_hf_config
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict


def _mlp_ops(model: str, tokens: int = 4096) -> dict[str, object]:
    mo = model_ops(load_model(model), 1, tokens, 2.0, 0, True)
    return {op.name: op for g in mo.layers for op in g.ops}


def test_gpt_oss_pays_the_clamp_and_the_bias_others_do_not() -> None:
    ops = _mlp_ops("gpt-oss-120b")
    rows, f, d = 4096 * 4, 2880, 2880  # T x top_k routed rows, expert width, hidden
    clamp, bias = ops["mlp.experts.clamp"], ops["mlp.experts.bias"]
    assert clamp.bytes == pytest.approx(rows * 2 * f * 4 * 2.0)  # two clamps and a cat, each read and written
    assert clamp.backward_factor == pytest.approx(15 / 8) and clamp.kernels == (3.0, 7.0)  # masks, where, cat
    assert bias.bytes == pytest.approx(rows * d * 6 * 2.0)  # 16-bit b * p, the sum, the cat
    assert bias.backward_factor == pytest.approx(8 / 6)
    assert clamp.expert and bias.expert
    names = list(ops)
    assert names.index("mlp.experts.up") < names.index("mlp.experts.clamp") < names.index("mlp.experts.act")
    assert names.index("mlp.experts.down") < names.index("mlp.experts.bias") < names.index("mlp.experts.unpermute")
    qwen = _mlp_ops("qwen3-30b-a3b")
    assert "mlp.experts.clamp" not in qwen and "mlp.experts.bias" not in qwen


def test_the_hf_config_reads_the_clamp() -> None:
    cfg = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": 2880,
           "intermediate_size": 2880, "num_hidden_layers": 2, "num_attention_heads": 64, "num_key_value_heads": 8,
           "head_dim": 64, "vocab_size": 201088, "num_local_experts": 128, "num_experts_per_tok": 4,
           "swiglu_limit": 7.0, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 128}
    spec = spec_from_hf_config(json.loads(json.dumps(cfg)), "tiny-gpt-oss")
    assert spec.glu_clamp and spec.expert_bias
    assert load_model("gpt-oss-120b").glu_clamp and load_model("gpt-oss-20b").glu_clamp


def _moe_layer_s(fw: str, extras: bool = True) -> float:
    """Forward + backward of one GPT-OSS-120B MoE layer (2 x 4,096 tokens, ep 8, B200), with or without the two ops."""
    from greentrain.estimate.compute import Sharding, compute_peaks, ops_time
    from greentrain.hardware.catalog import get_chip

    spec, chip = load_model("gpt-oss-120b"), get_chip("b200")
    if not extras:
        spec = dataclasses.replace(spec, glu_clamp=False, expert_bias=False)
    group = next(g for g in model_ops(spec, 2, 4096, 2.0, 0, True).layers if g.moe)
    t = ops_time(group.ops, Sharding(tp=1, cp=1, ep=8, etp=1, sp=False), compute_peaks(chip, "bf16"),
                 chip.memory_bytes_per_s, efficiency_for("b200", fw))
    return float(t.forward_s + t.backward_s)


def test_deepep_takes_fp32_probabilities_and_the_fused_grouped_mlp_takes_both() -> None:
    """Megatron's alltoall dispatcher keeps the router's 16-bit probabilities, DeepEP and HybridEP cast them to
    fp32 (the bias's sum runs in fp32: more bytes); the CuTe DSL fused grouped MLP (nemo-full-graph) runs the
    clamp and the bias in its epilogues with the activation."""
    def added_s(fw: str) -> float:
        return _moe_layer_s(fw) - _moe_layer_s(fw, extras=False)

    assert added_s("nemo-deepep") > 1.5 * added_s("nemo") > 0.0
    assert added_s("nemo-full-graph") == pytest.approx(0.0, abs=1e-12)


def test_megatron_recomputes_the_clamp_with_moe_act() -> None:
    from greentrain.estimate.recompute import _BIT, op_module_masks

    group = next(g for g in model_ops(load_model("gpt-oss-120b"), 1, 4096, 2.0, 0, True).layers if g.moe)
    masks = dict(zip((op.name for op in group.ops), op_module_masks(group.ops), strict=True))
    assert masks["mlp.experts.clamp"] & _BIT["moe_act"] and masks["mlp.experts.act"] & _BIT["moe_act"]
    assert not masks["mlp.experts.bias"] & _BIT["moe_act"]


def test_they_slow_a_megatron_step() -> None:
    """Megatron Core runs them as kernels of their own: 8 % more step time here (8 B200, ep 8, alltoall)."""
    sc = scenario_from_dict({"model": "gpt-oss-120b", "cluster": {"chip": "b200", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 1}})
    plain = dataclasses.replace(sc, model=dataclasses.replace(sc.model, glu_clamp=False, expert_bias=False))
    s, eff = Strategy(dp=8, ep=8, zero=1, micro_batch_size=2), efficiency_for("b200", "nemo")
    ratio = (estimate_step(sc, s, check_fit=False, eff=eff).step_time_s
             / estimate_step(plain, s, check_fit=False, eff=eff).step_time_s)
    assert 1.05 < ratio < 1.10
