"""Hugging Face Trainer and Lightning callbacks on tiny models built in the test (no downloads)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from greentrain.measure.swap import compare_forward, swap_forward


def test_hf_trainer_callback_with_tiny_bart(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from greentrain.measure.hf import GreentrainTrainerCallback

    cfg = transformers.BartConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, max_position_embeddings=64)
    model = transformers.BartForConditionalGeneration(cfg)
    ids = torch.randint(3, 128, (8, 16))
    data = [{"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x} for x in ids]
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=3,
                                          per_device_train_batch_size=4, report_to=[], save_strategy="no",
                                          logging_strategy="no", use_cpu=True, disable_tqdm=True)
    cb = GreentrainTrainerCallback(grid_g_per_kwh=50.0, out_dir=tmp_path / "gt", print_summary=False)
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[cb]).train()
    m = json.loads((tmp_path / "gt" / "measurement.json").read_text())
    assert m["num_steps"] == 3 and m["tokens"] == 3 * 4 * 16 and m["flop_per_step"] > 0
    assert m["emissions_kg_co2e"] > 0 and (tmp_path / "gt" / "emissions.csv").exists()
    assert any(x["name"].startswith("model") for x in m["modules"])


def test_lightning_callback(tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from greentrain.measure.lightning import GreentrainLightningCallback

    class Tiny(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

        def training_step(self, batch: list[torch.Tensor], _i: int) -> torch.Tensor:
            return torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    ds = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randn(32, 1))
    cb = GreentrainLightningCallback(out_dir=tmp_path, print_summary=False)
    trainer = pl.Trainer(max_steps=4, callbacks=[cb], logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(Tiny(), torch.utils.data.DataLoader(ds, batch_size=8))
    m = cb.measurement
    # per sample: forward 2·(16·32 + 32·1); backward: weight gradients of both layers (2x their forward
    # share) and the input gradient of the second only (the batch needs no gradient): 2·32·1
    fwd = 2 * (16 * 32 + 32 * 1)
    assert m is not None and m.num_steps == 4
    assert m.flop_per_step == pytest.approx(8 * (3 * fwd - 2 * 16 * 32), rel=0.01)


def test_swap_forward_and_compare() -> None:
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    want = lin(x)
    handle = swap_forward(lin, lambda f: (lambda inp: f(inp) * 2))
    assert torch.allclose(lin(x), 2 * want) and handle.stats.calls == 1 and handle.stats.time_s > 0
    handle.restore()
    assert torch.allclose(lin(x), want)
    cmp = compare_forward(lin, "eager", x, repeat=3, rounds=1)
    assert cmp.original_s > 0 and cmp.swapped_s > 0 and not cmp.energy_measured


def _tiny_bart_trainer(output_dir: Path, steps: int, cb: object) -> object:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BartConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, max_position_embeddings=64)
    ids = torch.randint(3, 128, (8, 16))
    data = [{"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x} for x in ids]
    args = transformers.TrainingArguments(output_dir=str(output_dir), max_steps=steps,
                                          per_device_train_batch_size=4, report_to=[], save_strategy="no",
                                          logging_strategy="no", use_cpu=True, disable_tqdm=True)
    return transformers.Trainer(model=transformers.BartForConditionalGeneration(cfg), args=args,
                                train_dataset=data, callbacks=[cb])


def test_hf_callback_writes_under_output_dir_one_run_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16 item 3: not ./greentrain-out, and a second run into the same output_dir is its own run."""
    pytest.importorskip("transformers")
    from greentrain.measure.hf import GreentrainTrainerCallback

    monkeypatch.chdir(tmp_path)
    for steps in (3, 2):
        cb = GreentrainTrainerCallback(grid_g_per_kwh=50.0, print_summary=False)
        _tiny_bart_trainer(tmp_path / "hf", steps, cb).train()  # type: ignore[attr-defined]
        assert cb.measurement is not None and cb.measurement.num_steps == steps
    out = tmp_path / "hf" / "greentrain"
    assert not (tmp_path / "greentrain-out").exists()
    assert json.loads((out / "measurement.json").read_text())["num_steps"] == 2
    rows = list(csv.DictReader((out / "emissions.csv").open()))
    assert len(rows) == 2 and rows[0]["run_id"] != rows[1]["run_id"]
