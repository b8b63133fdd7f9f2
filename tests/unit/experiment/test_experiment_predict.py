"""The planner's prediction of a variant: FLOPs per step equal torch's counted FLOPs (T5, BART, Pegasus, fixed
padding), tokens exact, the config defaults match the installed transformers, and plan needs no torch."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from greentrain.experiment.job import parse_job
from greentrain.experiment.predict import ARCH_DEFAULTS, calibrated_train_s, predict, vocab_size

TINY: dict[str, dict[str, Any]] = {
    "t5": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4},
    "bart": {"d_model": 32, "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 4,
             "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "max_position_embeddings": 64},
    "pegasus": {"d_model": 32, "encoder_layers": 1, "decoder_layers": 2, "encoder_attention_heads": 4,
                "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
                "max_position_embeddings": 64},
}


def job(arch: str, **train: Any) -> Any:
    return parse_job({"model": {"arch": arch, "config": TINY[arch]},
                      "data": {"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24,
                               "max_target_tokens": 8},
                      "train": {"per_device_train_batch_size": 4, "max_steps": 3, **train}})


@pytest.mark.parametrize("arch", ["t5", "bart", "pegasus"])
def test_flop_per_step_equals_counted_flops(arch: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.measure.flops import LocalFlopCounter  # the Tracker's counter (CPU attention counted)

    j = job(arch)
    model = build_model(j, vocab_size(j))
    b, s, t = 4, j.data.max_source_tokens, j.data.max_target_tokens
    ids = torch.randint(3, vocab_size(j), (b, s))
    labels = torch.randint(3, vocab_size(j), (b, t))
    with LocalFlopCounter() as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss.backward()
    p = predict(j)
    assert p.flop_per_step == pytest.approx(counter.total(), rel=0.01)
    assert p.tokens_per_step == b * (s + t)


@pytest.mark.parametrize("arch", ["t5", "bart", "pegasus"])
def test_config_defaults_match_the_installed_transformers(arch: str) -> None:
    transformers = pytest.importorskip("transformers")
    cls = {"t5": transformers.T5Config, "bart": transformers.BartConfig, "pegasus": transformers.PegasusConfig}[arch]
    installed = cls().to_dict()
    for key, value in ARCH_DEFAULTS[arch].items():
        if key != "model_type":
            assert installed.get(key) == value, key


def test_memory_and_optimizer_follow_the_job() -> None:
    adamw, adafactor = predict(job("t5")), predict(job("t5", optim="adafactor"))
    bf16 = predict(job("t5", precision="bf16"))
    assert adafactor.memory_bytes < adamw.memory_bytes
    assert bf16.flop_per_step == adamw.flop_per_step
    assert adamw.train_s is None and adamw.chip == ""  # no site.chip: FLOPs, tokens and memory only
    on_chip = predict(parse_job({**job("t5").resolved, "site": {"chip": "a100-80gb", "grid_g_co2e_per_kwh": 300,
                                                                "usd_per_hour": 4.0}}))
    assert on_chip.train_s is not None and on_chip.train_s > 0
    assert on_chip.cost_usd == pytest.approx(4.0 * on_chip.train_s / 3600)
    assert on_chip.kg_co2e is not None and on_chip.kg_co2e > 0


def test_calibrated_train_time_extrapolates_the_first_steps() -> None:
    times = [5.0] + [1.0] * 9 + [9.0] * 5
    assert calibrated_train_s(times, 100) == pytest.approx(5.0 + 9 * 1.0 + 1.0 * 90)
    assert calibrated_train_s([2.0], 10) is None


def test_plan_runs_without_torch(tmp_path: Any) -> None:
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
            "from greentrain.cli.main import main\n"
            "rc = main(['experiment', 'plan', 'examples/tiny-summarize.yaml', '--json'])\n"
            "assert rc == 0, rc\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert '"flop_per_step"' in proc.stdout


@pytest.mark.parametrize("arch", ["t5", "bart", "pegasus"])
@pytest.mark.parametrize("freeze", [["embeddings"], ["encoder"], ["decoder"], ["embeddings", "encoder"]])
def test_frozen_parts_are_predicted_as_the_planner_s_freeze(arch: str, freeze: list[str]) -> None:
    """model.freeze reaches the planner (workload finetune: freeze): FLOPs per step = counted FLOPs of the frozen
    model (no weight gradients below), and less state than full fine-tuning."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.measure.flops import LocalFlopCounter

    j = parse_job({**job(arch).resolved, "model": {"arch": arch, "config": TINY[arch], "freeze": freeze}})
    model = build_model(j, vocab_size(j))
    ids = torch.randint(3, vocab_size(j), (4, j.data.max_source_tokens))
    labels = torch.randint(3, vocab_size(j), (4, j.data.max_target_tokens))
    with LocalFlopCounter() as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss.backward()
    p, full = predict(j), predict(job(arch))
    assert p.flop_per_step == pytest.approx(counter.total(), rel=0.01)
    assert p.flop_per_step < full.flop_per_step and p.memory_bytes < full.memory_bytes


LORA_CASES = [("bart", ["q", "v"]), ("bart", ["k"]), ("bart", ["o", "down"]), ("pegasus", ["q", "k", "v", "o"]),
              ("pegasus", ["up", "down"]), ("t5", ["q", "k", "v", "o"]), ("t5", ["o", "down"])]


@pytest.mark.parametrize(("arch", "targets"), LORA_CASES)
def test_lora_variants_are_predicted_as_the_planner_s_lora(arch: str, targets: list[str]) -> None:
    """model.lora builds peft-style adapters beside the targets (every base weight frozen) and reaches the planner
    (workload finetune: lora): FLOPs per step = counted, and far fewer trainable parameters."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from greentrain.experiment.build import build_model
    from greentrain.measure.flops import LocalFlopCounter

    j = parse_job({**job(arch).resolved,
                   "model": {"arch": arch, "config": TINY[arch], "lora": {"rank": 4, "targets": targets}}})
    model = build_model(j, vocab_size(j))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert 0 < trainable < sum(p.numel() for p in model.parameters()) / 5
    ids = torch.randint(3, vocab_size(j), (4, j.data.max_source_tokens))
    labels = torch.randint(3, vocab_size(j), (4, j.data.max_target_tokens))
    with LocalFlopCounter() as counter:
        model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss.backward()
    p, full = predict(j), predict(job(arch))
    assert p.flop_per_step == pytest.approx(counter.total(), rel=0.01)
    assert p.memory_bytes < full.memory_bytes


@pytest.mark.parametrize(("lora", "match"), [
    ({"rank": 0}, r"model\.lora\.rank=0: must be >= 1"),
    ({"targets": ["qkv"]}, r"model\.lora\.targets='qkv': must be one of q, k, v, o, up, down for t5"),
    ({"targets": ["gate"]}, r"model\.lora\.targets='gate'"),
    ({"rank": 4, "alpha": 8}, r"model\.lora\.alpha=8: unknown key"),
])
def test_bad_lora_settings(lora: dict[str, Any], match: str) -> None:
    from greentrain.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        parse_job({"model": {"arch": "t5", "lora": lora}})
    with pytest.raises(ConfigError, match=r"model\.lora=.*give model\.freeze or model\.lora"):
        parse_job({"model": {"arch": "t5", "lora": {"rank": 4}, "freeze": ["encoder"]}})
    with pytest.raises(ConfigError, match=r"model\.lora='gpt2': adapters are built for"):
        parse_job({"task": "causal-lm", "model": {"arch": "gpt2", "lora": {"rank": 4}}})
