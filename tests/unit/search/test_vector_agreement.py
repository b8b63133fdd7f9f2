"""The scalar and vectorised paths compose the step once (estimate/compose.py), so they agree on every
framework profile, model kind and recomputation mode, not only the defaults test_vector.py samples: for each
profile, random strategies of a scenario that profile is paired with (dense, MoE, MLA with multi-token
prediction, state-space hybrid, sliding window, encoder-decoder, fine-tuning, fp8, several nodes) give the
same figures and the same feasibility both ways."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest

from greentrain.estimate.efficiency import efficiency_for, framework_names
from greentrain.scenario import scenario_from_dict
from greentrain.search.feasibility import framework_space
from greentrain.search.space import SearchSpace, table

SAMPLES = 15  # random rows, and as many of those the columns keep, per check (20 until session 22)
Agree = Callable[..., int]  # conftest.scalar_equals_vector


def _sc(model: str, chip: str, chips: int, batch: int, seq: int, **workload: Any) -> dict[str, Any]:
    return {"model": model, "cluster": {"chip": chip, "num_chips": chips},
            "workload": {"global_batch_size": batch, "seq_len": seq, "num_steps": 10, **workload}}


SCENARIOS: tuple[dict[str, Any], ...] = (
    _sc("llama3-8b", "h100-sxm", 32, 64, 4096),  # four nodes
    _sc("qwen3-30b-a3b", "h100-sxm", 16, 32, 4096),  # MoE, 128 experts
    _sc("deepseek-v3", "h100-sxm", 256, 256, 4096),  # MLA, MoE, multi-token prediction
    _sc("jamba-1.5-large", "h100-sxm", 64, 64, 4096),  # Mamba layers among attention, MoE
    _sc("gemma3-27b", "a100-80gb", 16, 32, 8192),  # sliding-window layers, post-norms
    _sc("gpt-oss-20b", "h100-sxm", 16, 32, 4096, precision="fp8"),  # MoE, sliding window, fp8
    _sc("llama3.2-1b", "a100-40gb", 8, 32, 2048, finetune="lora", lora_rank=16),
    {**_sc("bart-large", "a100-80gb", 8, 64, 1024, target_seq_len=256), "cluster":
     {"chip": "a100-80gb", "num_chips": 8, "chips_per_node": 4}},  # encoder-decoder, two nodes of four
)
FRAMEWORKS = tuple(framework_names())  # every profile of efficiency.yaml


@pytest.mark.parametrize("k", range(len(FRAMEWORKS)), ids=FRAMEWORKS)
def test_every_framework_profile_agrees(k: int, scalar_equals_vector: Agree) -> None:
    """Each profile on one scenario, the pairing rotating so that every scenario meets two profiles or more."""
    sc = scenario_from_dict(SCENARIOS[k % len(SCENARIOS)])
    eff = efficiency_for(sc.cluster.chip.name, FRAMEWORKS[k])
    space = framework_space(SearchSpace(max_micro_batch=4, zero=(0, 1, 2, 3)), eff)  # what the framework runs
    assert space is not None
    rows = table(sc, space)
    assert scalar_equals_vector(sc, rows, random.Random(k), SAMPLES, SAMPLES, eff) >= 5


@pytest.mark.parametrize("mode", ["attention", "op", "layer-2", "layer-3"])
def test_every_selective_mode_agrees(mode: str, scalar_equals_vector: Agree) -> None:
    sc = scenario_from_dict(SCENARIOS[0])
    eff = dataclasses.replace(efficiency_for("h100-sxm", "torchtitan"), selective_recompute=mode)
    rows = table(sc, SearchSpace(recompute=("selective",), max_micro_batch=2))
    assert scalar_equals_vector(sc, rows, random.Random(7), SAMPLES, SAMPLES, eff) >= 5


@pytest.mark.parametrize(("mode", "k"), [("core_attn", 0), ("layernorm+moe_act", 1), ("moe", 1),
                                         ("mlp+moe+shared_experts", 2), ("mla_up_proj+layernorm", 2)])
def test_every_megatron_recompute_module_agrees(mode: str, k: int, scalar_equals_vector: Agree) -> None:
    """Megatron Core's recompute modules (estimate/recompute.py) on dense, MoE and MLA + MoE layers: their
    recomputed forward, the memory they free and the all-to-alls the moe module repeats."""
    sc = scenario_from_dict(SCENARIOS[k])
    eff = dataclasses.replace(efficiency_for("h100-sxm", "nemo"), selective_recompute=mode)
    rows = table(sc, SearchSpace(recompute=("selective",), max_micro_batch=2))
    assert scalar_equals_vector(sc, rows, random.Random(11), SAMPLES, SAMPLES, eff) >= 5


@pytest.mark.parametrize("flash", [True, False])
def test_naive_attention_and_loss_kernels_agree(flash: bool, scalar_equals_vector: Agree) -> None:
    sc = scenario_from_dict(SCENARIOS[4])
    rows = table(sc, SearchSpace(flash_attention=flash, max_micro_batch=2))
    for loss in ("fp32", "fused", "chunked"):
        eff = dataclasses.replace(efficiency_for("a100-80gb", "megatron"), loss_kernel=loss)
        assert scalar_equals_vector(sc, rows, random.Random(3), SAMPLES, SAMPLES, eff) >= 5
