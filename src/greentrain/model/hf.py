"""Hugging Face ``config.json`` -> TransformerSpec: a pure mapping of keys, no ``transformers``, no network.

Each ``model_type`` is one ModelFamily record (model/family.py) in the registry (model/families.py): its reader
reads the keys the family's ``*Config`` class defines, with the defaults that class uses when a key is absent
(cited as ``transformers`` class names). The readers are grouped by architecture: model/hf_llama.py,
hf_gpt.py, hf_encdec.py, hf_moe.py and hf_ssm.py.

Unknown ``model_type`` -> ConfigError naming ``config.json.model_type`` with a did-you-mean; a missing or bad
key -> ConfigError naming ``config.json.<key>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from greentrain.errors import ConfigError, did_you_mean
from greentrain.model.families import FAMILIES, model_type_of_architecture
from greentrain.model.hf_reader import WHERE, ConfigReader
from greentrain.model.spec import TransformerSpec

__all__ = ["FAMILIES", "ROTARY_KEYS", "spec_from_hf_config", "yarn_attention_factor"]


def _model_type(config: Mapping[str, Any]) -> str:
    if config.get("model_type") is not None:
        mt = config["model_type"]
        if not isinstance(mt, str) or mt.lower() not in FAMILIES:
            shown = mt if isinstance(mt, str) else str(mt)
            raise ConfigError(f"{WHERE}.model_type", mt,
                              "unsupported model_type" + did_you_mean(shown, FAMILIES))
        return mt.lower()
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConfigError(f"{WHERE}.model_type", None,
                          "is required (or an architectures list naming the model class)")
    found = model_type_of_architecture(archs[0])
    if found is not None:
        return found
    raise ConfigError(f"{WHERE}.architectures", archs, "unsupported architecture; supported model_type: "
                      + ", ".join(sorted(FAMILIES)))


# Config keys of a rotary base or scaling: a family whose record is not rotary is rotary when its config names
# one. ALiBi (BLOOM), learned tables (GPT-2, OPT, BART), relative biases (T5), sinusoids (Pegasus) and
# position-free attention (Jamba, Nemotron-H) are not rotary.
ROTARY_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base", "rotary_pct",
               "partial_rotary_factor")


def yarn_attention_factor(config: Mapping[str, Any]) -> float:
    """The factor YaRN scales cos and sin by (Peng et al. 2023, §3.4: sqrt(1/t) = 0.1 ln s + 1), as transformers
    (modeling_rope_utils.py _compute_yarn_parameters) and Megatron Core (yarn_rotary_pos_embedding.py
    _yarn_get_concentration_factor) derive it from ``rope_scaling`` / ``rope_parameters``: ``attention_factor``
    when given, else get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) with both given (DeepSeek:
    1.0), else get_mscale(factor) (gpt-oss: factor 32 -> 1.347); without ``factor``, max_position_embeddings /
    original_max_position_embeddings. Per-layer-type parameters: the full-attention layers'. 1.0 for any other
    rope type."""
    key = "rope_parameters" if config.get("rope_parameters") else "rope_scaling"
    rope = config.get(key)
    if isinstance(rope, Mapping) and isinstance(rope.get("full_attention"), Mapping):
        rope = rope["full_attention"]  # transformers 5: one dict per layer type
    if not isinstance(rope, Mapping) or (rope.get("rope_type") or rope.get("type")) != "yarn":
        return 1.0
    given = rope.get("attention_factor")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int | float) or not 0 < given <= 10:
            raise ConfigError(f"{WHERE}.{key}.attention_factor", given, "must be a number in (0, 10]")
        return float(given)
    factor, longest, original = rope.get("factor"), config.get("max_position_embeddings"), \
        rope.get("original_max_position_embeddings")
    if factor is None and isinstance(longest, int | float) and isinstance(original, int | float) and original > 0:
        factor = longest / original
    if not isinstance(factor, int | float) or isinstance(factor, bool) or factor <= 1:
        return 1.0

    def get_mscale(scale: float, m: float = 1.0) -> float:
        return 0.1 * m * math.log(scale) + 1.0

    m, m_all = rope.get("mscale"), rope.get("mscale_all_dim")
    if isinstance(m, int | float) and isinstance(m_all, int | float) and m and m_all:
        return get_mscale(factor, m) / get_mscale(factor, m_all)
    return get_mscale(factor)


def spec_from_hf_config(config: Mapping[str, Any], name: str) -> TransformerSpec:
    """The TransformerSpec of a Hugging Face config.json (already parsed into a mapping)."""
    if not isinstance(config, Mapping):
        raise ConfigError(WHERE, type(config).__name__, "top level must be a mapping")
    mt = _model_type(config)
    family = FAMILIES[mt]
    fields = family.reader(ConfigReader(config, mt))
    origin = config.get("_name_or_path") or name
    archs = config.get("architectures")
    arch_note = f", {archs[0]}" if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    source = f"Hugging Face config.json of {origin} (model_type={mt}{arch_note})"
    fields.setdefault("rotary", family.rotary or any(k in config for k in ROTARY_KEYS))
    fields.setdefault("rope_mscale", yarn_attention_factor(config) if fields["rotary"] else 1.0)
    return TransformerSpec(name=name, family=mt, source=source, **fields)
