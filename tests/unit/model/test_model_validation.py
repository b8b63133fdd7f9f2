"""Model inputs that transformers refuses are refused here too: activations, T5 feed_forward_proj; the
learned-position limit (max_seq_len) and GPT-2's n_positions default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.model.hf import spec_from_hf_config
from greentrain.model.load import load_model
from greentrain.model.spec import ACTIVATIONS, TransformerSpec

HF_DIR = Path(__file__).resolve().parents[2] / "data" / "hf"


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_DIR / f"{name}.json").read_text())
    return data


def test_activations_are_the_transformers_set() -> None:
    act2cls = pytest.importorskip("transformers.activations").ACT2CLS
    assert set(ACTIVATIONS) == set(act2cls)


@pytest.mark.parametrize(("proj", "needle"), [
    ("weird", "feed_forward_proj='weird'"),
    ("gated-weird", "feed_forward_proj='gated-weird'"),
    ("foo-gelu", "feed_forward_proj='foo-gelu'"),
    ("gated-gelu-new", "feed_forward_proj='gated-gelu-new'"),
])
def test_t5_feed_forward_proj_must_be_act_or_gated_act(proj: str, needle: str) -> None:
    cfg = {**_config("t5-large"), "feed_forward_proj": proj}
    with pytest.raises(ConfigError, match="must be ACT or gated-ACT") as e:
        spec_from_hf_config(cfg, "t5")
    assert needle in str(e.value)


@pytest.mark.parametrize(("proj", "glu", "activation"), [
    ("relu", False, "relu"), ("gated-gelu", True, "gelu_new"), ("gated-silu", True, "silu"), ("gelu", False, "gelu"),
])
def test_t5_feed_forward_proj_accepted(proj: str, glu: bool, activation: str) -> None:
    spec = spec_from_hf_config({**_config("t5-large"), "feed_forward_proj": proj}, "t5")
    assert (spec.glu, spec.activation) == (glu, activation)


def test_hf_activation_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"config.json.hidden_act='sulu': unknown activation; did you mean"):
        spec_from_hf_config({**_config("llama3-8b"), "hidden_act": "sulu"}, "x")
    with pytest.raises(ConfigError, match=r"config.json.activation_function='banana'"):
        spec_from_hf_config({**_config("gpt2"), "activation_function": "banana"}, "x")


def test_yaml_activation_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("num_layers: 2\nhidden_size: 64\nnum_heads: 4\nffn_hidden_size: 256\nvocab_size: 100\n"
                    "activation: banana\n")
    with pytest.raises(ConfigError, match=r"model\(m.yaml\).activation='banana'"):
        load_model(str(path))
    with pytest.raises(ConfigError, match="unknown activation"):
        TransformerSpec(name="x", num_layers=1, hidden_size=8, num_heads=1, ffn_hidden_size=8, vocab_size=8,
                        activation="banana")


def test_max_seq_len_of_each_kind_of_position() -> None:
    assert spec_from_hf_config(_config("gpt2"), "gpt2").max_seq_len == 1024  # learned, n_positions
    opt = spec_from_hf_config(_config("opt-1.3b"), "opt")
    assert (opt.max_position_embeddings, opt.max_seq_len) == (2050, 2048)  # 2 fairseq offset rows
    assert spec_from_hf_config(_config("bart-large"), "bart").max_seq_len == 1024
    assert load_model("opt-175b").max_seq_len == 2048 and load_model("bart-large").max_seq_len == 1024
    for name in ("llama3-8b", "t5-large", "bloom", "pegasus-large"):  # rotary, relative, ALiBi, sinusoidal
        assert spec_from_hf_config(_config(name), name).max_seq_len == 0


def test_gpt2_without_n_positions_takes_the_transformers_default() -> None:
    cfg = {k: v for k, v in _config("gpt2").items() if k not in ("n_positions", "n_ctx")}
    spec = spec_from_hf_config(cfg, "gpt2")
    assert spec.max_position_embeddings == 1024  # GPT2Config(n_positions=1024)
    assert spec.num_params() == spec_from_hf_config(_config("gpt2"), "gpt2").num_params()


def test_position_offset_must_leave_a_position() -> None:
    with pytest.raises(ConfigError, match="position_offset"):
        TransformerSpec(name="x", num_layers=1, hidden_size=8, num_heads=1, ffn_hidden_size=8, vocab_size=8,
                        max_position_embeddings=2, position_offset=2)
