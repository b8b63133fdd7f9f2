"""Causal-LM tasks: a decoder-only model (Llama, GPT-2) trained by the Trainer on each source and its target
joined; quality is the evaluation loss and the test perplexity, with the same phases, prediction and report."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment.job import parse_job
from greentrain.experiment.predict import ARCH_DEFAULTS, predict, vocab_size
from greentrain.experiment.spec import experiment_from_dict, load_experiment

TINY: dict[str, dict[str, Any]] = {
    "llama": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 64},
    "gpt2": {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64},
}


def job(arch: str, **train: Any) -> Any:
    return parse_job({"task": "causal-lm", "model": {"arch": arch, "config": TINY[arch]},
                      "data": {"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24,
                               "max_target_tokens": 8},
                      "train": {"per_device_train_batch_size": 4, "max_steps": 3, **train}})


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_flop_per_step_equals_counted_flops(arch: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.measure.flops import LocalFlopCounter

    j = job(arch)
    model = build_model(j, vocab_size(j))
    b, s = 4, j.data.max_source_tokens + j.data.max_target_tokens  # the source and its target joined
    ids = torch.randint(3, vocab_size(j), (b, s))
    with LocalFlopCounter() as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss.backward()
    p = predict(j)
    assert p.flop_per_step == pytest.approx(counter.total(), rel=0.01)
    assert p.tokens_per_step == b * s


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_config_defaults_match_the_installed_transformers(arch: str) -> None:
    transformers = pytest.importorskip("transformers")
    installed = {"llama": transformers.LlamaConfig, "gpt2": transformers.GPT2Config}[arch]().to_dict()
    for key, value in ARCH_DEFAULTS[arch].items():
        if key != "model_type":
            assert installed.get(key) == value, key


@pytest.mark.parametrize(("changes", "field"), [
    ({"model": {"arch": "t5"}}, "model.arch"),  # an encoder-decoder is not a causal LM
    ({"model": {"arch": "llama", "freeze": ["encoder"]}}, "model.freeze"),
    ({"model": {"arch": "llama"}, "eval": {"metrics": ["rouge1"]}}, "eval.metrics"),
])
def test_causal_lm_bad_input(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_job({"task": "causal-lm", **changes})
    assert e.value.field == field and "causal-lm" in e.value.rule


def test_an_axis_cannot_change_the_task(make_experiment: Any) -> None:
    data = make_experiment(axes={"lm": [{"label": "lm", "set": {"task": "causal-lm"}}]})
    with pytest.raises(ConfigError, match=r"axes\[lm\]\.task='causal-lm': an experiment has one task"):
        experiment_from_dict(data)


def test_the_example_plans() -> None:
    exp = load_experiment("examples/tiny-causal-lm.yaml")
    assert [v.variant_id for v in exp.variants] == ["base", "train.optim=adafactor", "gpt2"]
    assert exp.base.task == "causal-lm" and exp.base.eval.metrics == ("perplexity",)


@pytest.mark.slow
def test_a_real_run_scores_perplexity_with_the_same_phases(tmp_path: Path, make_experiment: Any) -> None:
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model, build_tokenizer, encode
    from greentrain.experiment.data import load_splits
    from greentrain.experiment.report import build_report
    from greentrain.experiment.results import PHASES
    from greentrain.experiment.runner import RunOptions, run_experiment, variant_dir
    from greentrain.report.experiment import markdown

    exp = experiment_from_dict(make_experiment(
        task="causal-lm", model={"arch": "llama", "config": {**TINY["llama"], "hidden_size": 64,
                                                             "intermediate_size": 128}},
        data={"train_size": 512, "eval_size": 32, "test_size": 32, "max_source_tokens": 48, "max_target_tokens": 16},
        train={"max_steps": 40, "per_device_train_batch_size": 16, "learning_rate": 3.0e-3},
        axes={"train.optim": ["adafactor"]}))
    base, ada = run_experiment(exp, RunOptions(out_dir=tmp_path, isolation="inline"))
    for r in (base, ada):
        assert r.status == "ok" and r.task == "causal-lm" and r.num_steps == 40
        assert sum(getattr(r, f"{p}_energy_j") for p in PHASES) == pytest.approx(r.energy_j, abs=1e-9)
        assert r.predict_energy_j > 0 and r.eval_energy_j > 0
        assert r.perplexity == pytest.approx(math.exp(r.test_loss or 0.0)) and r.rouge1 is None
        assert r.flop_per_step == pytest.approx(r.predicted_flop_per_step, rel=0.01)
        assert r.tokens_source + r.tokens_target == 40 * 16 * 64
    assert not (variant_dir(tmp_path, "base") / "predictions.jsonl").exists()
    # quality is real: far below the untrained model's perplexity (about the vocabulary size)
    import torch

    j = exp.variants[0].job
    d = j.data
    train, _, test = load_splits(d.source, d.path, d.source_column, d.target_column,
                                 (d.train_size, d.eval_size, d.test_size), 0)
    tok = build_tokenizer(j, train)
    torch.manual_seed(0)
    model = build_model(j, len(tok)).eval()
    rows = encode(tok, test, j)
    with torch.no_grad():
        loss = model(**{k: torch.tensor([x[k] for x in rows]) for k in rows[0]}).loss
    assert (base.perplexity or 0.0) < math.exp(float(loss)) / 5, (base.perplexity, math.exp(float(loss)))
    rep = build_report(tmp_path, [])
    assert rep.quality.field == "perplexity" and rep.pareto
    best = min((base, ada), key=lambda r: r.perplexity or 0.0)
    assert any(f.kind == "F2" and f.variants == (best.variant_id,) and "perplexity" in f.text for f in rep.findings)
    assert "| eval loss | perplexity |" in markdown(rep) and "Pareto set (perplexity down" in markdown(rep)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_frozen_embeddings_are_predicted_as_counted(arch: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.measure.flops import LocalFlopCounter

    j = parse_job({**job(arch).resolved, "model": {"arch": arch, "config": TINY[arch], "freeze": ["embeddings"]}})
    model = build_model(j, vocab_size(j))
    ids = torch.randint(3, vocab_size(j), (4, j.data.max_source_tokens + j.data.max_target_tokens))
    with LocalFlopCounter() as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss.backward()
    p, full = predict(j), predict(job(arch))
    assert p.flop_per_step == pytest.approx(counter.total(), rel=0.01)
    # a lookup table has no FLOPs: only GPT-2's tied head saves some; both drop the table's state
    assert p.flop_per_step <= full.flop_per_step and p.memory_bytes < full.memory_bytes


@pytest.mark.parametrize("targets", [["q", "v"], ["gate", "up", "down"], ["k", "o"]])
def test_llama_lora_is_predicted_as_counted(targets: list[str]) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.measure.flops import LocalFlopCounter

    j = parse_job({**job("llama").resolved,
                   "model": {"arch": "llama", "config": TINY["llama"], "lora": {"rank": 4, "targets": targets}}})
    model = build_model(j, vocab_size(j))
    ids = torch.randint(3, vocab_size(j), (4, j.data.max_source_tokens + j.data.max_target_tokens))
    with LocalFlopCounter() as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss.backward()
    assert predict(j).flop_per_step == pytest.approx(counter.total(), rel=0.01)
