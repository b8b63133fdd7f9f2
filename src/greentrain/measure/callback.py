"""What the trainer callbacks share (measure/hf.py for the Hugging Face Trainer, measure/lightning.py for
Lightning): a Tracker built from the callback's keywords, started at the trainer's first training event with its
outputs under the trainer's own folder unless ``out_dir`` was given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from greentrain.measure.summary import Measurement
from greentrain.measure.tracker import Tracker


class TrackerCallback:
    """A mixin before the framework's callback base: ``class C(TrackerCallback, TrainerCallback)``."""

    def __init__(self, **tracker_kwargs: Any) -> None:
        tracker_kwargs.pop("model", None)  # the trainer's model is attached when training starts
        self._out_dir_given = "out_dir" in tracker_kwargs
        self.tracker = Tracker(None, **tracker_kwargs)

    @property
    def measurement(self) -> Measurement | None:
        return self.tracker.measurement

    def start_tracker(self, trainer_out_dir: Callable[[], Path | None]) -> None:
        """Start the tracker unless it runs; its outputs go to ``trainer_out_dir()`` (the trainer's folder, None
        when the trainer has none) unless the callback was given ``out_dir``."""
        if self.tracker.running:
            return
        out_dir = None if self._out_dir_given else trainer_out_dir()
        if out_dir is not None:
            self.tracker.out_dir = out_dir
        self.tracker.start()
