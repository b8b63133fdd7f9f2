"""Mixture-of-experts decoders -> TransformerSpec fields: Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V2/V3
(with MLA), gpt-oss and GLM-4.5, from ``config.json`` alone (no ``transformers``, no network), and each family's
record.

Each reader reads the keys its ``*Config`` class defines, with that class's default when a key is absent
(transformers 5.23); tests/unit/model/test_model_hf_families_2024.py builds each family with transformers on the
meta device and checks the parameter count exactly, and the FLOPs of a tiny config against FlopCounterMode.
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError
from greentrain.model.family import ModelFamily
from greentrain.model.hf_reader import (
    WHERE,
    ConfigReader,
    attention_bias_fields,
    full_attention_interval,
    llama_fields,
)


def _mixtral(r: ConfigReader) -> dict[str, Any]:
    """MixtralConfig: every layer MoE (``num_local_experts`` SwiGLU experts of ``intermediate_size``, top
    ``num_experts_per_tok``), router hidden_size x experts without bias: exactly
    TransformerSpec.moe_params."""
    spec = llama_fields(r)
    spec.update(num_experts=r.get_int("num_local_experts", default=8),
                top_k=r.get_int("num_experts_per_tok", default=2))
    return spec


def _qwen3_moe(r: ConfigReader) -> dict[str, Any]:
    """Qwen3MoeConfig: Qwen3 attention (head_dim from the key, else hidden_size // heads:
    Qwen3MoeAttention) and ``num_experts`` (v5: num_local_experts) SwiGLU experts of ``moe_intermediate_size``,
    top ``num_experts_per_tok``, no shared expert, router without bias; layer i is MoE iff i is not in
    ``mlp_only_layers`` and (i + 1) % decoder_sparse_step == 0."""
    if r.get_bool("use_sliding_window", default=False):
        raise ConfigError(f"{WHERE}.use_sliding_window", True, "is not supported (no released Qwen3 sets it)")
    spec = attention_bias_fields(r)
    n = spec["num_layers"]
    dense = r.config.get("mlp_only_layers") or []
    if dense != list(range(len(dense))):
        raise ConfigError(f"{WHERE}.mlp_only_layers", dense, "must be the first k layers (0, 1, ..., k-1)")
    spec.update(qk_norm="head", num_experts=r.get_int("num_experts", "num_local_experts", default=128),
                top_k=r.get_int("num_experts_per_tok", default=8),
                expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=768),
                moe_layer_interval=r.get_int("decoder_sparse_step", default=1), num_dense_layers=min(len(dense), n))
    return spec


def _qwen2_moe(r: ConfigReader) -> dict[str, Any]:
    """Qwen2MoeConfig (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2 attention (q/k/v biases, ``qkv_bias``), experts of
    ``moe_intermediate_size`` (top ``num_experts_per_tok`` of ``num_experts``) and one shared expert of
    ``shared_expert_intermediate_size`` behind a sigmoid gate; MoE layers as Qwen3-MoE."""
    spec = _qwen3_moe(r)
    spec.update(qk_norm="none", qkv_bias=r.get_bool("qkv_bias", default=True), head_dim=0,
                num_experts=r.get_int("num_experts", "num_local_experts", default=60),
                top_k=r.get_int("num_experts_per_tok", default=4),
                expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=1408), num_shared_experts=1,
                shared_expert_ffn_hidden_size=r.get_int("shared_expert_intermediate_size", default=5632),
                shared_expert_gate=True)
    return spec


def _olmoe(r: ConfigReader) -> dict[str, Any]:
    """OlmoeConfig (Muennighoff et al. 2024, arXiv 2409.02060, §2): OLMo with every layer MoE
    (``num_experts`` SwiGLU experts of ``intermediate_size``, top ``num_experts_per_tok``, no shared expert)
    and QK-norm over the whole q and k width."""
    spec = attention_bias_fields(r)
    spec.update(qk_norm="full", num_experts=r.get_int("num_experts", default=64),
                top_k=r.get_int("num_experts_per_tok", default=8))
    return spec


def _deepseek_v3(r: ConfigReader) -> dict[str, Any]:
    """DeepseekV3Config (DeepSeek-AI 2024, arXiv 2412.19437, §2.1 and §4.2): MLA (model/mla.py), the first
    ``first_k_dense_replace`` layers dense, then DeepSeekMoE layers of ``n_routed_experts`` experts (top
    ``num_experts_per_tok``) and ``n_shared_experts`` shared ones of ``moe_intermediate_size``; the router's
    score-correction bias is a buffer, not a parameter. transformers does not build the multi-token
    prediction module (``num_nextn_predict_layers``), so neither does this mapping: set num_mtp_layers in a
    YAML model to cost it."""
    spec = llama_fields(r, bias_keys=())
    q_lora = r.config.get("q_lora_rank")  # null: queries projected directly (DeepSeek-V2-Lite)
    rope = r.get_int("qk_rope_head_dim", default=64)
    spec.update(
        num_kv_heads=0, head_dim=r.get_int("qk_nope_head_dim", default=128) + rope,
        v_head_dim=r.get_int("v_head_dim", default=128), qk_rope_head_dim=rope,
        kv_lora_rank=r.get_int("kv_lora_rank", default=512),
        q_lora_rank=0 if q_lora is None else r.get_int("q_lora_rank"),
        attention_bias=r.get_bool("attention_bias", default=False),
        num_experts=r.get_int("n_routed_experts", default=256), top_k=r.get_int("num_experts_per_tok", default=8),
        expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=2048),
        num_shared_experts=r.get_int("n_shared_experts", default=1, minimum=0),
        num_dense_layers=min(r.get_int("first_k_dense_replace", default=3, minimum=0), spec["num_layers"]),
    )
    return spec


def _deepseek_v2(r: ConfigReader) -> dict[str, Any]:
    """DeepseekV2Config (DeepSeek-AI 2024, arXiv 2405.04434, §2-3): the MLA and DeepSeekMoE of V3 with
    V2's defaults (64 routed experts of 1407, 2 shared, top 6, no dense first layer); DeepseekV2 puts MoE on
    layers >= first_k_dense_replace with i % moe_layer_freq == 0, so a frequency other than 1 is refused."""
    freq = r.get_int("moe_layer_freq", default=1)
    if freq != 1:
        raise ConfigError(f"{WHERE}.moe_layer_freq", freq, "must be 1 (every released DeepSeek-V2 uses 1)")
    spec = _deepseek_v3(r)
    spec.update(num_experts=r.get_int("n_routed_experts", default=64), top_k=r.get_int("num_experts_per_tok",
                default=6), expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=1407),
                num_shared_experts=r.get_int("n_shared_experts", default=2, minimum=0),
                num_dense_layers=min(r.get_int("first_k_dense_replace", default=0, minimum=0), spec["num_layers"]))
    return spec


def _gpt_oss(r: ConfigReader) -> dict[str, Any]:
    """GptOssConfig (OpenAI 2025, gpt-oss model card, §2): every layer MoE (``num_local_experts`` experts of
    ``intermediate_size``, top ``num_experts_per_tok``) with biases in the experts and the router; q/k/v/o
    biases; one learned sink logit per head; a 128-token window on every other layer (layer_types); the GLU's
    inputs clamped (``swiglu_limit``, 7.0 by default: transformers GptOssExperts)."""
    spec = llama_fields(r, bias_keys=())
    spec.update(head_dim=r.get_int("head_dim", default=64), attention_bias=r.get_bool("attention_bias",
                default=True), attention_sinks=True,
                num_experts=r.get_int("num_local_experts", default=128),
                top_k=r.get_int("num_experts_per_tok", default=4), expert_bias=True, router_bias=True, glu_clamp=True,
                sliding_window=r.get_window(default=128),
                full_attention_interval=full_attention_interval(r, spec["num_layers"], 2))
    return spec


def _glm4_moe(r: ConfigReader) -> dict[str, Any]:
    """Glm4MoeConfig (GLM-4.5, Zeng et al. 2025, arXiv 2508.06471, §2.1): DeepSeek-V3's MoE layout (first
    ``first_k_dense_replace`` layers dense, ``n_routed_experts`` routed and ``n_shared_experts`` shared experts
    of ``moe_intermediate_size``) on GQA attention with q/k/v biases (``attention_bias``) and QK-norm per head
    (``use_qk_norm``). transformers does not build the MTP layer (``num_nextn_predict_layers``)."""
    spec = llama_fields(r, bias_keys=())
    spec.update(qkv_bias=r.get_bool("attention_bias", default=False),
                qk_norm="head" if r.get_bool("use_qk_norm", default=False) else "none",
                num_experts=r.get_int("n_routed_experts", default=128), top_k=r.get_int("num_experts_per_tok",
                default=8), expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=1408),
                num_shared_experts=r.get_int("n_shared_experts", default=1, minimum=0),
                num_dense_layers=min(r.get_int("first_k_dense_replace", default=1, minimum=0), spec["num_layers"]))
    return spec


FAMILIES = (
    ModelFamily(model_type="mixtral", reader=_mixtral, arch_prefixes=("Mixtral",), rotary=True),
    ModelFamily(model_type="qwen3_moe", reader=_qwen3_moe, arch_prefixes=("Qwen3Moe",), rotary=True),
    ModelFamily(model_type="qwen2_moe", reader=_qwen2_moe, arch_prefixes=("Qwen2Moe",), rotary=True),
    ModelFamily(model_type="olmoe", reader=_olmoe, arch_prefixes=("Olmoe",), rotary=True),
    ModelFamily(model_type="deepseek_v3", reader=_deepseek_v3, arch_prefixes=("DeepseekV3",), rotary=True),
    ModelFamily(model_type="deepseek_v2", reader=_deepseek_v2, arch_prefixes=("DeepseekV2",), rotary=True),
    ModelFamily(model_type="gpt_oss", reader=_gpt_oss, arch_prefixes=("GptOss",), rotary=True),
    ModelFamily(model_type="glm4_moe", reader=_glm4_moe, arch_prefixes=("Glm4Moe",), rotary=True),
)
