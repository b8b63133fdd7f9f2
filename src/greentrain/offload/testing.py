"""Device-memory accounting for the executor on a machine without a GPU (design/offload.md section 6).

``DeviceBytes`` is a ``TorchDispatchMode`` that counts the live storages that ops create on the "device"
(outputs of every op run under it, deduplicated per storage, released when the storage is freed) and fails at
once, naming the op, when the count crosses the cap. Host-side work (copies into host buffers, the host
optimizer) runs inside ``host()`` and is not counted. On CUDA it counts CUDA storages only.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from greentrain.errors import GreentrainError


class DeviceCapExceeded(GreentrainError):
    """An op took the accounted device memory over the cap."""


class DeviceBytes(TorchDispatchMode):
    def __init__(self, cap_bytes: float, device: torch.device | str = "cpu") -> None:
        super().__init__()
        self.cap_bytes = float(cap_bytes)
        self.device = torch.device(device)
        self.live_bytes = 0
        self.peak_bytes = 0
        self._seen: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._host_depth = 0

    @contextlib.contextmanager
    def host(self) -> Iterator[None]:
        """Allocations and copies in here are host memory."""
        self._host_depth += 1
        try:
            yield
        finally:
            self._host_depth -= 1

    def exclude(self, t: torch.Tensor) -> None:
        """The executor accounts this storage itself (weights resized in place; ``add``/``remove``)."""
        self._seen[t.untyped_storage()] = 0

    def add(self, nbytes: int, what: object) -> None:
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        if self.live_bytes > self.cap_bytes:
            raise DeviceCapExceeded(f"device memory cap crossed by {what}: {self.live_bytes:,} bytes live, cap "
                                    f"{int(self.cap_bytes):,}")

    def remove(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def _free(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def _count(self, t: torch.Tensor, what: object) -> None:
        if t.device.type != self.device.type or t.device.type == "meta":
            return
        st = t.untyped_storage()
        if st in self._seen:
            return
        nbytes = int(st.nbytes())
        self._seen[st] = nbytes
        weakref.finalize(st, self._free, nbytes)
        self.add(nbytes, what)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self._host_depth == 0:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self._count(t, func)
        return out
