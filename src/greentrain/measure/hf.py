"""Hugging Face Trainer integration: ``Trainer(..., callbacks=[GreentrainTrainerCallback(region="fr")])``.

The tracker starts at ``on_train_begin`` (hooks on the Trainer's model), marks a step at each
``on_step_end`` (one optimizer step; tokens counted from ``input_ids``) and writes its outputs at
``on_train_end``. Without ``out_dir`` the outputs go to ``<TrainingArguments.output_dir>/greentrain``; each
``train()`` is its own run (run id, records, one emissions.csv row).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from greentrain.measure.summary import Measurement
from greentrain.measure.tracker import Tracker

OUT_SUBDIR = "greentrain"  # under the trainer's own output folder


class GreentrainTrainerCallback(TrainerCallback):
    def __init__(self, **tracker_kwargs: Any) -> None:
        tracker_kwargs.pop("model", None)
        self._out_dir_given = "out_dir" in tracker_kwargs
        self.tracker = Tracker(None, **tracker_kwargs)

    @property
    def measurement(self) -> Measurement | None:
        return self.tracker.measurement

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if not self.tracker.running:
            if not self._out_dir_given and getattr(args, "output_dir", None):
                self.tracker.out_dir = Path(args.output_dir) / OUT_SUBDIR
            self.tracker.start()
        if model is not None:
            self.tracker.attach(model)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.stop()
