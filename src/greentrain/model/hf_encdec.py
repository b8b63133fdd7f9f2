"""Encoder-decoder families (BART, Pegasus, T5) -> TransformerSpec fields, from ``config.json`` alone (no
``transformers``, no network), and each family's record: all three are what ``greentrain experiment``
fine-tunes for summarization.

Each reader reads the keys its ``*Config`` class defines, with that class's default when a key is absent. Where a
family has a parameter TransformerSpec does not model, the reader says so with the exact size of the difference;
tests/unit/model/test_model_hf.py checks every one of them against ``transformers``.
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError, did_you_mean
from greentrain.model.family import FineTuning, ModelFamily
from greentrain.model.hf_reader import FAIRSEQ_POSITION_OFFSET, WHERE, ConfigReader
from greentrain.model.spec import ACTIVATIONS


def _bart_like(r: ConfigReader, *, learned_positions: bool) -> dict[str, Any]:
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
    positions = r.get_int("max_position_embeddings") + FAIRSEQ_POSITION_OFFSET if learned_positions else 0
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
        position_offset=FAIRSEQ_POSITION_OFFSET if learned_positions else 0,
        linear_bias=True,
        norm="layernorm",
        hidden_dropout=r.get_probability("dropout", default=0.1),  # BartConfig / PegasusConfig defaults
        attention_dropout=r.get_probability("attention_dropout", default=0.0),
        activation_dropout=r.get_probability("activation_dropout", default=0.0),
    )


def _bart(r: ConfigReader) -> dict[str, Any]:
    return _bart_like(r, learned_positions=True)


def _pegasus(r: ConfigReader) -> dict[str, Any]:
    return _bart_like(r, learned_positions=False)


def _t5_feed_forward(r: ConfigReader) -> tuple[bool, str]:
    """(gated, activation) of T5Config.feed_forward_proj: "ACT" or "gated-ACT" (T5Config.__init__ refuses any
    other form; T5DenseActDense looks ACT up in ACT2FN, which refuses an unknown name). T5Config maps
    "gated-gelu" to gelu_new."""
    proj = r.get_str("feed_forward_proj", default="relu")
    parts = proj.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated") or parts[-1] not in ACTIVATIONS:
        raise ConfigError(f"{WHERE}.feed_forward_proj", proj, "must be ACT or gated-ACT with ACT an activation "
                          "transformers knows (e.g. relu, gated-gelu)" + did_you_mean(parts[-1], ACTIVATIONS))
    gated = len(parts) == 2
    return gated, "gelu_new" if proj == "gated-gelu" else parts[-1]


def _t5(r: ConfigReader) -> dict[str, Any]:
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
        # T5Config.dropout_rate: every T5LayerFF / T5LayerSelfAttention output, the attention weights and the
        # feed-forward's activation
        hidden_dropout=r.get_probability("dropout_rate", default=0.1),
        attention_dropout=r.get_probability("dropout_rate", default=0.1),
        activation_dropout=r.get_probability("dropout_rate", default=0.1),  # T5DenseActDense: act, dropout, wo
    )


# The fields the planner reads, at the defaults of T5Config and BartConfig (PegasusConfig has the same ones),
# transformers 4.46-5.x
_T5_DEFAULTS = {"d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8,
                "feed_forward_proj": "relu", "tie_word_embeddings": True}
_BART_DEFAULTS = {"d_model": 1024, "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 16,
                  "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096,
                  "activation_function": "gelu", "max_position_embeddings": 1024, "tie_word_embeddings": True}
# Their keys (transformers 5.24 to_dict and attribute_map)
_T5_KEYS = frozenset({
    "classifier_dropout", "d_ff", "d_kv", "d_model", "dense_act_fn", "dropout_rate", "eos_token_id",
    "feed_forward_proj", "head_dim", "hidden_size", "initializer_factor", "is_decoder", "is_gated_act",
    "layer_norm_epsilon", "num_attention_heads", "num_decoder_layers", "num_heads", "num_hidden_layers",
    "num_layers", "pad_token_id", "relative_attention_max_distance", "relative_attention_num_buckets",
    "scale_decoder_outputs", "tie_word_embeddings", "use_cache", "vocab_size",
})
_BART_KEYS = frozenset({
    "activation_dropout", "activation_function", "attention_dropout", "bos_token_id", "classifier_dropout",
    "d_model", "decoder_attention_heads", "decoder_ffn_dim", "decoder_layerdrop", "decoder_layers",
    "decoder_start_token_id", "dropout", "encoder_attention_heads", "encoder_ffn_dim", "encoder_layerdrop",
    "encoder_layers", "eos_token_id", "forced_eos_token_id", "hidden_size", "init_std", "is_decoder",
    "max_position_embeddings", "num_attention_heads", "num_hidden_layers", "pad_token_id", "scale_embedding",
    "tie_word_embeddings", "use_cache", "vocab_size",
})
_PEGASUS_KEYS = frozenset({
    "activation_dropout", "activation_function", "attention_dropout", "d_model", "decoder_attention_heads",
    "decoder_ffn_dim", "decoder_layerdrop", "decoder_layers", "decoder_start_token_id", "dropout",
    "encoder_attention_heads", "encoder_ffn_dim", "encoder_layerdrop", "encoder_layers", "eos_token_id",
    "forced_eos_token_id", "hidden_size", "init_std", "is_decoder", "max_position_embeddings",
    "num_attention_heads", "num_hidden_layers", "pad_token_id", "scale_embedding", "tie_word_embeddings",
    "use_cache", "vocab_size",
})
# LoRA targets -> module names: T5Attention q/k/v/o, T5DenseActDense wi / T5DenseGatedActDense wi_0, wi_1 and wo;
# BartAttention (PegasusAttention) q_proj/k_proj/v_proj/out_proj, fc1 and fc2
_T5_LORA = {"q": ("q",), "k": ("k",), "v": ("v",), "o": ("o",), "up": ("wi", "wi_1"), "down": ("wo",)}
_BART_LORA = {"q": ("q_proj",), "k": ("k_proj",), "v": ("v_proj",), "o": ("out_proj",), "up": ("fc1",),
              "down": ("fc2",)}

# decoder_start: BartConfig starts decoding from </s> (decoder_start_token_id 2 = eos), T5 and Pegasus from <pad>
FAMILIES = (
    ModelFamily(model_type="t5", reader=_t5, arch_prefixes=("T5",),
                finetuning=FineTuning(task="summarization", defaults=_T5_DEFAULTS, config_keys=_T5_KEYS,
                                      lora_modules=_T5_LORA)),
    ModelFamily(model_type="bart", reader=_bart, arch_prefixes=("Bart",),
                finetuning=FineTuning(task="summarization", defaults=_BART_DEFAULTS, config_keys=_BART_KEYS,
                                      decoder_start="eos", lora_modules=_BART_LORA)),
    ModelFamily(model_type="pegasus", reader=_pegasus, arch_prefixes=("Pegasus",),
                finetuning=FineTuning(task="summarization", defaults=_BART_DEFAULTS, config_keys=_PEGASUS_KEYS,
                                      lora_modules=_BART_LORA)),
)
