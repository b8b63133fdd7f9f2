"""Hugging Face Trainer integration: ``Trainer(..., callbacks=[GreentrainTrainerCallback(region="fr")])``.

The tracker starts at ``on_train_begin`` (hooks on the Trainer's model), marks a step at each
``on_step_end`` (one optimizer step; tokens counted from ``input_ids``) and writes its outputs at
``on_train_end``. Without ``out_dir`` the outputs go to ``<TrainingArguments.output_dir>/greentrain``; each
``train()`` is its own run (run id, records, one emissions.csv row).

At each ``on_log`` the run's figures so far (``energy_kwh``, ``emissions_g_co2e`` with a region,
``tokens_per_s``, ``flop_per_s``, ``mfu`` with a peak FLOP/s or chip: ``Tracker.live``) are added to the logs
dict, so every ``report_to`` sink (MLflow, TensorBoard, W&B...) records them beside the loss, and to the
Trainer's ``state.log_history``. The Trainer calls its callbacks in order, the ``report_to`` ones first: at
``on_train_begin`` this callback moves itself to the front of the Trainer's callback list, so that the sinks
see the figures it adds. At ``on_train_end`` the Trainer's log history (every logged step, figures included)
is written to ``trainer_log_history.json`` beside the outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import CallbackHandler

from greentrain.files import write_text_atomic
from greentrain.measure.callback import TrackerCallback

OUT_SUBDIR = "greentrain"  # under the trainer's own output folder
LOG_HISTORY = "trainer_log_history.json"  # the Trainer's log history (each entry with its step)


class GreentrainTrainerCallback(TrackerCallback, TrainerCallback):
    def _go_first(self) -> None:
        """Move this callback ahead of the report_to sinks: the CallbackHandler calling this event is the
        caller's ``self`` (transformers' ``CallbackHandler.call_event``)."""
        frame = sys._getframe(2)  # _go_first <- on_train_begin <- CallbackHandler.call_event
        handler = frame.f_locals.get("self") if frame is not None else None
        if isinstance(handler, CallbackHandler) and self in handler.callbacks:
            handler.callbacks.remove(self)
            handler.callbacks.insert(0, self)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._go_first()
        self.start_tracker(lambda: Path(args.output_dir) / OUT_SUBDIR if getattr(args, "output_dir", None) else None)
        if model is not None:
            self.tracker.attach(model)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.step()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if logs is None or not self.tracker.running:
            return
        figures = self.tracker.live()
        logs.update(figures)
        if state.log_history:  # the Trainer appended a copy of logs before calling on_log
            state.log_history[-1].update(figures)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tracker.stop()
        if state.is_world_process_zero and state.log_history:  # the step curves, for MLflow and the report
            self.tracker.out_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.tracker.out_dir / LOG_HISTORY, json.dumps(state.log_history, indent=0) + "\n")
