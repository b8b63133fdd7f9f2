"""Hugging Face Trainer integration: ``Trainer(..., callbacks=[GreentrainTrainerCallback(region="fr")])``.

The tracker starts at ``on_train_begin`` (hooks on the Trainer's model), marks a step at each
``on_step_end`` (one optimizer step; tokens counted from ``input_ids``) and writes its outputs at
``on_train_end``.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from greentrain.measure.summary import Measurement
from greentrain.measure.tracker import Tracker


class GreentrainTrainerCallback(TrainerCallback):
    def __init__(self, **tracker_kwargs: Any) -> None:
        tracker_kwargs.pop("model", None)
        self.tracker = Tracker(None, **tracker_kwargs)

    @property
    def measurement(self) -> Measurement | None:
        return self.tracker.measurement

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if not self.tracker.running:
            self.tracker.start()
        if model is not None:
            self.tracker.attach(model)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.stop()
