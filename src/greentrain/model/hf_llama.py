"""Llama-shaped decoders -> TransformerSpec fields: pre-norm, rotary, GQA, a GLU MLP (Nemotron: squared ReLU),
from ``config.json`` alone (no ``transformers``, no network), and each family's record.

Each reader reads the keys its ``*Config`` class defines, with that class's default when a key is absent (cited
as the transformers class). tests/unit/model/test_model_hf.py checks the public configs against their published
sizes and tests/unit/model/test_model_hf_families_2024.py builds the 2024-2026 families with transformers on the
meta device and checks the parameter count exactly.
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError
from greentrain.model.family import FineTuning, ModelFamily
from greentrain.model.hf_reader import (
    WHERE,
    ConfigReader,
    attention_bias_fields,
    full_attention_interval,
    linear_biases,
    llama_fields,
)


def _qwen2(r: ConfigReader) -> dict[str, Any]:
    """Qwen2Config: Llama with biases on q, k and v only (Qwen2Attention: o_proj and the MLP have none)."""
    spec = llama_fields(r, bias_keys=())
    spec.update(qkv_bias=True)
    return spec


def _gemma(r: ConfigReader) -> dict[str, Any]:
    """GemmaConfig: Llama with GeGLU, head_dim 256 and tied embeddings by default (Gemma Team 2024,
    Table 1)."""
    return llama_fields(r, tied_default=True)


def _mistral(r: ConfigReader) -> dict[str, Any]:
    """MistralConfig (Jiang et al. 2023, arXiv 2310.06825, §2): Llama with a window on every layer (4,096
    when the key is absent, none when null: v0.2 and later)."""
    spec = llama_fields(r)
    spec.update(sliding_window=r.get_window(default=4096))
    return spec


def _qwen3(r: ConfigReader) -> dict[str, Any]:
    """Qwen3Config (Qwen Team 2025, arXiv 2505.09388, §2): Llama with an RMSNorm over each head's q and k
    (QK-norm), no q/k/v bias, head_dim 128 by default. ``use_sliding_window`` (false in every released
    model) puts the window on layers >= max_window_layers, a pattern TransformerSpec does not describe."""
    if r.get_bool("use_sliding_window", default=False):
        raise ConfigError(f"{WHERE}.use_sliding_window", True, "is not supported (no released Qwen3 sets it)")
    spec = attention_bias_fields(r)
    spec.update(head_dim=r.get_int("head_dim", default=128), qk_norm="head")
    return spec


def _gemma2(r: ConfigReader, *, interval: int = 2) -> dict[str, Any]:
    """Gemma2Config (Gemma Team 2024, arXiv 2408.00118, Table 1 and §2): GeGLU, head_dim 256, tied embeddings,
    RMSNorm before and after attention and the MLP (4 per layer), a 4,096-token window on every other layer
    (layer_types). Logit soft-capping is an element-wise op: no parameters, no model FLOPs."""
    spec = attention_bias_fields(r, tied_default=True)
    softcap = r.config.get("attn_logit_softcapping", 50.0) is not None  # Gemma2Config: 50.0 (Gemma 3: null)
    spec.update(head_dim=r.get_int("head_dim", default=256), post_norms=True, logit_softcap=softcap,
                activation=r.get_activation("hidden_activation", "hidden_act", default="gelu_pytorch_tanh"),
                sliding_window=r.get_window(default=4096),
                full_attention_interval=full_attention_interval(r, spec["num_layers"], interval))
    return spec


def _gemma3_text(r: ConfigReader) -> dict[str, Any]:
    """Gemma3TextConfig (Gemma Team 2025, arXiv 2503.19786, §2.1): Gemma 2 with QK-norm per head instead of
    soft-capping and 5 windowed layers per full one (``sliding_window_pattern`` 6)."""
    spec = _gemma2(r, interval=r.get_int("sliding_window_pattern", "_sliding_window_pattern", default=6))
    spec.update(qk_norm="head", logit_softcap=r.config.get("attn_logit_softcapping") is not None)
    return spec


def _gemma3(r: ConfigReader) -> dict[str, Any]:
    """Gemma3Config (the image-text model): its language model, ``text_config``, read as gemma3_text. The
    SigLIP vision tower (about 0.4 B parameters, Gemma 3 report §2.1) is not part of the spec."""
    text = r.config.get("text_config")
    if not isinstance(text, dict):
        raise ConfigError(f"{WHERE}.text_config", text, "is required for model_type 'gemma3' (a mapping)")
    # Gemma3TextConfig(vocab_size=262208): the released text_config files leave the key out
    return _gemma3_text(ConfigReader({"vocab_size": 262_208, **text}, "gemma3_text"))


def _olmo2(r: ConfigReader) -> dict[str, Any]:
    """Olmo2Config (OLMo Team 2024, arXiv 2501.00656, §3.1): Llama with RMSNorm after attention and after the
    MLP instead of before (the same two norms per layer) and QK-norm over the whole q and k width."""
    spec = attention_bias_fields(r)
    spec.update(qk_norm="full")
    return spec


def _phi3(r: ConfigReader) -> dict[str, Any]:
    """Phi3Config (Abdin et al. 2024, arXiv 2404.14219): Llama shapes with q/k/v and gate/up fused into one
    matrix each (the same parameters); ``sliding_window`` (null by default) on every layer."""
    spec = llama_fields(r, bias_keys=())
    # Phi3DecoderLayer's resid_attn_dropout / resid_mlp_dropout (Phi3Config.resid_pdrop, 0.0 by default)
    spec.update(sliding_window=r.get_window(), hidden_dropout=r.get_probability("resid_pdrop", default=0.0))
    return spec


def _nemotron(r: ConfigReader) -> dict[str, Any]:
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
        tied_embeddings=r.get_bool("tie_word_embeddings", default=False), norm="layernorm", **linear_biases(r),
        attention_dropout=r.get_probability("attention_dropout", default=0.0),
    )


# LlamaConfig: the fields the planner reads, at the class defaults (transformers 4.46-5.x); head_dim and
# num_key_value_heads follow hidden_size and the heads when absent.
_LLAMA_DEFAULTS = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
                   "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False}
# LlamaConfig's keys (transformers 5.24 to_dict and attribute_map); rope_theta and rope_scaling are 4.x keys
_LLAMA_KEYS = frozenset({
    "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim", "hidden_act",
    "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings", "mlp_bias",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "pad_token_id", "pretraining_tp",
    "rms_norm_eps", "rope_parameters", "tie_word_embeddings", "use_cache", "vocab_size",
    "rope_theta", "rope_scaling",
})

FAMILIES = (
    ModelFamily(model_type="llama", reader=llama_fields, arch_prefixes=("Llama",), rotary=True,
                finetuning=FineTuning(task="causal-lm", defaults=_LLAMA_DEFAULTS, config_keys=_LLAMA_KEYS,
                                      lora_modules={t: (f"{t}_proj",) for t in ("q", "k", "v", "o", "gate", "up",
                                                                                "down")})),
    ModelFamily(model_type="qwen2", reader=_qwen2, arch_prefixes=("Qwen2",), rotary=True),
    ModelFamily(model_type="gemma", reader=_gemma, arch_prefixes=("Gemma",), rotary=True),
    ModelFamily(model_type="mistral", reader=_mistral, arch_prefixes=("Mistral",), rotary=True),
    ModelFamily(model_type="qwen3", reader=_qwen3, arch_prefixes=("Qwen3",), rotary=True),
    ModelFamily(model_type="gemma2", reader=_gemma2, arch_prefixes=("Gemma2",), rotary=True),
    ModelFamily(model_type="gemma3_text", reader=_gemma3_text, arch_prefixes=("Gemma3",), rotary=True),
    ModelFamily(model_type="gemma3", reader=_gemma3, arch_prefixes=("Gemma3ForConditional",), rotary=True),
    ModelFamily(model_type="olmo2", reader=_olmo2, arch_prefixes=("Olmo2",), rotary=True),
    ModelFamily(model_type="phi3", reader=_phi3, arch_prefixes=("Phi3",), rotary=True),
    ModelFamily(model_type="nemotron", reader=_nemotron, arch_prefixes=("Nemotron",), rotary=True),
)
