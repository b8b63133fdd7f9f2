"""YaRN's attention factor on cos and sin (TransformerSpec.rope_mscale), read from config.json as transformers and
Megatron Core derive it: gpt-oss's 1.347 is why Megatron Core runs its rope unfused (compose.model_efficiency)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.model.hf import yarn_attention_factor
from greentrain.model.load import load_model
from greentrain.model.spec import TransformerSpec

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"


def test_yarn_factor_as_transformers_and_megatron_derive_it() -> None:
    yarn = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0}
    assert yarn_attention_factor({"rope_scaling": yarn}) == pytest.approx(0.1 * math.log(32) + 1)  # gpt-oss
    assert yarn_attention_factor({"rope_parameters": yarn}) == pytest.approx(1.3466, abs=1e-4)  # transformers 5
    # DeepSeek-V3: mscale = mscale_all_dim, the two cancel (its softmax scale carries the factor instead)
    ds = {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}
    assert yarn_attention_factor({"rope_scaling": ds}) == 1.0
    assert yarn_attention_factor({"rope_scaling": {**yarn, "attention_factor": 1.2}}) == 1.2
    assert yarn_attention_factor({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}) == 1.0  # Llama 3.1
    assert yarn_attention_factor({"rope_scaling": None}) == 1.0 and yarn_attention_factor({}) == 1.0


def test_gpt_oss_reads_its_factor_and_the_preset_agrees() -> None:
    for name in ("gpt-oss-120b", "gpt-oss-20b"):
        assert load_model(str(HF_DIR / f"{name}.json")).rope_mscale == pytest.approx(1.34657, abs=1e-5)
        assert load_model(name).rope_mscale == load_model(str(HF_DIR / f"{name}.json")).rope_mscale
    assert load_model("llama3-8b").rope_mscale == 1.0 and load_model("deepseek-v3").rope_mscale == 1.0


@pytest.mark.parametrize("bad", [0.0, -1.0, 11.0, True])
def test_a_bad_factor_names_the_field(bad: float) -> None:
    fields = {**load_model("llama3-8b").to_dict(), "rope_mscale": bad, "name": "m"}
    with pytest.raises(ConfigError, match=r"must be a number in \(0, 10\]") as e:
        TransformerSpec(**fields)
    assert e.value.field == "model(m).rope_mscale"


def test_yarn_factor_edge_cases_as_transformers_reads_them() -> None:
    # no factor: the ratio of the context lengths (transformers _compute_yarn_parameters)
    ctx = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn", "factor": None,
                                                                "original_max_position_embeddings": 4096}}
    assert yarn_attention_factor(ctx) == pytest.approx(0.1 * math.log(32) + 1)
    per_type = {"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 8.0},
                                    "sliding_attention": {"rope_type": "default"}}}
    assert yarn_attention_factor(per_type) == pytest.approx(0.1 * math.log(8) + 1)
    with pytest.raises(ConfigError, match=r"must be a number in \(0, 10\]") as e:
        yarn_attention_factor({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "attention_factor": -1}})
    assert e.value.field == "config.json.rope_scaling.attention_factor"
