"""GPU utilisation of a variant's training phase from NVML (no torch): the seed's "GPU, CPU (utilization %)".

NVML's ``nvmlDeviceGetUtilizationRates(handle).gpu`` is the percent of the last sample period (1/6 s to 1 s, by
product) during which a kernel ran on the GPU (NVML API reference, nvmlUtilization_t). A background thread reads
it every ``interval_s`` for the GPU the run uses; ``stop`` takes one last reading and returns the mean. Without
``pynvml`` or a usable GPU the sampler reads nothing and ``stop`` returns None: the result then carries the CPU's
utilisation (the Tracker's CPU seconds of the process tree), labelled as such.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from greentrain.measure.meters import visible_gpu_indices

DEFAULT_INTERVAL_S = 0.5


class GpuUtilizationSampler:
    """Mean NVML GPU utilisation (%) of one GPU over a window: ``start()``, then ``stop()`` -> mean or None."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.samples_percent: list[float] = []
        self._nvml: Any = None
        self._handle: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _open(self) -> bool:
        try:
            import pynvml
        except ImportError:
            return False
        try:
            pynvml.nvmlInit()
        except Exception:  # no driver, no GPU: nothing to sample
            return False
        try:
            index = (visible_gpu_indices() or [0])[0]  # cuda:0 of this process
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
            self.sample()  # NotSupported (some vGPUs) fails here, not in the thread
            return True
        except Exception:  # no handle or NotSupported
            self._nvml = None
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return False

    def sample(self) -> None:
        """Append one reading (percent)."""
        self.samples_percent.append(float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))

    def start(self) -> GpuUtilizationSampler:
        if self._open():
            self._thread = threading.Thread(target=self._loop, name="greentrain-gpu-util", daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            with contextlib.suppress(Exception):  # a failed reading is a missing sample, not a failed run
                self.sample()

    def stop(self) -> float | None:
        """Stop sampling; the mean utilisation in percent, or None when NVML gave no reading."""
        if self._nvml is None:
            return None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(Exception):
            self.sample()
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()
        self._nvml = None
        return sum(self.samples_percent) / len(self.samples_percent) if self.samples_percent else None
