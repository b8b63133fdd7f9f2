"""Reading one Hugging Face ``config.json``: typed keys with the family's defaults, errors that name the key, and
the key groups several families share (the Llama-style decoder, attention biases, sliding-window layer patterns,
fairseq's position offset).

Used by the family readers: model/hf_llama.py, hf_gpt.py, hf_encdec.py, hf_moe.py and hf_ssm.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from greentrain.config import MAX_SHAPE, as_int
from greentrain.errors import ConfigError, did_you_mean
from greentrain.model.spec import ACTIVATIONS

_MISSING: Any = object()
WHERE = "config.json"
# OPTLearnedPositionalEmbedding and BartLearnedPositionalEmbedding keep 2 extra rows (the fairseq padding
# offset).
FAIRSEQ_POSITION_OFFSET = 2


class ConfigReader:
    """Reads keys of one config.json; every error names the key (``config.json.<key>``)."""

    def __init__(self, config: Mapping[str, Any], model_type: str) -> None:
        self.config = config
        self.model_type = model_type

    def _raw(self, keys: tuple[str, ...], default: Any) -> tuple[str, Any]:
        for key in keys:
            if self.config.get(key) is not None:
                return key, self.config[key]
        if default is _MISSING:
            names = " or ".join(keys)
            raise ConfigError(f"{WHERE}.{keys[0]}", None,
                              f"is required for model_type {self.model_type!r} (looked for {names})")
        return keys[0], default

    def get_int(self, *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """The first of ``keys`` that is present and not null, as an integer >= ``minimum`` and at most
        MAX_SHAPE (a 1e12-layer config is refused here, before anything iterates over its layers; the model's
        own ranges are config.BOUNDS, checked by TransformerSpec)."""
        key, value = self._raw(keys, default)
        n = as_int(value, f"{WHERE}.{key}", minimum=minimum)
        if n > MAX_SHAPE:
            raise ConfigError(f"{WHERE}.{key}", value, f"must be <= {MAX_SHAPE:.0e} (no model dimension is larger)")
        return n

    def get_optional_dim(self, key: str) -> int:
        """A size where absent or null means "derive it" (0 for TransformerSpec); a given value is >= 1."""
        return self.get_int(key) if self.config.get(key) is not None else 0

    def get_window(self, key: str = "sliding_window", *, default: int | None = None) -> int:
        """A sliding-window length where null means "no window" (0) and an absent key means the config class's
        ``default`` (MistralConfig: 4096; most others: None)."""
        if key not in self.config:
            return default or 0
        if self.config[key] is None:
            return 0
        return as_int(self.config[key], f"{WHERE}.{key}", minimum=1)

    def get_bool(self, *keys: str, default: Any = _MISSING) -> bool:
        """JSON true or false: transformers keeps a string ("yes", "false") as given, and a non-empty string
        is truthy in Python, so "false" would tie the embeddings: refused."""
        key, value = self._raw(keys, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{WHERE}.{key}", value, "must be JSON true or false")
        return value

    def get_probability(self, *keys: str, default: Any = _MISSING) -> float:
        """A dropout probability: a JSON number in [0, 1)."""
        key, value = self._raw(keys, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise ConfigError(f"{WHERE}.{key}", value, "must be a probability in [0, 1)")
        return float(value)

    def get_str(self, *keys: str, default: Any = _MISSING) -> str:
        key, value = self._raw(keys, default)
        if not isinstance(value, str):
            raise ConfigError(f"{WHERE}.{key}", value, "must be a string")
        return value

    def get_activation(self, *keys: str, default: Any = _MISSING) -> str:
        """An activation name transformers knows (ACT2FN); anything else fails there when the model is built."""
        key, value = self._raw(keys, default)
        name = self.get_str(key, default=value)
        if name not in ACTIVATIONS:
            raise ConfigError(f"{WHERE}.{key}", name, "unknown activation" + did_you_mean(name, ACTIVATIONS))
        return name

    def same(self, first: str, second: str) -> int:
        """Two keys TransformerSpec cannot tell apart (encoder vs decoder width): they must agree."""
        a, b = self.get_int(first), self.get_int(second)
        if a != b:
            raise ConfigError(f"{WHERE}.{second}", b, f"must equal {first}={a}: TransformerSpec has one "
                              "value for encoder and decoder")
        return a

    def aliases_agree(self, aliases: Mapping[str, str]) -> None:
        """transformers reads some generic keys as another name (BartConfig.attribute_map:
        num_hidden_layers -> encoder_layers) and the generic one wins when both are present: refuse a config
        where they disagree."""
        for alias, key in aliases.items():
            if self.config.get(alias) is not None and self.config.get(key) is not None:
                a, b = self.get_int(key), self.get_int(alias)
                if a != b:
                    raise ConfigError(f"{WHERE}.{alias}", b, f"must equal {key}={a} (transformers reads "
                                      f"{alias} as {key}); edit both or remove {alias}")


_LAYER_TYPES = ("sliding_attention", "full_attention")


def full_attention_interval(r: ConfigReader, num_layers: int, default: int) -> int:
    """The k of "every k-th layer attends to the whole sequence, the others to a window" from ``layer_types``
    (Gemma2Config, Gemma3TextConfig, GptOssConfig: full iff (i + 1) % k == 0), or ``default`` when the key is
    absent (the pattern those config classes build). 0: every layer is windowed. A list of another shape is
    refused: TransformerSpec describes interleaving by one interval."""
    types = r.config.get("layer_types")
    if types is None:
        return default
    if not isinstance(types, list) or len(types) != num_layers or any(t not in _LAYER_TYPES for t in types):
        raise ConfigError(f"{WHERE}.layer_types", types, f"must list {num_layers} (num_hidden_layers) of "
                          + " / ".join(_LAYER_TYPES))
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    k = full[0] + 1 if full else 0
    if full != [i for i in range(num_layers) if k and (i + 1) % k == 0]:
        raise ConfigError(f"{WHERE}.layer_types", types, "must put full_attention on every k-th layer "
                          "(layers k-1, 2k-1, ...) and sliding_attention on the others")
    return k


def llama_fields(r: ConfigReader, *, tied_default: bool = False,
                 bias_keys: tuple[str, ...] = ("attention_bias", "mlp_bias")) -> dict[str, Any]:
    """LlamaConfig (and Mistral, Mixtral, Qwen2, Gemma): pre-RMSNorm, rotary, SwiGLU, GQA.

    LlamaConfig: ``attention_bias`` (q, k, v, o biases) and ``mlp_bias`` (gate, up, down) default false;
    TransformerSpec has one ``linear_bias`` for both, so it is set when either is (no public Llama sets one).
    """
    heads = r.get_int("num_attention_heads")
    return dict(
        num_layers=r.get_int("num_hidden_layers"),
        hidden_size=r.get_int("hidden_size"),
        num_heads=heads,
        num_kv_heads=r.get_int("num_key_value_heads", default=heads),  # absent: MHA (LlamaConfig)
        head_dim=r.get_optional_dim("head_dim"),  # absent or null: hidden_size // heads
        ffn_hidden_size=r.get_int("intermediate_size"),
        vocab_size=r.get_int("vocab_size"),
        glu=True,  # gate_proj, up_proj, down_proj (LlamaMLP)
        activation=r.get_activation("hidden_activation", "hidden_act", default="silu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=tied_default),
        max_position_embeddings=0,  # rotary: max_position_embeddings is a context length, not a table
        linear_bias=any(r.get_bool(k, default=False) for k in bias_keys),
        norm="rmsnorm",
        # LlamaAttention passes attention_dropout to its attention kernel; the decoder layer has no residual
        # dropout (hidden_dropout 0)
        attention_dropout=r.get_probability("attention_dropout", default=0.0),
    )


def attention_bias_fields(r: ConfigReader, *, tied_default: bool = False) -> dict[str, Any]:
    """Llama fields where ``attention_bias`` puts biases on q, k, v and o only (Qwen3, Gemma 2/3, OLMo 2,
    OLMoE attention classes) and the MLP has none."""
    spec = llama_fields(r, tied_default=tied_default, bias_keys=())
    spec.update(attention_bias=r.get_bool("attention_bias", default=False))
    return spec


def linear_biases(r: ConfigReader) -> dict[str, bool]:
    """NemotronConfig / NemotronHConfig ``attention_bias`` and ``mlp_bias`` (both false in every released
    model). TransformerSpec has attention-only biases and biases everywhere, not MLP-only ones."""
    attention, mlp = r.get_bool("attention_bias", default=False), r.get_bool("mlp_bias", default=False)
    if mlp and not attention:
        raise ConfigError(f"{WHERE}.mlp_bias", True, "is supported only together with attention_bias")
    return dict(attention_bias=attention, linear_bias=mlp)
