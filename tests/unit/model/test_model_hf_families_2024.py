"""The 2024-2026 families (readers in model/hf_llama.py, hf_moe.py and hf_ssm.py) and the layers they brought:
MLA, fine-grained MoE with shared experts and first dense layers, sliding-window/full interleaving, sinks,
QK-norm, sandwich norms, squared ReLU, Mamba / Mamba-2 mixers, multi-token prediction.

Parameter counts against transformers and the published figures are in test_model_hf.py. Here:
1. FLOPs: a tiny config of every family is built by transformers on the CPU and run forward and backward under
   ``torch.utils.flop_counter.FlopCounterMode``; greentrain's 3 x forward FLOPs (backward = 2 x forward) must
   equal the counter exactly. Attention convention (model/ops.py): the full s x s_kv score matrix (no causal
   halving), which is what eager attention multiplies; with s below the window, windowed layers cost the same.
   ``attn_implementation="eager"`` and ``experts_implementation="eager"`` (the counter does not see the grouped
   expert kernels); named differences for the two places the reference code computes more than the kernels
   the spec describes (see _ssm_difference).
2. Active parameters per token against the published figures.
3. Layer patterns, windowed FLOPs, MTP, and bad input.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from greentrain.errors import ConfigError
from greentrain.model.hf import spec_from_hf_config
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.model.spec import LayerKind, TransformerSpec

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"
B, S = 2, 16  # micro-batch and sequence of the FLOP runs (S below every tiny window)


# Nemotron-H has no fixture file (test_model_hf.NO_FIXTURE): a small hybrid with every block kind.
NEMOTRON_H: dict[str, Any] = {
    "model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "M-M*EM-",
    "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "mamba_num_heads": 8, "mamba_head_dim": 12, "ssm_state_size": 16, "n_groups": 2, "chunk_size": 8,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
    "moe_shared_expert_intermediate_size": 40, "vocab_size": 256, "use_mamba_kernels": False}


def _config(name: str) -> dict[str, Any]:
    if name == "nemotron-h":
        return dict(NEMOTRON_H)
    data: dict[str, Any] = json.loads((HF_DIR / f"{name}.json").read_text())
    return data


# ---- 1. FLOPs on tiny configs ------------------------------------------------------------------------------
TINY: dict[str, dict[str, Any]] = {
    "qwen3-8b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256},
    "qwen3-30b-a3b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
                      "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
                      "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 256},
    "gemma2-9b": {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256, "sliding_window": 32},
    "gemma3-1b": {"num_hidden_layers": 6, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
                  "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 256, "sliding_window": 32,
                  "sliding_window_pattern": 3},
    "olmo2-32b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 256},
    "phi3-mini-4k": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
                     "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 256, "sliding_window": 32},
    "nemotron-4-340b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256},
    "deepseek-v3": {"num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 96,
                    "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4,
                    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1,
                    "first_k_dense_replace": 1, "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
                    "qk_rope_head_dim": 8, "v_head_dim": 12, "vocab_size": 256},
    "gpt-oss-20b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 16, "num_local_experts": 8, "num_experts_per_tok": 2,
                    "vocab_size": 256, "sliding_window": 32, "layer_types": ["sliding_attention", "full_attention"]},
    "mixtral-8x22b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 48,
                      "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
                      "vocab_size": 256},
    "deepseek-v2-lite": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
                         "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4,
                         "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 2,
                         "first_k_dense_replace": 1, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
                         "qk_rope_head_dim": 8, "v_head_dim": 12, "vocab_size": 256},
    "olmoe-1b-7b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 4,
                    "num_key_value_heads": 4, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 256},
    "mamba-2.8b": {"num_hidden_layers": 2, "hidden_size": 64, "state_size": 8, "time_step_rank": 8,
                   "vocab_size": 256},
    "mamba-codestral-7b": {"num_hidden_layers": 2, "hidden_size": 64, "state_size": 16, "expand": 2,
                           "n_groups": 2, "num_heads": 8, "head_dim": 16, "vocab_size": 256, "chunk_size": 8},
    "nemotron-h": {},
    "qwen1.5-moe-a2.7b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
                          "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
                          "num_attention_heads": 4, "num_key_value_heads": 4, "num_experts": 8,
                          "num_experts_per_tok": 2, "vocab_size": 256},
    "glm-4.5-air": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "n_routed_experts": 8,
                    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "use_qk_norm": True, "vocab_size": 256},
    "jamba-1.5-large": {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 96,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4,
                        "num_experts_per_tok": 2, "attn_layer_period": 2, "attn_layer_offset": 1,
                        "mamba_d_state": 8, "mamba_dt_rank": 8, "vocab_size": 256, "use_mamba_kernels": False},
}


@cache
def _counted_flop(name: str) -> dict[str, int]:
    """FLOPs by aten op of one forward + backward of the transformers model of TINY[name] (CPU)."""
    cfg = {**_config(name), **TINY[name]}
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    if cfg["model_type"] not in transformers.CONFIG_MAPPING:  # pyproject allows transformers >= 4.40
        pytest.skip(f"transformers {transformers.__version__} has no model_type {cfg['model_type']!r}")
    config = transformers.AutoConfig.for_model(**cfg)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"
    config.pad_token_id = None  # the released pad ids lie outside the tiny vocabularies
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.train()
    ids = torch.randint(0, cfg["vocab_size"], (B, S))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    return {str(k): int(v) for k, v in counter.get_flop_counts()["Global"].items()}


def _ssm_difference(spec: TransformerSpec) -> tuple[float, tuple[str, ...]]:
    """(FLOPs the reference code computes beyond the spec, aten ops left out of the comparison).

    - Convolutions are left out: the reference pads the sequence by k - 1 before its depthwise conv1d and
      FlopCounterMode's convolution_backward ignores ``groups`` (it counts a dense k x C x C kernel); the spec
      counts 2 k FLOPs per channel and token forward (tested on its own below).
    - Mamba2Mixer.torch_forward repeats B and C to every head before C B^T; the SSD kernel (mamba_ssm
      ssd_combined._bmm_chunk_fwd) and the spec compute it once per group: (H - G) extra (Q x N) @ (N x Q)
      per chunk, x 3 for forward + backward.
    """
    if spec.ssm == "none":
        return 0.0, ()
    conv = ("aten.convolution", "aten.convolution_backward")
    if spec.ssm == "mamba":
        return 0.0, conv
    q = min(spec.ssm_chunk_size, S)
    chunks = -(-S // q)
    per_layer = (spec.ssm_num_heads - spec.ssm_num_groups) * B * chunks * 2 * q * spec.ssm_state_size * q
    mixers = sum(n for kind, n in spec.layer_kinds() if kind.mixer == "mamba2")
    return 3 * per_layer * mixers, conv


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_config_flops_equal_flop_counter(name: str) -> None:
    cfg = {**_config(name), **TINY[name]}
    spec = spec_from_hf_config(cfg, f"tiny-{name}")
    counted = _counted_flop(name)
    extra, left_out = _ssm_difference(spec)
    ops = model_ops(spec, B, S, 2.0)
    left_out_flop = 3 * sum(g.count * op.flop for g in ops.layers for op in g.ops if op.name.endswith(".conv"))
    torch_flop = sum(v for k, v in counted.items() if k not in left_out)
    assert torch_flop - extra == 3 * ops.forward_flop() - (left_out_flop if left_out else 0)


def test_depthwise_conv_forward_flops() -> None:
    # What FlopCounterMode counts for the forward conv1d, less the k - 1 padded positions the reference adds.
    spec = spec_from_hf_config({**_config("jamba-1.5-large"), **TINY["jamba-1.5-large"]}, "tiny")
    counted = _counted_flop("jamba-1.5-large")
    inner, k = spec.ssm_expand * spec.hidden_size, spec.ssm_conv_kernel
    mamba_layers = sum(n for kind, n in spec.layer_kinds() if kind.mixer == "mamba")
    padded = mamba_layers * 2 * B * inner * (S + k - 1) * k
    assert counted["aten.convolution"] == padded
    ops = model_ops(spec, B, S, 2.0)
    conv = sum(g.count * op.flop for g in ops.layers for op in g.ops if op.name.endswith(".conv"))
    assert conv == mamba_layers * 2 * B * inner * S * k


# ---- 2. active parameters ----------------------------------------------------------------------------------
# fixture -> (published active parameters, tolerance, include the input embedding?, source)
ACTIVE: dict[str, tuple[float, float, bool, str]] = {
    "qwen3-30b-a3b": (3.3e9, 0.02, True, "Qwen/Qwen3-30B-A3B model card: 3.3B activated"),
    "qwen3-235b-a22b": (22e9, 0.01, True, "Qwen/Qwen3-235B-A22B model card: 22B activated"),
    # The model card counts the unembedding but not the embedding lookup as active.
    "gpt-oss-120b": (5.13e9, 0.002, False, "gpt-oss model card, Table 1: 5.13B active per token"),
    "gpt-oss-20b": (3.61e9, 0.002, False, "gpt-oss model card, Table 1: 3.61B active per token"),
    "deepseek-v3": (37e9, 0.015, False, "DeepSeek-V3 report, abstract: 37B activated (whole billions)"),
    "jamba-1.5-large": (94e9, 0.005, True, "Jamba-1.5 report, §2: 94B active"),
    "mixtral-8x22b": (39e9, 0.005, True, "Mixtral 8x22B announcement: 39B active"),
    # rounded to 0.1B: half a unit is 2 % of 2.4B and 4 % of 1.3B
    "deepseek-v2-lite": (2.4e9, 0.025, False, "DeepSeek-V2 report, App. B: 2.4B activated"),
    "olmoe-1b-7b": (1.3e9, 0.02, True, "OLMoE paper, §1: 1.3B active"),
    "qwen1.5-moe-a2.7b": (2.7e9, 0.005, True, "Qwen/Qwen1.5-MoE-A2.7B model card: 2.7B activated"),
}


@pytest.mark.parametrize("name", sorted(ACTIVE))
def test_active_params_match_published(name: str) -> None:
    published, tol, with_embedding, where = ACTIVE[name]
    spec = load_model(str(HF_DIR / f"{name}.json"))
    active = spec.num_active_params() - (0 if with_embedding else spec.vocab_size * spec.hidden_size)
    assert active == pytest.approx(published, rel=tol), f"{active:,} vs {where}"


# ---- 3. layer patterns, windows, MTP -----------------------------------------------------------------------
def test_layer_patterns_follow_transformers() -> None:
    gemma3 = spec_from_hf_config(_config("gemma3-27b"), "g")
    assert dict(gemma3.layer_kinds()) == {LayerKind(mixer="sliding", mlp="dense"): 52,
                                         LayerKind(mixer="attention", mlp="dense"): 10}
    assert gemma3.layer_kind(5).mixer == "attention" and gemma3.layer_kind(4).mixer == "sliding"
    jamba = spec_from_hf_config(_config("jamba-1.5-large"), "j")
    kinds = [jamba.layer_kind(i) for i in range(8)]
    assert [k.mixer for k in kinds] == ["mamba"] * 4 + ["attention"] + ["mamba"] * 3
    assert [k.mlp for k in kinds] == ["dense", "moe"] * 4
    ds = spec_from_hf_config(_config("deepseek-v3"), "d")
    assert [ds.layer_kind(i).mlp for i in range(4)] == ["dense"] * 3 + ["moe"]
    assert ds.num_moe_layers() == 58 and ds.num_moe_layers(10) == 7
    mamba2 = spec_from_hf_config(_config("mamba-codestral-7b"), "m")
    assert dict(mamba2.layer_kinds()) == {LayerKind(mixer="mamba2", mlp="none"): 64}


def test_layer_types_are_read_from_the_config() -> None:
    cfg = {**_config("gpt-oss-20b"), "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 8}
    assert spec_from_hf_config(cfg, "x").full_attention_interval == 3
    all_sliding = {**_config("gpt-oss-20b"), "layer_types": ["sliding_attention"] * 24}
    assert spec_from_hf_config(all_sliding, "x").full_attention_interval == 0


def test_window_limits_the_attention_core() -> None:
    # Beyond the window each query attends to `window` keys: the core costs s x window per head, not s x s.
    spec = spec_from_hf_config(_config("gpt-oss-20b"), "g")
    s = 4096
    groups = {g.name: g for g in model_ops(spec, 1, s, 2.0, flash=True).layers}
    full, sliding = groups["decoder-moe"], groups["decoder-sliding-moe"]
    core = {g: next(op for op in groups[g].ops if op.attention_core) for g in (full.name, sliding.name)}
    assert core[full.name].flop == 4 * spec.num_heads * s * s * spec.head_dim
    assert core[sliding.name].flop == 4 * spec.num_heads * s * 128 * spec.head_dim
    assert (full.count, sliding.count) == (12, 12)
    assert (core[full.name].window, core[sliding.name].window) == (0, 128)  # what a causal kernel executes
    assert sliding.kind == LayerKind(mixer="sliding", mlp="moe")
    assert full.flop - sliding.flop == core[full.name].flop - core[sliding.name].flop
    short = model_ops(spec, 1, 64, 2.0).layers  # below the window: the two kinds cost the same
    assert short[0].flop == short[1].flop


def test_mla_core_uses_both_head_widths() -> None:
    ds = spec_from_hf_config(_config("deepseek-v3"), "d")
    assert (ds.head_dim, ds.v_head_dim, ds.q_width, ds.attn_out_width) == (192, 128, 24576, 16384)
    flash = next(op for op in model_ops(ds, 1, 4096, 2.0, flash=True).layers[0].ops if op.attention_core)
    assert flash.flop == 2 * 128 * 4096 * 4096 * (192 + 128)
    # two products (Q K^T and P V) of count x (m x k) @ (k x n) each, k the mean of the two head widths
    assert flash.flop == 2 * (2 * flash.count * flash.m * flash.k * flash.n)


def test_mtp_module_adds_a_layer_and_a_head() -> None:
    # DeepSeek-V3 §2.2: D = 1 module: 2 RMSNorms + M (2d x d) + one MoE layer + the norm before the shared head.
    base = spec_from_hf_config(_config("deepseek-v3"), "d")
    mtp = dataclasses.replace(base, num_mtp_layers=1)
    d = base.hidden_size
    moe_layer = base.kind_params(LayerKind(mixer="attention", mlp="moe"))
    assert mtp.num_params() - base.num_params() == 3 * d + 2 * d * d + moe_layer
    # The report's 685B checkpoint holds 671B + 14B of MTP module, which includes its own copy of the
    # embedding and head (2 x 129,280 x 7,168); without them the module is 11.7B.
    assert mtp.num_params() + 2 * base.vocab_size * d == pytest.approx(685e9, rel=0.005)
    ops = model_ops(mtp, 1, 128, 2.0)
    assert ops.layers[-1].name == "mtp" and ops.layers[-1].count == 1
    head = next(op for op in ops.layers[-1].ops if op.name == "mtp.lm_head")
    assert head.flop == 2 * 128 * d * base.vocab_size


def test_yaml_model_with_new_fields_round_trips(tmp_path: Path) -> None:
    for name in ("deepseek-v3", "jamba-1.5-large", "gpt-oss-120b", "gemma3-27b", "mamba-codestral-7b"):
        spec = spec_from_hf_config(_config(name), name)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec.to_dict()))
        assert load_model(str(path)) == spec


# ---- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "change", "field", "needle"), [
    ("deepseek-v3", {"num_experts_per_tok": 300}, "model(x).top_k", "must be <= num_experts=256"),
    ("qwen3-8b", {"num_key_value_heads": 5}, "model(x).num_kv_heads", "must divide num_heads=32"),
    ("qwen3-30b-a3b", {"mlp_only_layers": [3, 7]}, "config.json.mlp_only_layers", "first k layers"),
    ("qwen3-8b", {"use_sliding_window": True}, "config.json.use_sliding_window", "not supported"),
    ("gemma2-9b", {"layer_types": ["full_attention"] * 3}, "config.json.layer_types", "must list 42"),
    ("gemma2-9b", {"layer_types": ["full_attention", "sliding_attention"] * 21}, "config.json.layer_types",
     "every k-th layer"),
    ("gemma2-9b", {"sliding_window": 0}, "config.json.sliding_window", "must be >= 1"),
    ("mamba-codestral-7b", {"num_heads": 100}, "config.json.num_heads", r"must equal expand \* hidden_size = 8192"),
    ("jamba-1.5-large", {"expert_layer_offset": 0}, "config.json.expert_layer_offset", "must be"),
    ("gemma3-27b", {"text_config": None}, "config.json.text_config", "is required"),
    ("nemotron-4-340b", {"num_key_value_heads": None}, "config.json.num_key_value_heads", "is required"),
    ("nemotron-4-340b", {"mlp_bias": True}, "config.json.mlp_bias", "only together with attention_bias"),
    ("deepseek-v3", {"qk_nope_head_dim": 0}, "config.json.qk_nope_head_dim", ">= 1"),
])
def test_bad_config_is_named(name: str, change: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as e:
        spec_from_hf_config({**_config(name), **change}, "x")
    assert e.value.field == field


def test_unknown_recent_family_suggests_one() -> None:
    with pytest.raises(ConfigError, match=r"unsupported model_type; did you mean qwen3") as e:
        spec_from_hf_config({**_config("qwen3-8b"), "model_type": "qwen4"}, "x")
    assert e.value.field == "config.json.model_type"


@pytest.mark.parametrize(("fields", "field", "needle"), [
    ({"kv_lora_rank": 64}, "head_dim", "is required with MLA"),
    ({"kv_lora_rank": 64, "head_dim": 32, "qk_rope_head_dim": 32}, "qk_rope_head_dim", "less than head_dim"),
    ({"ssm": "mamba", "attention_layer_interval": 4, "attention_layer_offset": 4}, "attention_layer_offset",
     "less than attention_layer_interval=4"),
    ({"ffn_hidden_size": 0}, "ffn_hidden_size", "only for a state-space stack"),
    ({"ssm": "mamba2", "ssm_num_heads": 3}, "ssm_num_heads", "divisor of ssm_expand"),
    ({"num_dense_layers": 9}, "num_dense_layers", "must be <= num_layers=4"),
    ({"qk_norm": "both"}, "qk_norm", "must be one of none, head, full"),
])
def test_bad_spec_fields_are_named(fields: dict[str, Any], field: str, needle: str) -> None:
    base: dict[str, Any] = dict(name="x", num_layers=4, hidden_size=64, num_heads=4, ffn_hidden_size=128,
                                vocab_size=100)
    with pytest.raises(ConfigError, match=needle) as e:
        TransformerSpec(**{**base, **fields})
    assert e.value.field == f"model(x).{field}"


@pytest.mark.parametrize("name", ["deepseek-v3", "jamba-1.5-large", "gpt-oss-120b", "gemma3-27b",
                                  "mamba-codestral-7b", "t5-large"])
def test_layer_groups_carry_exact_params(name: str) -> None:
    # what a memory estimate needs per layer kind: the groups' params add up to the model's layers exactly
    spec = spec_from_hf_config(_config(name), name)
    groups = model_ops(spec, 1, 64, 2.0).layers
    layers = spec.num_params() - spec.embedding_params() - spec.output_params()
    assert sum(g.count * g.params for g in groups) == layers
    experts = sum(g.count * g.expert_params for g in groups)
    assert experts == spec.num_moe_layers() * spec.num_experts * spec.expert_params()


@pytest.mark.parametrize("change", [{}, {"hybrid_override_pattern": "M*M-MEM*"}, {"hybrid_override_pattern": None,
                                    "layers_block_type": ["mamba", "attention", "moe", "mlp"]}])
def test_nemotron_h_params_equal_transformers(change: dict[str, Any]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if "nemotron_h" not in transformers.CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no nemotron_h")
    cfg = {k: v for k, v in {**NEMOTRON_H, **change}.items() if v is not None}
    spec = spec_from_hf_config(cfg, "nh")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg))
    assert sum(p.numel() for p in model.parameters()) == spec.num_params()
    default = transformers.AutoConfig.for_model("nemotron_h")  # NemotronHConfig(): the reader's defaults
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(default)
    assert sum(p.numel() for p in model.parameters()) == spec_from_hf_config({"model_type": "nemotron_h"},
                                                                             "d").num_params()


def test_nemotron_h_pattern_is_one_block_per_layer() -> None:
    spec = spec_from_hf_config(NEMOTRON_H, "nh")
    assert [spec.layer_kind(i) for i in range(3)] == [LayerKind(mixer="mamba2", mlp="none"),
                                                      LayerKind(mixer="none", mlp="dense"),
                                                      LayerKind(mixer="mamba2", mlp="none")]
    assert spec.layer_kind(3) == LayerKind(mixer="attention", mlp="none")
    assert spec.layer_kind(4) == LayerKind(mixer="none", mlp="moe") and spec.num_moe_layers() == 1
    with pytest.raises(ConfigError, match="must use only M, E") as e:
        spec_from_hf_config({**NEMOTRON_H, "hybrid_override_pattern": "M-X"}, "x")
    assert e.value.field == "config.json.hybrid_override_pattern"
    with pytest.raises(ConfigError, match="is not supported") as e:
        spec_from_hf_config({**NEMOTRON_H, "moe_latent_size": 32}, "x")
    assert e.value.field == "config.json.moe_latent_size"


def test_capacity_factor_pads_the_expert_work(tmp_path: Path) -> None:
    spec = load_model("mixtral-8x22b")
    padded = dataclasses.replace(spec, capacity_factor=1.25)

    def experts(s: TransformerSpec) -> float:
        return sum(op.flop for op in model_ops(s, 1, 1024, 2.0).layers[0].ops if op.expert)

    assert experts(padded) == pytest.approx(1.25 * experts(spec))
    assert padded.num_params() == spec.num_params()  # capacity is a cost, not a parameter
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({**spec.to_dict(), "capacity_factor": 1.25}))
    assert load_model(str(path)) == padded
    path.write_text(yaml.safe_dump({**spec.to_dict(), "capacity_factor": -1}))
    with pytest.raises(ConfigError, match="must be >= 0") as e:
        load_model(str(path))
    assert e.value.field == "model(m.yaml).capacity_factor"


@pytest.mark.parametrize("name", ["qwen3-8b", "gemma2-9b", "olmo2-32b", "olmoe-1b-7b"])
def test_attention_bias_is_on_attention_only(name: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = {**_config(name), **TINY[name], "attention_bias": True}
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg))
    spec = spec_from_hf_config(cfg, name)
    assert spec.attention_bias and not spec.linear_bias
    assert sum(p.numel() for p in model.parameters()) == spec.num_params()
