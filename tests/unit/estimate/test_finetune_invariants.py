"""Properties of fine-tuning in the estimator (hypothesis): whatever the strategy, freezing or LoRA never adds
FLOPs, gradient, optimizer or activation memory, or gradient traffic, and model FLOPs do not depend on the strategy."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greentrain.errors import InfeasibleError
from greentrain.estimate.step import StepEstimate, estimate_step
from greentrain.model.finetune import Finetune
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, scenario_from_dict

BASE = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 32},
                           "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 10}})
MODES = [Finetune(mode="lora", lora_rank=16), Finetune(mode="lora", lora_rank=64, lora_targets=("q", "k", "v", "o")),
         Finetune(mode="freeze", freeze=("embeddings",)), Finetune(mode="freeze", freeze=("decoder",))]

strategies = st.builds(
    lambda tp, pp, mb, rec, zero: Strategy(dp=32 // (tp * pp), tp=tp, pp=pp, micro_batch_size=mb, sp=tp > 1,
                                           recompute=rec, zero=zero),
    tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), mb=st.sampled_from([1, 2]),
    rec=st.sampled_from(["none", "selective", "full"]), zero=st.sampled_from([0, 1, 3]))


def _est(sc: Scenario, s: Strategy) -> StepEstimate | None:
    try:
        return estimate_step(sc, s, check_fit=False)
    except InfeasibleError:
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=strategies, mode=st.sampled_from(MODES))
def test_finetuning_never_costs_more(s: Strategy, mode: Finetune) -> None:
    full = _est(BASE, s)
    if full is None:
        return
    ft = _est(dataclasses.replace(BASE, workload=dataclasses.replace(BASE.workload, finetune=mode)), s)
    assert ft is not None
    assert ft.model_flop_per_step <= full.model_flop_per_step  # frozen embeddings save no FLOPs
    assert ft.memory.gradients_bytes <= full.memory.gradients_bytes * 1.01
    assert ft.memory.optimizer_bytes <= full.memory.optimizer_bytes * 1.01
    assert ft.memory.activations_bytes <= full.memory.activations_bytes * 1.01  # frozen GEMMs keep no input
    if s.zero < 3:  # ZeRO-3's weight gathers stay while the compute that hides them shrinks
        assert ft.dp_comm_time_s <= full.dp_comm_time_s * 1.01 + 1e-9
    # the adapters add GEMMs (A replicated under TP) and element-wise kernels (model/finetune.py
    # adapter_elementwise) where the frozen weights save their gradients: at tp 8 with rank 64 on q, k, v, o and
    # every layer recomputed, the step is 1.6 % longer than full training's
    assert ft.step_time_s <= full.step_time_s * 1.02


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=strategies, b=strategies)
def test_model_flops_do_not_depend_on_the_strategy(a: Strategy, b: Strategy) -> None:
    sc = dataclasses.replace(BASE, workload=dataclasses.replace(BASE.workload, finetune=MODES[0]))
    ea, eb = _est(sc, a), _est(sc, b)
    if ea is not None and eb is not None:
        assert abs(ea.model_flop_per_step - eb.model_flop_per_step) <= 1e-9 * ea.model_flop_per_step


def test_a_recomputed_moe_block_keeps_its_input_frozen_or_not() -> None:
    """(Session 23 review.) Megatron Core's ``moe`` recompute module checkpoints the MoE block, whose input (the
    norm's output) it keeps whether or not the experts train: LoRA on every projection of Qwen3-30B-A3B keeps what
    full training keeps there, and with ``layernorm`` too both drop it; with nothing recomputed LoRA keeps less.
    Beside it, each adapter's B keeps A's output (rank 16, 2 bytes): q, k, v, o and each of a token's 8 expert copies'
    gate, up and down, 4,096 tokens x 48 layers."""
    sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 1}})
    lora = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, finetune=Finetune(
        mode="lora", lora_targets=("q", "k", "v", "o", "gate", "up", "down"))))
    from greentrain.estimate.efficiency import efficiency_for

    for mode, same in (("moe", True), ("moe+layernorm", True), ("attention", False)):
        eff = dataclasses.replace(efficiency_for("h100-sxm", "nemo"), selective_recompute=mode)
        s = Strategy(dp=8, ep=8, micro_batch_size=1, recompute="selective" if mode != "attention" else "none")
        full, ft = (estimate_step(x, s, eff=eff, check_fit=False).memory.activations_bytes for x in (sc, lora))
        ft -= 4096 * 48 * 16 * 2 * (4 + 8 * 3)  # the adapters' A outputs
        assert (abs(ft / full - 1) < 1e-9) is same and ft <= full * (1 + 1e-9), mode


def test_an_adapter_keeps_a_16_bit_copy_beside_an_fp8_gemm() -> None:
    """(Session 23 review.) Under an fp8 recipe that keeps GEMM inputs as 1-byte copies, a frozen fp8 GEMM keeps
    none and its LoRA adapter (a bf16 module) a 16-bit one: with adapters beside the QKV and first MLP GEMMs, the
    layer keeps (e - 1) bytes per element more of each of their inputs than the fp8 accounting; without, 1 less
    (o alone: the QKV and first MLP inputs both go); each adapter's B keeps A's output beside."""
    from greentrain.estimate.frozen import frozen_input_activation
    from greentrain.estimate.memory import layer_activation
    from greentrain.model.load import load_model
    from greentrain.model.ops import model_ops

    spec, b, s, e = load_model("llama3-8b"), 1, 1024, 2.0
    la = layer_activation(spec, b, s, e, moe=False, flash=True)
    for targets, repl_change in ((("q", "up"), 2 * (e - 1)), (("v",), 0.0), (("o",), -2.0)):
        ops = model_ops(spec, b, s, e, 0, True, Finetune(mode="lora", lora_targets=targets)).layers[-1].ops
        act = frozen_input_activation(la, spec, ops, b * s, e, 1.0, moe=False, flash=True, norm_value_bytes=0.0)
        a_out = len(targets) * 16 * e * b * s  # each adapter's A output (rank 16), all-reduced under a row-parallel A
        assert act.replicated_bytes - la.replicated_bytes - a_out == repl_change * b * s * spec.hidden_size, targets


def test_adapters_state_shards_as_their_base_weights_do() -> None:
    """(Session 23 review.) Attention adapters of a MoE model keep their gradients whatever the expert
    parallelism; the experts' own adapters split over it (8 ranks: 1/8), as the experts do. (The state was split in
    proportion to the local parameters, which are mostly experts: the attention adapters' gradients 6x too few.)"""
    sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 1}})
    grads = {}
    for targets in (("q", "v"), ("gate", "up", "down")):
        lora = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, finetune=Finetune(
            mode="lora", lora_targets=targets)))
        for ep in (1, 8):
            s = Strategy(dp=8, ep=ep, micro_batch_size=1, recompute="full")
            grads[targets, ep] = estimate_step(lora, s, check_fit=False).memory.gradients_bytes
    assert grads[("q", "v"), 8] == grads[("q", "v"), 1]
    assert grads[("gate", "up", "down"), 8] == pytest.approx(grads[("gate", "up", "down"), 1] / 8, rel=0.01)
