"""GPT-style decoders -> TransformerSpec fields: LayerNorm, biases, a learned position table (GPT-2, OPT), rotary
(GPT-NeoX) or ALiBi (BLOOM), from ``config.json`` alone (no ``transformers``, no network), and each family's
record.

Each reader reads the keys its ``*Config`` class defines, with that class's default when a key is absent. Where a
family has a parameter TransformerSpec does not model, the reader says so with the exact size of the difference;
tests/unit/model/test_model_hf.py checks every one of them against ``transformers``.
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError
from greentrain.model.family import FineTuning, ModelFamily
from greentrain.model.hf_reader import FAIRSEQ_POSITION_OFFSET, WHERE, ConfigReader


def _gpt2(r: ConfigReader) -> dict[str, Any]:
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
        hidden_dropout=r.get_probability("resid_pdrop", default=0.1),  # GPT2Config defaults
        attention_dropout=r.get_probability("attn_pdrop", default=0.1),
    )


def _gpt_neox(r: ConfigReader) -> dict[str, Any]:
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
        hidden_dropout=r.get_probability("hidden_dropout", default=0.0),  # GPTNeoXConfig defaults
        attention_dropout=r.get_probability("attention_dropout", default=0.0),
    )


def _opt(r: ConfigReader) -> dict[str, Any]:
    """OPTConfig (Zhang et al. 2022, Table 1): learned positions with 2 offset rows, biases, ReLU, tied head.

    ``word_embed_proj_dim`` != hidden_size (only OPT-350m: a 512-wide table with project_in/project_out) has
    no TransformerSpec equivalent, so it is refused rather than miscounted (it would be off by 7.5 %). With
    ``do_layer_norm_before`` false (also only OPT-350m) OPTDecoder has no final LayerNorm.
    """
    d = r.get_int("hidden_size")
    proj = r.get_int("word_embed_proj_dim", default=d)
    if proj != d:
        raise ConfigError(f"{WHERE}.word_embed_proj_dim", proj,
                          f"must equal hidden_size={d}: an embedding projection (OPT-350m) is not supported")
    return dict(
        num_layers=r.get_int("num_hidden_layers"),
        hidden_size=d,
        num_heads=r.get_int("num_attention_heads"),
        ffn_hidden_size=r.get_int("ffn_dim"),
        vocab_size=r.get_int("vocab_size"),
        activation=r.get_activation("activation_function", default="relu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True),
        max_position_embeddings=r.get_int("max_position_embeddings") + FAIRSEQ_POSITION_OFFSET,
        position_offset=FAIRSEQ_POSITION_OFFSET,
        linear_bias=r.get_bool("enable_bias", default=True),
        norm="layernorm",
        hidden_dropout=r.get_probability("dropout", default=0.1),  # OPTConfig defaults
        attention_dropout=r.get_probability("attention_dropout", default=0.0),
    )


def _bloom(r: ConfigReader) -> dict[str, Any]:
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
        hidden_dropout=r.get_probability("hidden_dropout", default=0.0),  # BloomConfig defaults
        attention_dropout=r.get_probability("attention_dropout", default=0.0),
    )


# GPT2Config: the fields the planner reads, at the class defaults (transformers 4.46-5.x)
_GPT2_DEFAULTS = {"n_embd": 768, "n_layer": 12, "n_head": 12, "activation_function": "gelu_new",
                  "n_positions": 1024, "tie_word_embeddings": True}
# GPT2Config's keys (transformers 5.24 to_dict and attribute_map)
_GPT2_KEYS = frozenset({
    "activation_function", "add_cross_attention", "attn_pdrop", "bos_token_id", "embd_pdrop", "eos_token_id",
    "hidden_size", "initializer_range", "layer_norm_epsilon", "max_position_embeddings", "n_embd", "n_head",
    "n_inner", "n_layer", "n_positions", "num_attention_heads", "num_hidden_layers", "pad_token_id",
    "reorder_and_upcast_attn", "resid_pdrop", "scale_attn_by_inverse_layer_idx", "scale_attn_weights",
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
    "tie_word_embeddings", "use_cache", "vocab_size",
})

FAMILIES = (
    ModelFamily(model_type="gpt2", reader=_gpt2, arch_prefixes=("GPT2",),
                finetuning=FineTuning(task="causal-lm", defaults=_GPT2_DEFAULTS, config_keys=_GPT2_KEYS,
                                      no_lora_reason="GPT-2 fuses q, k and v in one Conv1D")),
    ModelFamily(model_type="gpt_neox", reader=_gpt_neox, arch_prefixes=("GPTNeoX",), rotary=True),
    ModelFamily(model_type="opt", reader=_opt, arch_prefixes=("OPT",)),
    ModelFamily(model_type="bloom", reader=_bloom, arch_prefixes=("Bloom",)),
)
