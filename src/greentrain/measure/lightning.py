"""Lightning integration: ``pl.Trainer(callbacks=[GreentrainLightningCallback(region="fr")])``.

Starts at ``on_train_start`` (hooks on the LightningModule), opens a cycle at ``on_train_batch_start`` and
marks a step at each ``on_train_batch_end``, writes the outputs at ``on_train_end``; ``on_exception`` closes
the record with status "error".

Figures reach Lightning's loggers (TensorBoard, CSV, MLflow...): at each batch the run's figures so far
(``Tracker.live``: energy_kwh, emissions_g_co2e, tokens_per_s, flop_per_s, mfu) go through ``pl_module.log``
(so Lightning's ``log_every_n_steps`` applies), and the final figures through each logger's ``log_metrics`` at
the end. Outputs are written per Lightning version: without ``out_dir``, under
``<default_root_dir>/greentrain/version_N`` with the logger's version (its run id for MLflow), or the next free
``version_N`` without a logger; a second ``fit`` never overwrites the first one's measurement.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from greentrain import units
from greentrain.measure.callback import TrackerCallback


def version_dir(root: Path, logger: Any) -> Path:
    """``root/version_N`` for the logger's version (an int, or a string such as MLflow's run id), else the
    next ``version_N`` not yet in ``root``."""
    version = getattr(logger, "version", None) if logger is not None else None
    if isinstance(version, int):
        return root / f"version_{version}"
    if isinstance(version, str) and version:
        return root / (version if version.startswith("version_") else f"version_{version}")
    n = 0
    while (root / f"version_{n}").exists():
        n += 1
    return root / f"version_{n}"


class GreentrainLightningCallback(TrackerCallback, pl.Callback):
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        root = getattr(trainer, "default_root_dir", None)
        self.start_tracker(lambda: version_dir(Path(root) / "greentrain", trainer.logger) if root else None)
        self.tracker.attach(pl_module)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        # Lightning calls training_step, not forward: open the FLOP/time cycle of this batch by hand
        # (a forward call inside training_step opens its own).
        if self.tracker.hooks is not None:
            self.tracker.hooks.enter_root_call(batch if isinstance(batch, (list, tuple)) else (batch,), {})

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.tracker.step()
        if trainer.loggers:
            for name, value in self.tracker.live().items():
                pl_module.log(name, value, on_step=True, on_epoch=False, prog_bar=False, logger=True)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        m = self.tracker.stop()
        if m is None or not trainer.loggers:
            return
        final = {"energy_kwh": m.energy_kwh, "tokens_per_s": m.tokens_per_s, "flop_per_s": m.flop_per_s,
                 "power_w": m.power_w}
        if m.emissions_kg_co2e is not None:
            final["emissions_g_co2e"] = m.emissions_kg_co2e * units.G_PER_KG
        if self.tracker.peak_flop_per_s:
            final["mfu"] = m.flop_per_s / m.world_size / self.tracker.peak_flop_per_s
        for logger in trainer.loggers:
            logger.log_metrics(final, step=trainer.global_step)
            logger.save()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.tracker.stop(status="error", error=f"{type(exception).__name__}: {exception}")
