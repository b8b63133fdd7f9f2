"""Issue 25 item 5: a new Hugging Face model family is one record (docs/extending.md).

A fake family, "toyformer", is a Llama under other key names (blocks, width, heads, mlp_width). It is registered
as one ModelFamily and nothing else is edited; then `plan --model DIR` reads its config.json (by model_type and by
its architectures prefix) and `greentrain experiment` parses, predicts and adapts a job of it. Every figure must
equal the one of the same model written as a Llama config, which goes through the built-in record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.model import families
from greentrain.model.family import FineTuning, ModelFamily
from greentrain.model.hf_reader import ConfigReader


def _toyformer(r: ConfigReader) -> dict[str, Any]:
    heads = r.get_int("heads")
    return dict(num_layers=r.get_int("blocks"), hidden_size=r.get_int("width"), num_heads=heads,
                num_kv_heads=heads, ffn_hidden_size=r.get_int("mlp_width"), vocab_size=r.get_int("vocab_size"),
                glu=True, activation="silu", tied_embeddings=False, max_position_embeddings=0, linear_bias=False,
                norm="rmsnorm")


TOY = ModelFamily(
    model_type="toyformer", reader=_toyformer, arch_prefixes=("Toyformer",), rotary=True,
    finetuning=FineTuning(task="causal-lm", defaults={"blocks": 2, "width": 64, "heads": 4, "mlp_width": 128},
                          config_keys=frozenset({"blocks", "width", "heads", "mlp_width", "vocab_size"}),
                          lora_modules={"q": ("wq",), "v": ("wv",)}))
# the same model as keys of LlamaConfig
AS_LLAMA = {"blocks": "num_hidden_layers", "width": "hidden_size", "heads": "num_attention_heads",
            "mlp_width": "intermediate_size", "vocab_size": "vocab_size"}
SHAPE = {"blocks": 4, "width": 256, "heads": 8, "mlp_width": 704, "vocab_size": 32_000}


@pytest.fixture
def toyformer() -> Iterator[ModelFamily]:
    families.register(TOY)
    yield TOY
    families.unregister(TOY.model_type)


def _plan(tmp_path: Path, name: str, config: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    capsys.readouterr()
    assert main(["plan", "--model", str(folder), "--chip", "a100-80gb", "--num-chips", "1", "--seq-len", "512",
                 "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_plan_reads_the_new_family(toyformer: ModelFamily, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    llama = _plan(tmp_path, "as-llama", {"model_type": "llama", **{AS_LLAMA[k]: v for k, v in SHAPE.items()}},
                  capsys)
    toy = _plan(tmp_path, "toy", {"model_type": "toyformer", **SHAPE}, capsys)
    by_class = _plan(tmp_path, "toy-by-class", {"architectures": ["ToyformerForCausalLM"], **SHAPE}, capsys)
    for key in ("num_params", "flop_per_step", "step_time_s", "memory_bytes_per_device"):
        assert toy[key] == by_class[key] == llama[key], key
    assert toy["num_params"] > 0


def test_without_its_record_the_family_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "toyformer", **SHAPE}), encoding="utf-8")
    assert main(["plan", "--model", str(tmp_path), "--json"]) == 2
    assert "config.json.model_type='toyformer': unsupported model_type" in capsys.readouterr().err


def _job(arch: str, config: dict[str, Any], lora: dict[str, Any] | None = None) -> Any:
    from greentrain.experiment.job import parse_job

    model: dict[str, Any] = {"arch": arch, "config": config, **({"lora": lora} if lora else {})}
    return parse_job({"task": "causal-lm", "model": model,
                      "site": {"chip": "a100-80gb", "grid_g_co2e_per_kwh": 300, "usd_per_hour": 4.0}})


def test_experiment_parses_and_predicts_the_new_family(toyformer: ModelFamily) -> None:
    from greentrain.experiment.predict import ARCH_DEFAULTS, hf_config, predict, vocab_size

    toy = _job("toyformer", {"width": 96}, lora={"rank": 4, "targets": ["q", "v"]})
    llama = _job("llama", {"num_hidden_layers": 2, "hidden_size": 96, "num_attention_heads": 4,
                           "intermediate_size": 128}, lora={"rank": 4, "targets": ["q", "v"]})
    cfg = hf_config(toy, vocab_size(toy))  # the record's defaults under the job's config
    assert {k: cfg[k] for k in ("model_type", "blocks", "width", "heads", "mlp_width")} == {
        "model_type": "toyformer", "blocks": 2, "width": 96, "heads": 4, "mlp_width": 128}
    assert dataclasses.asdict(predict(toy)) == dataclasses.asdict(predict(llama))
    assert ARCH_DEFAULTS["toyformer"]["width"] == 64


def test_experiment_checks_the_new_family_by_its_record(toyformer: ModelFamily) -> None:
    from greentrain.experiment.job import parse_job

    with pytest.raises(ConfigError, match=r"model\.config\.widht=.*did you mean width"):
        _job("toyformer", {"widht": 96})
    with pytest.raises(ConfigError, match=r"model\.lora\.targets='k': must be one of q, v for toyformer"):
        _job("toyformer", {}, lora={"rank": 4, "targets": ["k"]})
    with pytest.raises(ConfigError, match=r"model\.arch='toyformer': must be one of t5, bart, pegasus for task"):
        parse_job({"task": "summarization", "model": {"arch": "toyformer"}})


def test_the_derived_lists_follow_the_registry() -> None:
    from greentrain.experiment.hf_names import CONFIG_KEYS
    from greentrain.model.hf import FAMILIES

    assert "toyformer" not in CONFIG_KEYS and "toyformer" not in FAMILIES
    families.register(TOY)
    try:
        assert CONFIG_KEYS["toyformer"] >= {"blocks", "model_type"} and FAMILIES["toyformer"] is TOY
        assert [f.model_type for f in families.finetunable("causal-lm")] == ["llama", "gpt2", "toyformer"]
    finally:
        families.unregister("toyformer")
    assert "toyformer" not in CONFIG_KEYS and families.model_type_of_architecture("ToyformerForCausalLM") is None


def test_worker_adapts_the_modules_its_record_names(toyformer: ModelFamily) -> None:
    torch = pytest.importorskip("torch")
    from greentrain.experiment.build import LoraLinear, add_lora

    block = torch.nn.ModuleDict({"wq": torch.nn.Linear(8, 8), "wk": torch.nn.Linear(8, 8),
                                 "wv": torch.nn.Linear(8, 8)})
    model = torch.nn.ModuleDict({"layer0": block})
    assert add_lora(model, "toyformer", ("q", "v"), rank=2) == 2
    assert isinstance(block["wq"], LoraLinear) and isinstance(block["wv"], LoraLinear)
    assert isinstance(block["wk"], torch.nn.Linear)


def test_a_second_record_for_a_family_or_a_prefix_is_refused(toyformer: ModelFamily) -> None:
    with pytest.raises(ValueError, match="already registered"):
        families.register(TOY)
    with pytest.raises(ValueError, match=r"prefix already registered: Toyformer \(toyformer\)"):
        families.register(dataclasses.replace(TOY, model_type="toyformer2"))
    with pytest.raises(ValueError, match="lower-case"):
        ModelFamily(model_type="Toy", reader=_toyformer)
    with pytest.raises(ValueError, match="not LoRA targets"):
        FineTuning(task="causal-lm", defaults={}, config_keys=frozenset(), lora_modules={"qkv": ("c_attn",)})
