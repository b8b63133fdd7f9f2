"""Hugging Face config.json -> TransformerSpec.

The fixtures in tests/data/hf/ are the public config.json files of each model (label maps and
task_specific_params trimmed). Three kinds of check:
1. each loaded config's parameter count against the published figure (paper or model card, cited);
2. the count against the reference implementation: ``transformers`` builds the same model on the meta device
   (no memory, no weights, no network) and ``spec.num_params()`` must equal ``sum(p.numel())`` exactly, or
   differ by a named, computed amount for the few parameters TransformerSpec does not model;
3. bad input: unknown model_type, missing or malformed keys, malformed JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.model.hf import FAMILIES, spec_from_hf_config
from greentrain.model.load import load_model, load_preset
from greentrain.model.spec import TransformerSpec

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"


def _config(name: str) -> dict[str, Any]:
    return json.loads((HF_DIR / f"{name}.json").read_text())


# ---- 1. published counts -----------------------------------------------------------------------------------
# fixture -> (published parameter count, relative tolerance, where it is published)
PUBLISHED: dict[str, tuple[float, float, str]] = {
    "llama3-8b": (8.03e9, 0.005, "meta-llama/Meta-Llama-3-8B model page: 8.03B"),
    "llama3-70b": (70e9, 0.01, "Dubey et al. 2024, Table 3: 70B"),
    "llama3.1-405b": (405e9, 0.01, "Dubey et al. 2024, Table 3: 405B"),
    "llama3.2-1b": (1.23e9, 0.01, "Llama 3.2 model card: 1.23B"),
    "mistral-7b": (7.24e9, 0.005, "mistralai/Mistral-7B-v0.1 model page: 7.24B"),
    "mixtral-8x7b": (47e9, 0.02, "Jiang et al. 2024, §1: 47B (rounded to whole billions)"),
    "gpt2": (124e6, 0.01, "openai-community/gpt2 model card: 124M"),
    "gpt2-xl": (1.5e9, 0.04, "openai-community/gpt2-xl model card: 1.5B (rounded to 0.1B)"),
    "gpt-neox-20b": (20_554_567_680, 1e-9, "EleutherAI/gpt-neox-20b model card: n_parameters 20554567680"),
    "opt-1.3b": (1.3e9, 0.02, "Zhang et al. 2022, Table 1: 1.3B"),
    "bloom": (176_247_271_424, 1e-6, "bigscience/bloom model card: 176,247,271,424"),
    "bloom-560m": (559_214_592, 1e-5, "bigscience/bloom-560m model card: 559,214,592"),
    "bart-large": (400e6, 0.02, "fairseq BART README: bart.large 400M (rounded to 100M)"),
    # Raffel et al. round T5-Large to 770M, 4.3 % above the exact count (see presets/t5-large.yaml).
    "t5-large": (770e6, 0.05, "Raffel et al. 2020, §3.7: 770M"),
    "flan-t5-large": (780e6, 0.01, "Chung et al. 2022, Table 2: Flan-T5-Large 780M"),
    "pegasus-large": (568e6, 0.01, "Zhang et al. 2020, §6: 568M"),
    "qwen2-7b": (7.62e9, 0.005, "Qwen/Qwen2-7B model page: 7.62B"),
    "gemma-7b": (8_537_680_896, 1e-9,
                 "Gemma Team 2024, Table 2: 786,432,000 embedding + 7,751,248,896 non-embedding"),
    # 2024-2026 families (model/hf_llama.py, hf_moe.py, hf_ssm.py); the fixtures carry the shape keys of each
    # public config.json.
    "qwen3-8b": (8.2e9, 0.005, "Qwen/Qwen3-8B model card: 8.2B"),
    "qwen3-30b-a3b": (30.5e9, 0.005, "Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    "qwen3-235b-a22b": (235e9, 0.005, "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated"),
    "gemma2-9b": (9_241_705_984, 1e-9, "Gemma Team 2024b (arXiv 2408.00118), Table 2: 9B non-embedding "
                  "8,324,201,984 + embedding 917,504,000 (256,000 x 3,584, the released vocabulary)"),
    # Gemma 3 report, Table 1: 27B = 417M vision encoder + 1,416M embedding + 25,600M non-embedding; the
    # spec is the language model (the vision tower is the difference checked against transformers below).
    "gemma3-27b": (1_416e6 + 25_600e6, 0.005, "Gemma Team 2025 (arXiv 2503.19786), Table 1"),
    "gemma3-1b": (302e6 + 698e6, 0.005, "Gemma Team 2025, Table 1: 1B = 302M embedding + 698M non-embedding"),
    "olmo2-32b": (32.2e9, 0.005, "allenai/OLMo-2-0325-32B model card: 32B (32.2B)"),
    "phi3-mini-4k": (3.8e9, 0.01, "Abdin et al. 2024 (arXiv 2404.14219), §2: phi-3-mini 3.8B"),
    "nemotron-4-340b": (9.4e9 + 331.6e9, 0.001, "NVIDIA 2024 (arXiv 2406.11704), §2.2: 9.4B embedding + "
                        "331.6B non-embedding"),
    "deepseek-v3": (671e9, 0.001, "DeepSeek-AI 2024 (arXiv 2412.19437), abstract: 671B total, 37B activated"),
    "gpt-oss-120b": (116.83e9, 0.001, "OpenAI 2025, gpt-oss model card, Table 1: 116.83B total"),
    "gpt-oss-20b": (20.91e9, 0.001, "OpenAI 2025, gpt-oss model card, Table 1: 20.91B total"),
    "mamba-codestral-7b": (7_285_403_648, 1e-9, "mistralai/Mamba-Codestral-7B-v0.1 model card: 7,285,403,648"),
    "jamba-1.5-large": (398e9, 0.005, "AI21 2024 (arXiv 2408.12570), §2: 398B total, 94B active"),
    "mixtral-8x22b": (141e9, 0.005, "Mistral AI, Mixtral 8x22B announcement (2024-04-17): 141B total, 39B active"),
    "deepseek-v2-lite": (15.7e9, 0.005, "DeepSeek-AI 2024 (arXiv 2405.04434), App. B: 15.7B total, 2.4B active"),
    "olmoe-1b-7b": (6.9e9, 0.005, "Muennighoff et al. 2024 (arXiv 2409.02060), §1: 6.9B total, 1.3B active"),
    # "2.8B" is rounded to 0.1B (half a unit: 1.8 %)
    "mamba-2.8b": (2.8e9, 0.015, "Gu & Dao 2023 (arXiv 2312.00752), Table 3: Mamba-2.8B"),
    "qwen1.5-moe-a2.7b": (14.3e9, 0.005, "Qwen/Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B activated"),
    # "106B" (whole billions); transformers does not build the MTP layer the checkpoint also holds
    "glm-4.5-air": (106e9, 0.01, "zai-org/GLM-4.5-Air model card: 106B total, 12B active"),
}


def test_every_fixture_has_a_published_count() -> None:
    fixtures = {p.stem for p in HF_DIR.glob("*.json")} - {"opt-350m"}  # opt-350m is refused, see below
    assert fixtures == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_loaded_config_matches_published_count(name: str) -> None:
    published, tol, where = PUBLISHED[name]
    spec = load_model(str(HF_DIR / f"{name}.json"))
    assert spec.name == name
    assert spec.num_params() == pytest.approx(published, rel=tol), f"{spec.num_params():,} vs {where}"


def test_mixtral_active_params() -> None:
    # Jiang et al. 2024, §1: 13B active parameters per token (rounded to whole billions).
    assert load_model(str(HF_DIR / "mixtral-8x7b.json")).num_active_params() == pytest.approx(13e9, rel=0.02)


# ---- 2. exact comparison with transformers -----------------------------------------------------------------
# Differences (transformers minus spec) for parameters TransformerSpec does not model, each with its formula.
def _no_difference(cfg: dict[str, Any], spec: TransformerSpec, model: Any) -> int:
    return 0


def _bloom_embedding_layernorm(cfg: dict[str, Any], spec: TransformerSpec, model: Any) -> int:
    return 2 * spec.hidden_size  # BloomModel.word_embeddings_layernorm (weight + bias)


def _t5(cfg: dict[str, Any], spec: TransformerSpec, model: Any) -> int:
    # T5Attention.relative_attention_bias: buckets x heads in the first block of the encoder and the decoder.
    diff = 2 * cfg.get("relative_attention_num_buckets", 32) * spec.num_heads
    # transformers >= 5 forces T5Config.tie_word_embeddings = True ("we tie weights always"), even for
    # T5 v1.1 / Flan-T5, whose released checkpoints have a separate lm_head (tie_word_embeddings: false).
    if not spec.tied_embeddings and model.lm_head.weight is model.get_input_embeddings().weight:
        diff -= spec.vocab_size * spec.hidden_size
    return diff


def _pegasus(cfg: dict[str, Any], spec: TransformerSpec, model: Any) -> int:
    # PegasusSinusoidalPositionalEmbedding: fixed sinusoids kept as weights (requires_grad False), per stack.
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert frozen == 2 * cfg["max_position_embeddings"] * spec.hidden_size
    return frozen


def _gemma3_vision(cfg: dict[str, Any], spec: TransformerSpec, model: Any) -> int:
    # Gemma3ForConditionalGeneration: the SigLIP vision tower and the projector are outside the spec, which
    # describes the language model (its parameters must equal the spec's exactly).
    language = sum(p.numel() for n, p in model.named_parameters() if ".language_model." in n)
    assert language == spec.num_params()
    return _hf_count(model) - language


EXACT: dict[str, Callable[[dict[str, Any], TransformerSpec, Any], int]] = {
    "llama3-8b": _no_difference, "llama3-70b": _no_difference, "llama3.1-405b": _no_difference,
    "llama3.2-1b": _no_difference, "mistral-7b": _no_difference, "mixtral-8x7b": _no_difference,
    "gpt2": _no_difference, "gpt2-xl": _no_difference, "gpt-neox-20b": _no_difference,
    "opt-1.3b": _no_difference, "bart-large": _no_difference,
    "bloom": _bloom_embedding_layernorm, "bloom-560m": _bloom_embedding_layernorm,
    "t5-large": _t5, "flan-t5-large": _t5, "pegasus-large": _pegasus, "qwen2-7b": _no_difference,
    "gemma-7b": _no_difference,
    "qwen3-8b": _no_difference, "qwen3-30b-a3b": _no_difference, "qwen3-235b-a22b": _no_difference,
    "gemma2-9b": _no_difference, "gemma3-1b": _no_difference, "gemma3-27b": _gemma3_vision,
    "olmo2-32b": _no_difference, "phi3-mini-4k": _no_difference, "nemotron-4-340b": _no_difference,
    "deepseek-v3": _no_difference, "gpt-oss-120b": _no_difference, "gpt-oss-20b": _no_difference,
    "mamba-codestral-7b": _no_difference, "jamba-1.5-large": _no_difference, "mixtral-8x22b": _no_difference,
    "deepseek-v2-lite": _no_difference, "olmoe-1b-7b": _no_difference, "mamba-2.8b": _no_difference,
    "qwen1.5-moe-a2.7b": _no_difference, "glm-4.5-air": _no_difference,
}


def _hf_model(cfg: dict[str, Any], device: str = "meta") -> Any:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if cfg.get("model_type") not in transformers.CONFIG_MAPPING:  # pyproject allows transformers >= 4.40
        pytest.skip(f"transformers {transformers.__version__} has no model_type {cfg.get('model_type')!r}")
    config = transformers.AutoConfig.for_model(**cfg)
    auto = (transformers.AutoModelForSeq2SeqLM if config.is_encoder_decoder
            else transformers.AutoModelForCausalLM)
    with torch.device(device):
        return auto.from_config(config)


def _hf_count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(EXACT))
def test_param_count_equals_transformers(name: str) -> None:
    cfg = _config(name)
    spec = spec_from_hf_config(cfg, name)
    model = _hf_model(cfg)
    assert _hf_count(model) - spec.num_params() == EXACT[name](cfg, spec, model)


# The GPT-style presets have no public config.json; the same shapes expressed as GPT2Config / OPTConfig.
PRESET_AS_HF = {
    "gpt3-175b": {"model_type": "gpt2", "n_layer": 96, "n_embd": 12288, "n_head": 96, "vocab_size": 51200,
                  "n_positions": 2048},
    "megatron-22b": {"model_type": "gpt2", "n_layer": 48, "n_embd": 6144, "n_head": 64, "vocab_size": 51200,
                     "n_positions": 2048},
    "megatron-530b": {"model_type": "gpt2", "n_layer": 105, "n_embd": 20480, "n_head": 128,
                      "vocab_size": 51200, "n_positions": 2048},
    "megatron-1t": {"model_type": "gpt2", "n_layer": 128, "n_embd": 25600, "n_head": 160, "vocab_size": 51200,
                    "n_positions": 2048},
    "opt-175b": {"model_type": "opt", "num_hidden_layers": 96, "hidden_size": 12288,
                 "num_attention_heads": 96, "ffn_dim": 49152, "vocab_size": 50272,
                 "max_position_embeddings": 2048, "word_embed_proj_dim": 12288},
}


@pytest.mark.parametrize("name", sorted(PRESET_AS_HF))
def test_gpt_style_presets_equal_transformers(name: str) -> None:
    cfg = PRESET_AS_HF[name]
    preset = load_preset(name)
    assert _hf_count(_hf_model(cfg)) == preset.num_params()
    loaded = spec_from_hf_config(cfg, name)
    assert loaded.num_params() == preset.num_params()


# Shrunken configs built for real on the CPU (few layers, small widths, still GQA / MoE / GLU where the family
# has it): the mapping must hold for shapes other than the released ones.
TINY = {
    "llama3-8b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 160,
                  "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000},
    "mixtral-8x7b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4,
                     "vocab_size": 500},
    "gpt-neox-20b": {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 256,
                     "num_attention_heads": 4, "vocab_size": 512},
    "flan-t5-large": {"num_layers": 2, "num_decoder_layers": 3, "d_model": 64, "d_kv": 8, "num_heads": 4,
                      "d_ff": 96, "vocab_size": 300},
    "bart-large": {"encoder_layers": 2, "decoder_layers": 1, "d_model": 64, "encoder_ffn_dim": 128,
                   "decoder_ffn_dim": 128, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
                   "vocab_size": 400, "max_position_embeddings": 128, "num_hidden_layers": 2},
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_configs_equal_transformers_on_cpu(name: str) -> None:
    cfg = {**_config(name), **TINY[name]}
    spec = spec_from_hf_config(cfg, f"tiny-{name}")
    model = _hf_model(cfg, device="cpu")
    assert _hf_count(model) - spec.num_params() == EXACT[name](cfg, spec, model)


# ---- mapping details ---------------------------------------------------------------------------------------
def test_family_specific_fields() -> None:
    neox = spec_from_hf_config(_config("gpt-neox-20b"), "neox")
    assert neox.parallel_block and not neox.tied_embeddings and neox.max_position_embeddings == 0
    opt = spec_from_hf_config(_config("opt-1.3b"), "opt")
    assert opt.max_position_embeddings == 2050 and opt.activation == "relu" and opt.linear_bias
    t5 = spec_from_hf_config(_config("flan-t5-large"), "flan")
    assert (t5.glu, t5.tied_embeddings, t5.head_dim, t5.norm) == (True, False, 64, "rmsnorm")
    assert (t5.arch, t5.num_encoder_layers, t5.num_layers) == ("encoder-decoder", 24, 24)
    assert spec_from_hf_config(_config("t5-large"), "t5").glu is False
    llama1b = spec_from_hf_config(_config("llama3.2-1b"), "1b")
    assert llama1b.tied_embeddings and llama1b.head_dim == 64 and llama1b.num_kv_heads == 8
    assert spec_from_hf_config(_config("pegasus-large"), "p").max_position_embeddings == 0
    assert spec_from_hf_config(_config("bart-large"), "b").max_position_embeddings == 1026
    assert spec_from_hf_config(_config("gemma-7b"), "g").q_width == 4096  # 16 heads x 256, wider than d=3072


def test_architectures_alone_selects_the_family() -> None:
    cfg = _config("mixtral-8x7b")
    del cfg["model_type"]
    assert spec_from_hf_config(cfg, "m") == spec_from_hf_config(_config("mixtral-8x7b"), "m")
    neox = _config("gpt-neox-20b")
    del neox["model_type"]
    assert spec_from_hf_config(neox, "n").family == "gpt_neox"


def test_directory_with_config_json_is_named_after_the_directory(tmp_path: Path) -> None:
    (tmp_path / "my-llama").mkdir()
    (tmp_path / "my-llama" / "config.json").write_text(json.dumps(_config("llama3-8b")))
    spec = load_model(str(tmp_path / "my-llama"))
    assert spec.name == "my-llama" and spec.num_params() == load_preset("llama3-8b").num_params()


# Families without a public config.json fixture here, checked on transformers' default and tiny configs in
# test_model_hf_families_2024.py instead (Nemotron-H: its released layer patterns are long strings not transcribed).
NO_FIXTURE = {"nemotron_h"}


def test_every_family_has_a_fixture() -> None:
    assert {_config(p.stem)["model_type"] for p in HF_DIR.glob("*.json")} == set(FAMILIES) - NO_FIXTURE


# ---- 3. bad input ------------------------------------------------------------------------------------------
def test_unknown_model_type_suggests_a_family() -> None:
    with pytest.raises(ConfigError, match=r"unsupported model_type; did you mean llama") as e:
        spec_from_hf_config({**_config("llama3-8b"), "model_type": "lama"}, "x")
    assert e.value.field == "config.json.model_type"


def test_unknown_architecture_without_model_type() -> None:
    cfg = {"architectures": ["FalconForCausalLM"], "hidden_size": 64}
    with pytest.raises(ConfigError, match=r"unsupported architecture") as e:
        spec_from_hf_config(cfg, "x")
    assert e.value.field == "config.json.architectures"
    with pytest.raises(ConfigError, match=r"is required") as e:
        spec_from_hf_config({"hidden_size": 64}, "x")
    assert e.value.field == "config.json.model_type"


@pytest.mark.parametrize(("name", "key"), [("llama3-8b", "num_hidden_layers"), ("t5-large", "d_ff"),
                                           ("bart-large", "encoder_layers"), ("opt-1.3b", "ffn_dim")])
def test_missing_key_is_named(name: str, key: str) -> None:
    cfg = _config(name)
    del cfg[key]
    with pytest.raises(ConfigError, match=r"is required for model_type") as e:
        spec_from_hf_config(cfg, name)
    assert e.value.field == f"config.json.{key}"


def test_null_key_counts_as_missing() -> None:
    with pytest.raises(ConfigError) as e:
        spec_from_hf_config({**_config("mistral-7b"), "hidden_size": None}, "m")
    assert e.value.field == "config.json.hidden_size"


@pytest.mark.parametrize(("key", "value"), [("hidden_size", "big"), ("hidden_size", 0), ("vocab_size", 1.5),
                                            ("tie_word_embeddings", "maybe"), ("hidden_act", 3)])
def test_bad_value_is_named(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as e:
        spec_from_hf_config({**_config("llama3-8b"), key: value}, "x")
    assert e.value.field == f"config.json.{key}"


def test_shape_that_does_not_divide_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"must divide num_heads"):
        spec_from_hf_config({**_config("llama3-8b"), "num_key_value_heads": 5}, "x")


def test_opt_embedding_projection_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"must equal hidden_size=1024") as e:
        load_model(str(HF_DIR / "opt-350m.json"))
    assert e.value.field == "config.json.word_embed_proj_dim"


def test_encoder_decoder_widths_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"must equal encoder_ffn_dim=4096") as e:
        spec_from_hf_config({**_config("bart-large"), "decoder_ffn_dim": 2048}, "x")
    assert e.value.field == "config.json.decoder_ffn_dim"


def test_generic_alias_must_agree_with_the_family_key() -> None:
    # BartConfig.attribute_map reads num_hidden_layers as encoder_layers: where they differ it is ambiguous.
    with pytest.raises(ConfigError, match=r"must equal encoder_layers=2") as e:
        spec_from_hf_config({**_config("bart-large"), "encoder_layers": 2}, "x")
    assert e.value.field == "config.json.num_hidden_layers"


def test_malformed_json_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "hidden_size": 4096,,}')
    with pytest.raises(ConfigError, match=r"malformed JSON at line 1"):
        load_model(str(path))


def test_json_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"top level must be a mapping"):
        load_model(str(path))
    with pytest.raises(ConfigError, match=r"top level must be a mapping"):
        spec_from_hf_config([1, 2], "x")  # type: ignore[arg-type]
