"""Issue 26 item 1: greentrain's figures reach the loggers ML engineers read, tested with the real MLflow (a
SQLite store in tmp_path) and Lightning's CSV logger, on tiny models built in the test."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.filterwarnings("ignore::FutureWarning")]
FIGURES = {"energy_kwh", "emissions_g_co2e", "tokens_per_s", "flop_per_s"}


def _mlflow_metrics(uri: str, experiment: str | None = None) -> list[dict[str, list[float]]]:
    """Per run (of ``experiment``, else of every experiment): every metric's history (values in step order)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    ids = [e.experiment_id for e in client.search_experiments() if experiment in (None, e.name)]
    runs = client.search_runs(ids)
    return [{k: [m.value for m in client.get_metric_history(r.info.run_id, k)] for k in r.data.metrics}
            for r in runs]


def test_hf_trainer_report_to_mlflow_gets_the_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      mlflow_store: Any) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("mlflow")
    from greentrain.measure.hf import GreentrainTrainerCallback

    uri = mlflow_store(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "hf")
    cfg = transformers.BartConfig(vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, max_position_embeddings=64)
    ids = torch.randint(3, 128, (8, 16))
    data = [{"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x} for x in ids]
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=4, logging_steps=2,
                                          per_device_train_batch_size=4, report_to=["mlflow"],
                                          save_strategy="no", use_cpu=True, disable_tqdm=True)
    cb = GreentrainTrainerCallback(grid_g_per_kwh=300.0, print_summary=False, interval_s=0.01)
    trainer = transformers.Trainer(model=transformers.BartForConditionalGeneration(cfg), args=args,
                                   train_dataset=data, callbacks=[cb])
    trainer.train()
    (run,) = _mlflow_metrics(uri, "hf")
    assert set(run) >= FIGURES and "loss" in run  # beside the Trainer's own; two logs and the summary
    assert len(run["tokens_per_s"]) == 3 and run["tokens_per_s"][-1] > 0 and run["flop_per_s"][-1] > 0
    assert run["emissions_g_co2e"][-1] == pytest.approx(run["energy_kwh"][-1] * 300.0, rel=1e-9)
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == 2 and all(set(h) >= FIGURES for h in logged)
    assert cb.measurement is not None and "mfu" not in run  # no peak FLOP/s given: no MFU claimed


def _tiny_lightning(pl: Any) -> Any:
    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

        def training_step(self, batch: list[torch.Tensor], _i: int) -> torch.Tensor:
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("loss", loss)
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny()


def test_lightning_csv_and_mlflow_loggers_one_folder_per_version(tmp_path: Path, mlflow_store: Any) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    pytest.importorskip("mlflow")
    from lightning.pytorch.loggers import CSVLogger, MLFlowLogger

    from greentrain.measure.lightning import GreentrainLightningCallback

    uri = mlflow_store(tmp_path / "mlflow.db")
    ds = torch.utils.data.TensorDataset(torch.randn(32, 16), torch.randn(32, 1))
    for _fit in range(2):
        cb = GreentrainLightningCallback(region="fr", print_summary=False, interval_s=0.01,
                                         peak_flop_per_s=1e12)
        loggers = [CSVLogger(tmp_path, name="csv"), MLFlowLogger(experiment_name="pl", tracking_uri=uri)]
        trainer = pl.Trainer(max_steps=4, callbacks=[cb], logger=loggers, log_every_n_steps=1,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             accelerator="cpu", default_root_dir=tmp_path)
        trainer.fit(_tiny_lightning(pl), torch.utils.data.DataLoader(ds, batch_size=8))
    # the first logger's versions (CSV: version_0, version_1); the second fit did not overwrite the first
    for version in (0, 1):
        m = json.loads((tmp_path / "greentrain" / f"version_{version}" / "measurement.json").read_text())
        assert m["num_steps"] == 4
        rows = list(csv.DictReader((tmp_path / "csv" / f"version_{version}" / "metrics.csv").open()))
        cols = set(rows[0])
        assert FIGURES | {"mfu"} <= cols
        assert sum(1 for r in rows if r["tokens_per_s"]) >= 4  # one per step, and the final one
    runs = _mlflow_metrics(uri, "pl")
    assert len(runs) == 2 and all(FIGURES | {"mfu", "power_w"} <= set(r) for r in runs)
    assert all(len(r["energy_kwh"]) >= 4 for r in runs)


def test_accelerate_tracker_adds_figures_for_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    mlflow_store: Any) -> None:
    accelerate = pytest.importorskip("accelerate")
    pytest.importorskip("mlflow")
    import mlflow

    from greentrain.measure.accelerate import GreentrainAccelerateTracker

    uri = mlflow_store(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)  # an earlier test's URI stays in MLflow's process-wide state otherwise
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    gt = GreentrainAccelerateTracker(model=model, grid_g_per_kwh=100.0, out_dir=tmp_path / "gt",
                                     print_summary=False, interval_s=0.01)
    acc = accelerate.Accelerator(cpu=True, log_with=[gt, "mlflow"])
    acc.init_trackers("acc")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt = acc.prepare(model, opt)
    for step in range(3):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        acc.log({"loss": loss.item()}, step=step)
    acc.end_training()
    (run,) = _mlflow_metrics(uri)
    assert set(run) >= FIGURES and len(run["flop_per_s"]) == 3 and run["flop_per_s"][-1] > 0
    m = json.loads((tmp_path / "gt" / "measurement.json").read_text())
    assert m["num_steps"] == 3 and m["flop_per_step"] > 0  # a step per optimizer step, hooks on the model
