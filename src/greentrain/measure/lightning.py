"""Lightning integration: ``pl.Trainer(callbacks=[GreentrainLightningCallback(region="fr")])``.

Starts at ``on_train_start`` (hooks on the LightningModule), opens a cycle at ``on_train_batch_start`` and
marks a step at each ``on_train_batch_end``,
writes the outputs at ``on_train_end``; ``on_exception`` closes the record with status "error". Without
``out_dir`` the outputs go to ``<Trainer.default_root_dir>/greentrain``; each ``fit`` is its own run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from greentrain.measure.summary import Measurement
from greentrain.measure.tracker import Tracker


class GreentrainLightningCallback(pl.Callback):
    def __init__(self, **tracker_kwargs: Any) -> None:
        tracker_kwargs.pop("model", None)
        self._out_dir_given = "out_dir" in tracker_kwargs
        self.tracker = Tracker(None, **tracker_kwargs)

    @property
    def measurement(self) -> Measurement | None:
        return self.tracker.measurement

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if not self.tracker.running:
            if not self._out_dir_given and getattr(trainer, "default_root_dir", None):
                self.tracker.out_dir = Path(trainer.default_root_dir) / "greentrain"
            self.tracker.start()
        self.tracker.attach(pl_module)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        # Lightning calls training_step, not forward: open the FLOP/time cycle of this batch by hand
        # (a forward call inside training_step opens its own).
        if self.tracker.hooks is not None:
            self.tracker.hooks.enter_root_call(batch if isinstance(batch, (list, tuple)) else (batch,), {})

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.tracker.step()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.tracker.stop()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.tracker.stop(status="error", error=f"{type(exception).__name__}: {exception}")
