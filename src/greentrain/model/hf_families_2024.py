"""Hugging Face ``config.json`` families released 2024-2026 -> TransformerSpec fields: no ``transformers``, no network.

Each function reads the keys its ``*Config`` class defines, with that class's default when a key is absent
(transformers 5.23); tests/unit/model/test_model_hf_families_2024.py builds each family with transformers on the meta
device and checks the parameter count exactly, and the FLOPs of a tiny config against FlopCounterMode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from greentrain.errors import ConfigError
from greentrain.model.hf_reader import _WHERE, _Reader, full_attention_interval, llama_fields


def _llama_attention_bias(r: _Reader, *, tied_default: bool = False) -> dict[str, Any]:
    """Llama fields where ``attention_bias`` puts biases on q, k, v and o only (Qwen3, Gemma 2/3, OLMo 2,
    OLMoE attention classes) and the MLP has none."""
    spec = llama_fields(r, tied_default=tied_default, bias_keys=())
    spec.update(attention_bias=r.get_bool("attention_bias", default=False))
    return spec


def _qwen3(r: _Reader) -> dict[str, Any]:
    """Qwen3Config (Qwen Team 2025, arXiv 2505.09388, §2): Llama with an RMSNorm over each head's q and k
    (QK-norm), no q/k/v bias, head_dim 128 by default. ``use_sliding_window`` (false in every released
    model) puts the window on layers >= max_window_layers, a pattern TransformerSpec does not describe."""
    if r.get_bool("use_sliding_window", default=False):
        raise ConfigError(f"{_WHERE}.use_sliding_window", True, "is not supported (no released Qwen3 sets it)")
    spec = _llama_attention_bias(r)
    spec.update(head_dim=r.get_int("head_dim", default=128), qk_norm="head")
    return spec


def _qwen3_moe(r: _Reader) -> dict[str, Any]:
    """Qwen3MoeConfig: Qwen3 attention (head_dim from the key, else hidden_size // heads:
    Qwen3MoeAttention) and ``num_experts`` (v5: num_local_experts) SwiGLU experts of ``moe_intermediate_size``,
    top ``num_experts_per_tok``, no shared expert, router without bias; layer i is MoE iff i is not in
    ``mlp_only_layers`` and (i + 1) % decoder_sparse_step == 0."""
    if r.get_bool("use_sliding_window", default=False):
        raise ConfigError(f"{_WHERE}.use_sliding_window", True, "is not supported (no released Qwen3 sets it)")
    spec = _llama_attention_bias(r)
    n = spec["num_layers"]
    dense = r.config.get("mlp_only_layers") or []
    if dense != list(range(len(dense))):
        raise ConfigError(f"{_WHERE}.mlp_only_layers", dense, "must be the first k layers (0, 1, ..., k-1)")
    spec.update(qk_norm="head", num_experts=r.get_int("num_experts", "num_local_experts", default=128),
                top_k=r.get_int("num_experts_per_tok", default=8),
                expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=768),
                moe_layer_interval=r.get_int("decoder_sparse_step", default=1), num_dense_layers=min(len(dense), n))
    return spec


def _gemma2(r: _Reader, *, interval: int = 2) -> dict[str, Any]:
    """Gemma2Config (Gemma Team 2024, arXiv 2408.00118, Table 1 and §2): GeGLU, head_dim 256, tied embeddings,
    RMSNorm before and after attention and the MLP (4 per layer), a 4,096-token window on every other layer
    (layer_types). Logit soft-capping is an element-wise op: no parameters, no model FLOPs."""
    spec = _llama_attention_bias(r, tied_default=True)
    softcap = r.config.get("attn_logit_softcapping", 50.0) is not None  # Gemma2Config: 50.0 (Gemma 3: null)
    spec.update(head_dim=r.get_int("head_dim", default=256), post_norms=True, logit_softcap=softcap,
                activation=r.get_activation("hidden_activation", "hidden_act", default="gelu_pytorch_tanh"),
                sliding_window=r.get_window(default=4096),
                full_attention_interval=full_attention_interval(r, spec["num_layers"], interval))
    return spec


def _gemma3_text(r: _Reader) -> dict[str, Any]:
    """Gemma3TextConfig (Gemma Team 2025, arXiv 2503.19786, §2.1): Gemma 2 with QK-norm per head instead of
    soft-capping and 5 windowed layers per full one (``sliding_window_pattern`` 6)."""
    spec = _gemma2(r, interval=r.get_int("sliding_window_pattern", "_sliding_window_pattern", default=6))
    spec.update(qk_norm="head", logit_softcap=r.config.get("attn_logit_softcapping") is not None)
    return spec


def _gemma3(r: _Reader) -> dict[str, Any]:
    """Gemma3Config (the image-text model): its language model, ``text_config``, read as gemma3_text. The
    SigLIP vision tower (about 0.4 B parameters, Gemma 3 report §2.1) is not part of the spec."""
    text = r.config.get("text_config")
    if not isinstance(text, dict):
        raise ConfigError(f"{_WHERE}.text_config", text, "is required for model_type 'gemma3' (a mapping)")
    # Gemma3TextConfig(vocab_size=262208): the released text_config files leave the key out
    return _gemma3_text(_Reader({"vocab_size": 262_208, **text}, "gemma3_text"))


def _olmo2(r: _Reader) -> dict[str, Any]:
    """Olmo2Config (OLMo Team 2024, arXiv 2501.00656, §3.1): Llama with RMSNorm after attention and after the
    MLP instead of before (the same two norms per layer) and QK-norm over the whole q and k width."""
    spec = _llama_attention_bias(r)
    spec.update(qk_norm="full")
    return spec


def _phi3(r: _Reader) -> dict[str, Any]:
    """Phi3Config (Abdin et al. 2024, arXiv 2404.14219): Llama shapes with q/k/v and gate/up fused into one
    matrix each (the same parameters); ``sliding_window`` (null by default) on every layer."""
    spec = llama_fields(r, bias_keys=())
    spec.update(sliding_window=r.get_window())
    return spec


def _mistral(r: _Reader) -> dict[str, Any]:
    """MistralConfig (Jiang et al. 2023, arXiv 2310.06825, §2): Llama with a window on every layer (4,096
    when the key is absent, none when null: v0.2 and later)."""
    spec = llama_fields(r)
    spec.update(sliding_window=r.get_window(default=4096))
    return spec


def _biases(r: _Reader) -> dict[str, bool]:
    """NemotronConfig / NemotronHConfig ``attention_bias`` and ``mlp_bias`` (both false in every released
    model). TransformerSpec has attention-only biases and biases everywhere, not MLP-only ones."""
    attention, mlp = r.get_bool("attention_bias", default=False), r.get_bool("mlp_bias", default=False)
    if mlp and not attention:
        raise ConfigError(f"{_WHERE}.mlp_bias", True, "is supported only together with attention_bias")
    return dict(attention_bias=attention, linear_bias=mlp)


def _nemotron(r: _Reader) -> dict[str, Any]:
    """NemotronConfig (Nemotron-4 340B, NVIDIA 2024, arXiv 2406.11704, §2.2): squared-ReLU two-matrix MLP,
    LayerNorm with a bias (LayerNorm1P), GQA, untied head, no linear biases. NemotronConfig leaves
    num_key_value_heads null by default, which NemotronAttention cannot build: the key is required."""
    heads = r.get_int("num_attention_heads")
    d = r.get_int("hidden_size")
    return dict(
        num_layers=r.get_int("num_hidden_layers"), hidden_size=d, num_heads=heads,
        num_kv_heads=r.get_int("num_key_value_heads"), head_dim=r.get_int("head_dim", default=d // heads),
        ffn_hidden_size=r.get_int("intermediate_size"), vocab_size=r.get_int("vocab_size"), glu=False,
        activation=r.get_activation("hidden_act", default="relu2"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=False), norm="layernorm", **_biases(r),
    )


def _deepseek_v3(r: _Reader) -> dict[str, Any]:
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


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    """GptOssConfig (OpenAI 2025, gpt-oss model card, §2): every layer MoE (``num_local_experts`` experts of
    ``intermediate_size``, top ``num_experts_per_tok``) with biases in the experts and the router; q/k/v/o
    biases; one learned sink logit per head; a 128-token window on every other layer (layer_types)."""
    spec = llama_fields(r, bias_keys=())
    spec.update(head_dim=r.get_int("head_dim", default=64), attention_bias=r.get_bool("attention_bias",
                default=True), attention_sinks=True,
                num_experts=r.get_int("num_local_experts", default=128),
                top_k=r.get_int("num_experts_per_tok", default=4), expert_bias=True, router_bias=True,
                sliding_window=r.get_window(default=128),
                full_attention_interval=full_attention_interval(r, spec["num_layers"], 2))
    return spec


def _mamba2(r: _Reader) -> dict[str, Any]:
    """Mamba2Config (Dao & Gu 2024, arXiv 2405.21060, §7-8): every layer an RMSNorm and a Mamba-2 mixer, no
    MLP, no attention. The mixer's heads (``num_heads`` x ``head_dim`` = ``expand`` x hidden_size) stand in
    for attention heads in num_heads/head_dim."""
    heads, head_dim = r.get_int("num_heads", default=128), r.get_int("head_dim", default=64)
    d, expand = r.get_int("hidden_size"), r.get_int("expand", default=2)
    if heads * head_dim != expand * d:
        raise ConfigError(f"{_WHERE}.num_heads", heads, f"times head_dim={head_dim} must equal expand * "
                          f"hidden_size = {expand * d} (Mamba2Mixer splits the inner width into heads)")
    return dict(
        num_layers=r.get_int("num_hidden_layers"), hidden_size=d, num_heads=heads, head_dim=head_dim,
        ffn_hidden_size=0, vocab_size=r.get_int("vocab_size"), activation=r.get_activation("hidden_act",
        default="silu"), tied_embeddings=r.get_bool("tie_word_embeddings", default=False), norm="rmsnorm",
        ssm="mamba2", attention_layer_interval=0, ssm_state_size=r.get_int("state_size", default=128),
        ssm_expand=expand, ssm_conv_kernel=r.get_int("conv_kernel", default=4), ssm_num_heads=heads,
        ssm_num_groups=r.get_int("n_groups", default=8), ssm_bias=r.get_bool("use_bias", default=False),
        ssm_conv_bias=r.get_bool("use_conv_bias", default=True), ssm_chunk_size=r.get_int("chunk_size",
        default=256),
    )


def _jamba(r: _Reader) -> dict[str, Any]:
    """JambaConfig (Lieber et al. 2024, arXiv 2403.19887, §2; Jamba-1.5, arXiv 2408.12570): Mamba layers with
    one attention layer per ``attn_layer_period`` (at ``attn_layer_offset``), an MoE MLP on every
    ``expert_layer_period``-th layer, RMSNorms on the Mamba step size, B and C. Experts must sit on layers
    period-1, 2 period-1, ... (every released Jamba: period 2, offset 1)."""
    spec = llama_fields(r, bias_keys=())
    period, offset = r.get_int("expert_layer_period", default=2), r.get_int("expert_layer_offset", default=1,
                                                                             minimum=0)
    if offset != period - 1:
        raise ConfigError(f"{_WHERE}.expert_layer_offset", offset, f"must be expert_layer_period - 1 = {period - 1}")
    dt_rank = r.config.get("mamba_dt_rank", "auto")
    spec.update(num_experts=r.get_int("num_experts", default=16), top_k=r.get_int("num_experts_per_tok", default=2),
                moe_layer_interval=period, ssm="mamba", attention_layer_interval=r.get_int("attn_layer_period",
                default=8), attention_layer_offset=r.get_int("attn_layer_offset", default=4, minimum=0),
                ssm_state_size=r.get_int("mamba_d_state", default=16), ssm_expand=r.get_int("mamba_expand",
                default=2), ssm_conv_kernel=r.get_int("mamba_d_conv", default=4),
                ssm_dt_rank=0 if dt_rank == "auto" else r.get_int("mamba_dt_rank"),
                ssm_bias=r.get_bool("mamba_proj_bias", default=False),
                ssm_conv_bias=r.get_bool("mamba_conv_bias", default=True), ssm_inner_norms=True)
    return spec


def _deepseek_v2(r: _Reader) -> dict[str, Any]:
    """DeepseekV2Config (DeepSeek-AI 2024, arXiv 2405.04434, §2-3): the MLA and DeepSeekMoE of V3 with
    V2's defaults (64 routed experts of 1407, 2 shared, top 6, no dense first layer); DeepseekV2 puts MoE on
    layers >= first_k_dense_replace with i % moe_layer_freq == 0, so a frequency other than 1 is refused."""
    freq = r.get_int("moe_layer_freq", default=1)
    if freq != 1:
        raise ConfigError(f"{_WHERE}.moe_layer_freq", freq, "must be 1 (every released DeepSeek-V2 uses 1)")
    spec = _deepseek_v3(r)
    spec.update(num_experts=r.get_int("n_routed_experts", default=64), top_k=r.get_int("num_experts_per_tok",
                default=6), expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=1407),
                num_shared_experts=r.get_int("n_shared_experts", default=2, minimum=0),
                num_dense_layers=min(r.get_int("first_k_dense_replace", default=0, minimum=0), spec["num_layers"]))
    return spec


def _olmoe(r: _Reader) -> dict[str, Any]:
    """OlmoeConfig (Muennighoff et al. 2024, arXiv 2409.02060, §2): OLMo with every layer MoE
    (``num_experts`` SwiGLU experts of ``intermediate_size``, top ``num_experts_per_tok``, no shared expert)
    and QK-norm over the whole q and k width."""
    spec = _llama_attention_bias(r)
    spec.update(qk_norm="full", num_experts=r.get_int("num_experts", default=64),
                top_k=r.get_int("num_experts_per_tok", default=8))
    return spec


def _mamba(r: _Reader) -> dict[str, Any]:
    """MambaConfig (Gu & Dao 2023, arXiv 2312.00752): every layer an RMSNorm and a Mamba mixer (no inner
    norms, unlike Jamba), no MLP, no attention; ``time_step_rank`` "auto" is ceil(hidden_size / 16)."""
    d = r.get_int("hidden_size")
    rank = r.config.get("time_step_rank", "auto")
    return dict(
        num_layers=r.get_int("num_hidden_layers"), hidden_size=d, num_heads=1, head_dim=d, ffn_hidden_size=0,
        vocab_size=r.get_int("vocab_size"), activation=r.get_activation("hidden_act", default="silu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True), norm="rmsnorm", ssm="mamba",
        attention_layer_interval=0, ssm_state_size=r.get_int("state_size", default=16),
        ssm_expand=r.get_int("expand", default=2), ssm_conv_kernel=r.get_int("conv_kernel", default=4),
        ssm_dt_rank=0 if rank == "auto" else r.get_int("time_step_rank"),
        ssm_bias=r.get_bool("use_bias", default=False), ssm_conv_bias=r.get_bool("use_conv_bias", default=True),
    )


_NEMOTRON_H_TYPES = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*",
                     "mlp": "-", "moe": "E"}


def _nemotron_h_pattern(r: _Reader) -> str:
    """``layers_block_type`` (or its legacy names), else ``hybrid_override_pattern``, else NemotronHConfig's
    default [linear_attention, moe, full_attention, mlp]."""
    types = r.config.get("layers_block_type", r.config.get("layer_types"))
    if types is None:
        pattern = r.get_str("hybrid_override_pattern", default="ME*-")
        if set(pattern) - set("ME*-"):
            raise ConfigError(f"{_WHERE}.hybrid_override_pattern", pattern, "must use only M, E, * and -")
        return pattern
    if not isinstance(types, list) or not types or any(t not in _NEMOTRON_H_TYPES for t in types):
        raise ConfigError(f"{_WHERE}.layers_block_type", types, "must list " + ", ".join(_NEMOTRON_H_TYPES))
    return "".join(_NEMOTRON_H_TYPES[t] for t in types)


def _nemotron_h(r: _Reader) -> dict[str, Any]:
    """NemotronHConfig (NVIDIA 2025, Nemotron-H, arXiv 2504.03624, §2): one block per layer, Mamba-2 (M),
    attention (*), squared-ReLU MLP (-) or squared-ReLU MoE with a shared expert (E), in the order of
    ``hybrid_override_pattern``. The latent MoE projections (``moe_latent_size``) are not described: refused."""
    if r.config.get("moe_latent_size") is not None:
        raise ConfigError(f"{_WHERE}.moe_latent_size", r.config["moe_latent_size"], "is not supported (null only)")
    pattern = _nemotron_h_pattern(r)
    heads = r.get_int("num_attention_heads", default=32)
    return dict(
        num_layers=len(pattern), layer_pattern=pattern, hidden_size=r.get_int("hidden_size", default=4096),
        num_heads=heads, num_kv_heads=r.get_int("num_key_value_heads", default=8),
        head_dim=r.get_int("head_dim", default=128), ffn_hidden_size=r.get_int("intermediate_size", default=21504),
        vocab_size=r.get_int("vocab_size", default=131072), glu=False,
        activation=r.get_activation("mlp_hidden_act", default="relu2"), norm="rmsnorm",
        tied_embeddings=r.get_bool("tie_word_embeddings", default=False), **_biases(r),
        num_experts=r.get_int("n_routed_experts", default=8), top_k=r.get_int("num_experts_per_tok", default=2),
        expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=7688),
        num_shared_experts=r.get_int("n_shared_experts", default=1, minimum=0),
        shared_expert_ffn_hidden_size=r.get_int("moe_shared_expert_intermediate_size", default=7688),
        ssm="mamba2", ssm_state_size=r.get_int("ssm_state_size", default=128),
        ssm_num_heads=r.get_int("mamba_num_heads", default=128), ssm_head_dim=r.get_int("mamba_head_dim",
        default=64), ssm_num_groups=r.get_int("n_groups", "mamba_n_groups", default=8),
        ssm_conv_kernel=r.get_int("conv_kernel", "mamba_d_conv", default=4),
        ssm_bias=r.get_bool("use_bias", default=False),
        ssm_conv_bias=r.get_bool("use_conv_bias", "mamba_conv_bias", default=True),
        ssm_chunk_size=r.get_int("chunk_size", "mamba_chunk_size", default=128),
    )


def _qwen2_moe(r: _Reader) -> dict[str, Any]:
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


def _glm4_moe(r: _Reader) -> dict[str, Any]:
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


RECENT_FAMILIES: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "qwen3": _qwen3, "qwen3_moe": _qwen3_moe, "gemma2": _gemma2, "gemma3_text": _gemma3_text,
    "gemma3": _gemma3, "olmo2": _olmo2, "phi3": _phi3, "mistral": _mistral, "nemotron": _nemotron,
    "deepseek_v3": _deepseek_v3, "gpt_oss": _gpt_oss, "mamba2": _mamba2, "jamba": _jamba,
    "deepseek_v2": _deepseek_v2, "olmoe": _olmoe, "mamba": _mamba, "nemotron_h": _nemotron_h,
    "qwen2_moe": _qwen2_moe, "glm4_moe": _glm4_moe,
}

# ``architectures`` class-name prefixes, for a config.json without ``model_type``.
RECENT_ARCH_PREFIXES = (("Qwen3Moe", "qwen3_moe"), ("Qwen2Moe", "qwen2_moe"), ("Glm4Moe", "glm4_moe"),
                        ("Qwen3", "qwen3"), ("Gemma2", "gemma2"),
                        ("Gemma3ForConditional", "gemma3"), ("Gemma3", "gemma3_text"), ("Olmo2", "olmo2"),
                        ("Olmoe", "olmoe"), ("Phi3", "phi3"), ("NemotronH", "nemotron_h"), ("Nemotron", "nemotron"),
                        ("DeepseekV3", "deepseek_v3"), ("DeepseekV2", "deepseek_v2"), ("GptOss", "gpt_oss"),
                        ("Mamba2", "mamba2"), ("Mamba", "mamba"), ("Jamba", "jamba"))
