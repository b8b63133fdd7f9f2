"""Model presets: every one loads, and its parameter count matches the published figure.

Exactness against the reference implementation (transformers) is checked in test_model_hf.py; here each preset
is held to the number its paper or model card states, with a tolerance that reflects how that number was
rounded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from greentrain.errors import ConfigError
from greentrain.model.hf import spec_from_hf_config
from greentrain.model.load import load_model, load_preset, preset_names
from greentrain.model.spec import TransformerSpec

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"

# preset -> (published parameter count, relative tolerance, where it is published)
PUBLISHED: dict[str, tuple[float, float, str]] = {
    "gpt3-175b": (175.0e9, 0.01, "Brown et al. 2020, Table 2.1: 175.0B"),
    "megatron-22b": (22e9, 0.01, "Korthikanti et al. 2022, Table 3: 22B"),
    "megatron-530b": (530e9, 0.01, "Korthikanti et al. 2022, Table 3: 530B"),
    "megatron-1t": (1e12, 0.01, "Korthikanti et al. 2022, Table 3: 1T"),
    "llama3-8b": (8e9, 0.01, "Dubey et al. 2024, Table 3: 8B"),
    "llama3-70b": (70e9, 0.01, "Dubey et al. 2024, Table 3: 70B"),
    "llama3-405b": (405e9, 0.01, "Dubey et al. 2024, Table 3: 405B"),
    "llama3.2-1b": (1.23e9, 0.01, "Llama 3.2 model card: 1.23B"),
    # The model card gives the exact count; the spec omits only the 2h embedding LayerNorm (see below).
    "bloom-176b": (176_247_271_424, 1e-6, "bigscience/bloom model card: 176,247,271,424"),
    "opt-175b": (175e9, 0.01, "Zhang et al. 2022, Table 1: 175B"),
    # "47B" is rounded to whole billions (half a unit = 1.1 %).
    "mixtral-8x7b": (47e9, 0.02, "Jiang et al. 2024, §1: 47B total"),
    # fairseq lists bart.large as "400M" (rounded to 100M; the exact count is 406.3M, 1.6 % more).
    "bart-large": (400e6, 0.02, "fairseq BART README: 400M"),
    # The paper's "770M" is 4.3 % above the exact count (737.7M, which transformers reproduces); 770.6M is
    # what the same shape gives with an untied output layer. Tolerance widened to 5 % for that reason.
    "t5-large": (770e6, 0.05, "Raffel et al. 2020, §3.7: 770M"),
    "pegasus-large": (568e6, 0.01, "Zhang et al. 2020, §6: 568M"),
    # 2024-2026 models: each figure is the one its report or model card prints (see the preset's comments).
    "deepseek-v3": (671e9, 0.001, "DeepSeek-AI 2024, arXiv 2412.19437, abstract: 671B"),
    "qwen3-235b-a22b": (235e9, 0.005, "Qwen/Qwen3-235B-A22B model card: 235B"),
    "qwen3-30b-a3b": (30.5e9, 0.005, "Qwen/Qwen3-30B-A3B model card: 30.5B"),
    "qwen3-8b": (8.2e9, 0.005, "Qwen/Qwen3-8B model card: 8.2B"),
    "gpt-oss-120b": (116.83e9, 0.001, "gpt-oss model card, Table 1: 116.83B"),
    "gpt-oss-20b": (20.91e9, 0.001, "gpt-oss model card, Table 1: 20.91B"),
    "mixtral-8x22b": (141e9, 0.005, "Mistral AI 2024-04-17: 141B"),
    "nemotron-4-340b": (341.0e9, 0.001, "NVIDIA 2024, arXiv 2406.11704, §2.2: 9.4B + 331.6B"),
    "gemma3-27b": (27.016e9, 0.005, "Gemma Team 2025, Table 1: 1,416M embedding + 25,600M non-embedding"),
    "olmo2-32b": (32.2e9, 0.005, "allenai/OLMo-2-0325-32B model card: 32B"),
    "jamba-1.5-large": (398e9, 0.005, "AI21 2024, arXiv 2408.12570, §2: 398B"),
}

# preset -> (published active parameters per token, tolerance, counted with the embedding lookup?, source)
PUBLISHED_ACTIVE: dict[str, tuple[float, float, bool, str]] = {
    "mixtral-8x7b": (13e9, 0.02, True, "Jiang et al. 2024, §1: 13B (whole billions)"),
    "mixtral-8x22b": (39e9, 0.005, True, "Mistral AI 2024-04-17: 39B"),
    "deepseek-v3": (37e9, 0.015, False, "DeepSeek-AI 2024, abstract: 37B (whole billions)"),
    "qwen3-235b-a22b": (22e9, 0.01, True, "Qwen/Qwen3-235B-A22B model card: 22B"),
    "qwen3-30b-a3b": (3.3e9, 0.02, True, "Qwen/Qwen3-30B-A3B model card: 3.3B"),
    "gpt-oss-120b": (5.13e9, 0.002, False, "gpt-oss model card, Table 1: 5.13B"),
    "gpt-oss-20b": (3.61e9, 0.002, False, "gpt-oss model card, Table 1: 3.61B"),
    "jamba-1.5-large": (94e9, 0.005, True, "AI21 2024, §2: 94B"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_ACTIVE))
def test_preset_active_params_match_published(name: str) -> None:
    published, tol, with_embedding, where = PUBLISHED_ACTIVE[name]
    spec = load_preset(name)
    active = spec.num_active_params() - (0 if with_embedding else spec.vocab_size * spec.hidden_size)
    assert active == pytest.approx(published, rel=tol), f"{name}: {active:,} vs {where}"


def test_every_required_preset_exists() -> None:
    assert set(PUBLISHED) <= set(preset_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_param_count_matches_published(name: str) -> None:
    published, tol, where = PUBLISHED[name]
    n = load_preset(name).num_params()
    assert n == pytest.approx(published, rel=tol), f"{name}: {n:,} vs {where}"


def test_mixtral_active_params_match_published() -> None:
    # Jiang et al. 2024, §1: "13B active parameters" per token (top-2 of 8 experts), rounded to billions.
    spec = load_preset("mixtral-8x7b")
    assert spec.num_active_params() == pytest.approx(13e9, rel=0.02)
    assert spec.num_active_params() < spec.num_params() / 3


def test_bloom_differs_by_the_embedding_layernorm_only() -> None:
    # BloomModel.word_embeddings_layernorm: weight + bias of width 14336, not modelled by TransformerSpec.
    assert 176_247_271_424 - load_preset("bloom-176b").num_params() == 2 * 14336


# Presets whose shape is a public config.json in tests/data/hf: the preset and the loaded config must agree.
PRESET_FROM_CONFIG = {
    "llama3-8b": "llama3-8b.json",
    "llama3-70b": "llama3-70b.json",
    "llama3-405b": "llama3.1-405b.json",
    "llama3.2-1b": "llama3.2-1b.json",
    "mixtral-8x7b": "mixtral-8x7b.json",
    "bloom-176b": "bloom.json",
    "bart-large": "bart-large.json",
    "t5-large": "t5-large.json",
    "pegasus-large": "pegasus-large.json",
    "deepseek-v3": "deepseek-v3.json",
    "qwen3-235b-a22b": "qwen3-235b-a22b.json",
    "qwen3-30b-a3b": "qwen3-30b-a3b.json",
    "qwen3-8b": "qwen3-8b.json",
    "gpt-oss-120b": "gpt-oss-120b.json",
    "gpt-oss-20b": "gpt-oss-20b.json",
    "mixtral-8x22b": "mixtral-8x22b.json",
    "nemotron-4-340b": "nemotron-4-340b.json",
    "gemma3-27b": "gemma3-27b.json",
    "olmo2-32b": "olmo2-32b.json",
    "jamba-1.5-large": "jamba-1.5-large.json",
}
_IGNORED = {"name", "source"}


@pytest.mark.parametrize("name", sorted(PRESET_FROM_CONFIG))
def test_preset_agrees_with_its_config_json(name: str) -> None:
    preset = load_preset(name).to_dict()
    loaded = load_model(str(HF_DIR / PRESET_FROM_CONFIG[name])).to_dict()
    differing = {k: (preset[k], loaded[k]) for k in preset if k not in _IGNORED and preset[k] != loaded[k]}
    assert differing == {}


def test_preset_names_are_case_insensitive() -> None:
    assert load_model("Llama3-70B") == load_preset("llama3-70b")


def test_unknown_preset_suggests_a_close_name() -> None:
    with pytest.raises(ConfigError, match=r"did you mean llama3-70b") as e:
        load_model("llama3-71b")
    assert e.value.field == "model"


def test_unknown_yaml_key_is_rejected(tmp_path: Path) -> None:
    data = load_preset("llama3-8b").to_dict()
    data["num_layer"] = 32
    path = tmp_path / "my-model.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"unknown key; did you mean num_layers") as e:
        load_model(str(path))
    assert e.value.field == "model(my-model.yaml).num_layer"


def test_malformed_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("num_layers: 32\nhidden_size: [4096\n")
    with pytest.raises(ConfigError, match=r"malformed YAML"):
        load_model(str(path))


def test_yaml_model_round_trips(tmp_path: Path) -> None:
    spec = load_preset("t5-large")
    path = tmp_path / "t5.yaml"
    path.write_text(yaml.safe_dump(spec.to_dict()))
    assert load_model(str(path)) == spec
    assert TransformerSpec.from_dict(spec.to_dict()) == spec


def test_hf_loader_matches_preset_for_mixtral_moe_fields() -> None:
    import json

    spec = spec_from_hf_config(json.loads((HF_DIR / "mixtral-8x7b.json").read_text()), "mixtral")
    assert (spec.num_experts, spec.top_k, spec.expert_ffn_hidden_size, spec.num_kv_heads) == (8, 2, 14336, 8)
