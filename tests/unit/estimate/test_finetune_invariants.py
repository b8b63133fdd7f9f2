"""Properties of fine-tuning in the estimator (hypothesis): whatever the strategy, freezing or LoRA never adds
FLOPs, gradient, optimizer or activation memory, or gradient traffic, and model FLOPs do not depend on the strategy."""

from __future__ import annotations

import dataclasses

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
    assert ft.step_time_s <= full.step_time_s * 1.01


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=strategies, b=strategies)
def test_model_flops_do_not_depend_on_the_strategy(a: Strategy, b: Strategy) -> None:
    sc = dataclasses.replace(BASE, workload=dataclasses.replace(BASE.workload, finetune=MODES[0]))
    ea, eb = _est(sc, a), _est(sc, b)
    if ea is not None and eb is not None:
        assert abs(ea.model_flop_per_step - eb.model_flop_per_step) <= 1e-9 * ea.model_flop_per_step
