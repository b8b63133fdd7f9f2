"""Accelerate integration: a ``GeneralTracker`` that measures the run and adds its figures to every
``accelerator.log`` call, so the trackers after it (MLflow, TensorBoard, W&B...) record them too.

    tracker = GreentrainAccelerateTracker(region="fr", model=model)
    accelerator = Accelerator(log_with=[tracker, "mlflow"])   # greentrain first: it adds to the logged dict
    accelerator.init_trackers("my-project")
    ...  # optimizer.step() marks a step (Tracker's step_on_optimizer); accelerator.log({"loss": l}, step=s)
    accelerator.end_training()                               # writes measurement.json, emissions.csv

Accelerate calls its trackers in ``log_with`` order with one dict: the figures (``Tracker.live``:
energy_kwh, emissions_g_co2e, tokens_per_s, flop_per_s, mfu) are added to it in place. The measurement starts at
``init_trackers`` (Accelerate calls ``start``) and ends at
``end_training`` (``finish``). Without ``out_dir`` the outputs go to ``<logging_dir>/greentrain`` when
Accelerate was given a project or logging dir, else ``greentrain-out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelerate.tracking import GeneralTracker
from torch import nn

from greentrain.measure.summary import Measurement
from greentrain.measure.tracker import Tracker


class GreentrainAccelerateTracker(GeneralTracker):
    name = "greentrain"
    requires_logging_directory = False
    main_process_only = False  # every rank measures its own devices; rank 0 writes the outputs

    def __init__(self, run_name: str = "greentrain", *, model: nn.Module | None = None,
                 logging_dir: str | Path | None = None, **tracker_kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        if "out_dir" not in tracker_kwargs and logging_dir is not None:
            tracker_kwargs["out_dir"] = Path(logging_dir) / "greentrain"
        tracker_kwargs.setdefault("step_on_optimizer", True)
        tracker_kwargs.setdefault("project_name", run_name)
        self._model = model
        self._tracker = Tracker(None, **tracker_kwargs)

    @property
    def tracker(self) -> Tracker:
        return self._tracker

    @property
    def measurement(self) -> Measurement | None:
        return self._tracker.measurement

    def _ensure_started(self) -> None:
        if not self._tracker.running and self._tracker.measurement is None:
            self._tracker.start()
            if self._model is not None:
                self._tracker.attach(self._model)

    def start(self) -> None:
        """Called by ``Accelerator.init_trackers``."""
        self._ensure_started()

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        self._ensure_started()

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Add the run's figures so far to ``values`` (the dict Accelerate hands every tracker in turn)."""
        self._ensure_started()
        values.update(self._tracker.live())

    def finish(self) -> None:
        self._tracker.stop()
