"""Hugging Face ``config.json`` -> TransformerSpec: a pure mapping of keys, no ``transformers``, no network.

One small function per ``model_type``; each reads the keys its family's ``*Config`` class defines, with the
same defaults that class uses when a key is absent (the defaults are cited as ``transformers`` class names).
Where a family has a parameter that TransformerSpec does not model, the function says so in a comment with the
exact size of the difference; tests/unit/model/test_hf.py checks every one of them against ``transformers``.

Unknown ``model_type`` -> ConfigError naming ``config.json.model_type`` with a did-you-mean; a missing or bad
key -> ConfigError naming ``config.json.<key>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from greentrain.errors import ConfigError, did_you_mean
from greentrain.model.hf_families_2024 import RECENT_ARCH_PREFIXES, RECENT_FAMILIES
from greentrain.model.hf_reader import _WHERE, _Reader, llama_fields
from greentrain.model.spec import ACTIVATIONS, TransformerSpec

# ---- decoder-only families ---------------------------------------------------------------------------------

_llama = llama_fields


def _mixtral(r: _Reader) -> dict[str, Any]:
    """MixtralConfig: every layer MoE (``num_local_experts`` SwiGLU experts of ``intermediate_size``, top
    ``num_experts_per_tok``), router hidden_size x experts without bias: exactly
    TransformerSpec.moe_params."""
    spec = _llama(r)
    spec.update(num_experts=r.get_int("num_local_experts", default=8),
                top_k=r.get_int("num_experts_per_tok", default=2))
    return spec


def _qwen2(r: _Reader) -> dict[str, Any]:
    """Qwen2Config: Llama with biases on q, k and v only (Qwen2Attention: o_proj and the MLP have none)."""
    spec = _llama(r, bias_keys=())
    spec.update(qkv_bias=True)
    return spec


def _gemma(r: _Reader) -> dict[str, Any]:
    """GemmaConfig: Llama with GeGLU, head_dim 256 and tied embeddings by default (Gemma Team 2024,
    Table 1)."""
    return _llama(r, tied_default=True)


def _gpt2(r: _Reader) -> dict[str, Any]:
    """GPT2Config: learned positions (``n_positions`` rows), biases everywhere (Conv1D), pre-LayerNorm,
    tied head; ``n_inner`` null means 4 * n_embd (GPT2MLP)."""
    r.aliases_agree({"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                     "max_position_embeddings": "n_positions"})  # GPT2Config.attribute_map
    d = r.get_int("n_embd", "hidden_size")
    return dict(
        num_layers=r.get_int("n_layer", "num_hidden_layers"),
        hidden_size=d,
        num_heads=r.get_int("n_head", "num_attention_heads"),
        ffn_hidden_size=r.get_int("n_inner", default=4 * d),
        vocab_size=r.get_int("vocab_size"),
        activation=r.get_activation("activation_function", default="gelu_new"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True),
        # GPT2Config(n_positions=1024): the default when the key is absent
        max_position_embeddings=r.get_int("n_positions", "max_position_embeddings", default=1024),
        linear_bias=True,
        norm="layernorm",
    )


def _gpt_neox(r: _Reader) -> dict[str, Any]:
    """GPTNeoXConfig: rotary, parallel residual (Black et al. 2022, §2.1: attention and MLP read the same
    input), untied ``embed_out`` by default, two LayerNorms per layer even in parallel mode, biases on every
    linear (``attention_bias`` defaults true; the MLP always has them)."""
    return dict(
        num_layers=r.get_int("num_hidden_layers"),
        hidden_size=r.get_int("hidden_size"),
        num_heads=r.get_int("num_attention_heads"),
        ffn_hidden_size=r.get_int("intermediate_size"),
        vocab_size=r.get_int("vocab_size"),
        activation=r.get_activation("hidden_act", default="gelu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=False),
        max_position_embeddings=0,
        linear_bias=r.get_bool("attention_bias", default=True),
        norm="layernorm",
        parallel_block=r.get_bool("use_parallel_residual", default=True),
    )


# OPTLearnedPositionalEmbedding and BartLearnedPositionalEmbedding keep 2 extra rows (the fairseq padding
# offset).
_FAIRSEQ_POSITION_OFFSET = 2


def _opt(r: _Reader) -> dict[str, Any]:
    """OPTConfig (Zhang et al. 2022, Table 1): learned positions with 2 offset rows, biases, ReLU, tied head.

    ``word_embed_proj_dim`` != hidden_size (only OPT-350m: a 512-wide table with project_in/project_out) has
    no TransformerSpec equivalent, so it is refused rather than miscounted (it would be off by 7.5 %). With
    ``do_layer_norm_before`` false (also only OPT-350m) OPTDecoder has no final LayerNorm.
    """
    d = r.get_int("hidden_size")
    proj = r.get_int("word_embed_proj_dim", default=d)
    if proj != d:
        raise ConfigError(f"{_WHERE}.word_embed_proj_dim", proj,
                          f"must equal hidden_size={d}: an embedding projection (OPT-350m) is not supported")
    return dict(
        num_layers=r.get_int("num_hidden_layers"),
        hidden_size=d,
        num_heads=r.get_int("num_attention_heads"),
        ffn_hidden_size=r.get_int("ffn_dim"),
        vocab_size=r.get_int("vocab_size"),
        activation=r.get_activation("activation_function", default="relu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True),
        max_position_embeddings=r.get_int("max_position_embeddings") + _FAIRSEQ_POSITION_OFFSET,
        position_offset=_FAIRSEQ_POSITION_OFFSET,
        linear_bias=r.get_bool("enable_bias", default=True),
        norm="layernorm",
    )


def _bloom(r: _Reader) -> dict[str, Any]:
    """BloomConfig (BigScience 2022, Table 3): ALiBi (no position table), biases, MLP 4h (BloomMLP ignores
    ``n_inner``), tied head. The 176B config spells the width ``n_embed``. BloomModel also has a LayerNorm
    after the embedding (``word_embeddings_layernorm``), which TransformerSpec does not model: 2 * hidden_size
    parameters fewer than transformers (28,672 for BLOOM-176B)."""
    # BloomConfig.attribute_map
    r.aliases_agree({"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"})
    d = r.get_int("n_embed", "hidden_size")
    return dict(
        num_layers=r.get_int("n_layer", "num_hidden_layers"),
        hidden_size=d,
        num_heads=r.get_int("n_head", "num_attention_heads"),
        ffn_hidden_size=4 * d,
        vocab_size=r.get_int("vocab_size"),
        activation="gelu",  # BloomGelu, the tanh approximation
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True),
        max_position_embeddings=0,
        linear_bias=True,
        norm="layernorm",
    )


# ---- encoder-decoder families ------------------------------------------------------------------------------

def _bart_like(r: _Reader, *, learned_positions: bool) -> dict[str, Any]:
    """BartConfig / PegasusConfig: one width, encoder_* and decoder_* sizes (which must agree here), biases,
    LayerNorm, shared tied embedding table.

    BART (Lewis et al. 2019): post-LN, learned positions with 2 offset rows per stack, a
    ``layernorm_embedding`` per stack and no final LayerNorm: the same 2 * 2d parameters TransformerSpec
    counts as final norms.
    Pegasus (Zhang et al. 2020): pre-LN with a final LayerNorm per stack; sinusoidal positions, which
    transformers stores as frozen weights (2 * max_position_embeddings * d, not trainable) and the spec omits.
    """
    r.aliases_agree({"num_hidden_layers": "encoder_layers", "num_attention_heads": "encoder_attention_heads",
                     "hidden_size": "d_model"})  # BartConfig.attribute_map, PegasusConfig.attribute_map
    positions = r.get_int("max_position_embeddings") + _FAIRSEQ_POSITION_OFFSET if learned_positions else 0
    return dict(
        arch="encoder-decoder",
        num_encoder_layers=r.get_int("encoder_layers"),
        num_layers=r.get_int("decoder_layers"),
        hidden_size=r.get_int("d_model"),
        num_heads=r.same("encoder_attention_heads", "decoder_attention_heads"),
        ffn_hidden_size=r.same("encoder_ffn_dim", "decoder_ffn_dim"),
        vocab_size=r.get_int("vocab_size"),
        activation=r.get_activation("activation_function", default="gelu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True),
        max_position_embeddings=positions,
        position_offset=_FAIRSEQ_POSITION_OFFSET if learned_positions else 0,
        linear_bias=True,
        norm="layernorm",
    )


def _bart(r: _Reader) -> dict[str, Any]:
    return _bart_like(r, learned_positions=True)


def _pegasus(r: _Reader) -> dict[str, Any]:
    return _bart_like(r, learned_positions=False)


def _t5_feed_forward(r: _Reader) -> tuple[bool, str]:
    """(gated, activation) of T5Config.feed_forward_proj: "ACT" or "gated-ACT" (T5Config.__init__ refuses any
    other form; T5DenseActDense looks ACT up in ACT2FN, which refuses an unknown name). T5Config maps
    "gated-gelu" to gelu_new."""
    proj = r.get_str("feed_forward_proj", default="relu")
    parts = proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated") or parts[-1] not in ACTIVATIONS:
        raise ConfigError(f"{_WHERE}.feed_forward_proj", proj, "must be ACT or gated-ACT with ACT an activation "
                          "transformers knows (e.g. relu, gated-gelu)" + did_you_mean(parts[-1], ACTIVATIONS))
    gated = len(parts) == 2
    return gated, "gelu_new" if proj == "gated-gelu" else parts[-1]


def _t5(r: _Reader) -> dict[str, Any]:
    """T5Config (Raffel et al. 2020): RMS-style LayerNorm without bias or mean (T5LayerNorm), no linear
    biases, ``d_kv`` per head (q_width may differ from d_model), relative position bias instead of a table.

    ``feed_forward_proj`` "relu" (T5 v1.0) is a two-matrix MLP; "gated-gelu" (T5 v1.1, Flan-T5) is GeGLU with
    wi_0, wi_1, wo. T5 v1.0 ties the output head to the embedding; v1.1 does not (``tie_word_embeddings``
    false). The relative position bias (``relative_attention_num_buckets`` x num_heads, in the first block of
    each stack) is not in TransformerSpec: 2 * 32 * num_heads parameters (1,024 for t5-large).
    """
    r.aliases_agree({"num_hidden_layers": "num_layers", "num_attention_heads": "num_heads",
                     "hidden_size": "d_model", "head_dim": "d_kv"})  # T5Config.attribute_map
    gated, activation = _t5_feed_forward(r)
    layers = r.get_int("num_layers")
    return dict(
        arch="encoder-decoder",
        num_encoder_layers=layers,
        num_layers=r.get_int("num_decoder_layers", default=layers),  # T5Config: null means "same as encoder"
        hidden_size=r.get_int("d_model"),
        num_heads=r.get_int("num_heads"),
        head_dim=r.get_int("d_kv"),
        ffn_hidden_size=r.get_int("d_ff"),
        vocab_size=r.get_int("vocab_size"),
        glu=gated,
        activation=activation,
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True),
        max_position_embeddings=0,
        linear_bias=False,
        norm="rmsnorm",
    )


FAMILIES: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "llama": _llama,
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "gemma": _gemma,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "opt": _opt,
    "bloom": _bloom,
    "bart": _bart,
    "pegasus": _pegasus,
    "t5": _t5,
    **RECENT_FAMILIES,
}

# ``architectures`` class-name prefixes, for a config.json without ``model_type`` (longest prefix first).
_ARCH_PREFIXES = (*RECENT_ARCH_PREFIXES, ("GPTNeoX", "gpt_neox"), ("Mixtral", "mixtral"), ("Mistral", "mistral"),
                  ("Pegasus", "pegasus"), ("Llama", "llama"), ("Qwen2", "qwen2"), ("Gemma", "gemma"),
                  ("Bloom", "bloom"), ("GPT2", "gpt2"), ("Bart", "bart"), ("OPT", "opt"), ("T5", "t5"))


def _model_type(config: Mapping[str, Any]) -> str:
    if config.get("model_type") is not None:
        mt = config["model_type"]
        if not isinstance(mt, str) or mt.lower() not in FAMILIES:
            shown = mt if isinstance(mt, str) else str(mt)
            raise ConfigError(f"{_WHERE}.model_type", mt,
                              "unsupported model_type" + did_you_mean(shown, FAMILIES))
        return mt.lower()
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConfigError(f"{_WHERE}.model_type", None,
                          "is required (or an architectures list naming the model class)")
    for prefix, mt in _ARCH_PREFIXES:
        if archs[0].startswith(prefix):
            return mt
    raise ConfigError(f"{_WHERE}.architectures", archs, "unsupported architecture; supported model_type: "
                      + ", ".join(sorted(FAMILIES)))


# Families whose attention rotates q and k (their modeling_*.py apply_rotary_pos_emb), and the config keys of a
# rotary base or scaling for others; ALiBi (BLOOM), learned tables (GPT-2, OPT, BART), relative biases (T5),
# sinusoids (Pegasus) and position-free attention (Jamba, Nemotron-H) are not rotary.
ROTARY_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                   "gemma3", "gemma3_text", "olmo2", "olmoe", "phi3", "deepseek_v2", "deepseek_v3", "gpt_oss",
                   "glm4_moe", "gpt_neox", "nemotron")
ROTARY_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base", "rotary_pct",
               "partial_rotary_factor")


def spec_from_hf_config(config: Mapping[str, Any], name: str) -> TransformerSpec:
    """The TransformerSpec of a Hugging Face config.json (already parsed into a mapping)."""
    if not isinstance(config, Mapping):
        raise ConfigError(_WHERE, type(config).__name__, "top level must be a mapping")
    mt = _model_type(config)
    fields = FAMILIES[mt](_Reader(config, mt))
    origin = config.get("_name_or_path") or name
    archs = config.get("architectures")
    arch_note = f", {archs[0]}" if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    source = f"Hugging Face config.json of {origin} (model_type={mt}{arch_note})"
    fields.setdefault("rotary", mt in ROTARY_FAMILIES or any(k in config for k in ROTARY_KEYS))
    return TransformerSpec(name=name, family=mt, source=source, **fields)
