"""torchtune's compiled fine-tuning rows against the `torchtune-compile` profile (nothing fitted on them).

pytorch/torchtune README.md @bd2a0fc, "Optimization flags": full_finetune_single_device, Llama 3.2 3B, batch 2,
sequence 4,096, packed, bf16 (pure: bf16 weights and AdamW states), one A100; each technique on top of the
previous one. Tokens/s and "Peak Memory Active" (the allocator's active-bytes peak):

| row | tokens/s | GiB |
|---|---|---|
| + compile (torch.nn.CrossEntropyLoss, compiled) | 8,998 | 51.0 |
| + chunked cross-entropy (CEWithChunkedOutputLoss, compiled per chunk) | 9,174 | 42.9 |
| + activation checkpointing (every block) | 7,210 | 24.9 |
| LoRA (llama3_2/3B_lora_single_device.yaml: rank 64 on q, v, o and the MLP) | 8,210 | 8.5 |

Tolerances: 6 % on tokens/s (greentrain is 2-6 % fast on these rows), 15 % on memory (the chunked row is 12 %
high). The same table's eager row (7,075 tokens/s) is 15 % fast under the eager `torchtune` profile:
docs/validation.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict

GIB = 2**30
# meta-llama/Llama-3.2-3B config.json (the fields greentrain reads)
LLAMA32_3B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 3072,
              "intermediate_size": 8192, "num_hidden_layers": 28, "num_attention_heads": 24,
              "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256, "tie_word_embeddings": True,
              "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "hidden_act": "silu",
              "max_position_embeddings": 131072, "attention_bias": False, "mlp_bias": False,
              "torch_dtype": "bfloat16"}
ROWS = [("compiled", "none", 8998, 51.0), ("chunked-compiled", "none", 9174, 42.9),
        ("chunked-compiled", "full", 7210, 24.9)]
LORA = {"finetune": "lora", "lora_rank": 64, "lora_targets": ["q", "v", "o", "gate", "up", "down"]}


@pytest.mark.parametrize(("loss_kernel", "recompute", "tokens_per_s", "memory_gib", "finetune"),
                         [(*row, {}) for row in ROWS] + [("chunked-compiled", "full", 8210, 8.5, LORA)])
def test_torchtune_compiled_rows(tmp_path: Path, loss_kernel: str, recompute: str, tokens_per_s: float,
                                 memory_gib: float, finetune: dict[str, object]) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA32_3B), "utf-8")
    sc = scenario_from_dict({"model": str(config), "cluster": {"chip": "a100-80gb", "num_chips": 1},
                             "workload": {"global_batch_size": 2, "seq_len": 4096, "num_steps": 10,
                                          "optimizer_dtype": "bf16", "master_weights": False, **finetune}})
    eff = efficiency_for("a100-80gb", "torchtune-compile", loss_kernel=loss_kernel)
    # one device: ZeRO 2 shards nothing (torchtune's single-device recipe holds the whole state)
    s = Strategy(dp=1, zero=2, micro_batch_size=2, recompute=recompute, flash_attention=True)
    est = estimate_step(sc, s, eff=eff)
    assert est.tokens_per_s == pytest.approx(tokens_per_s, rel=0.06)
    assert est.memory.allocator_bytes / GIB == pytest.approx(memory_gib, rel=0.15)


def test_compile_fuses_what_the_eager_profile_runs_as_chains() -> None:
    """The two torchtune profiles differ only in what torch.compile fuses: same state, faster step."""
    eager, compiled = efficiency_for("a100-80gb", "torchtune"), efficiency_for("a100-80gb", "torchtune-compile")
    assert eager.eager_ops and not compiled.eager_ops and compiled.fuse_elementwise
    assert (eager.precision_recipe, eager.default_recompute) == (compiled.precision_recipe,
                                                                 compiled.default_recompute)
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "a100-80gb", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 10}})
    s = Strategy(dp=8, zero=3, micro_batch_size=2, recompute="full", flash_attention=True)
    a, b = (estimate_step(sc, s, eff=e) for e in (eager, compiled))
    assert b.step_time_s < a.step_time_s and b.memory.total_bytes <= a.memory.total_bytes
