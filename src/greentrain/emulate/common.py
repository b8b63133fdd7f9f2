"""Helpers shared by the emulated ops: deterministic inputs, the reference check, the timed region."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist


def random_tensor(gen: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """Standard-normal float32 on the CPU; every rank draws the same numbers from the same seed."""
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * scale


def generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


@dataclass(slots=True)
class Checker:
    """Worst error of a rank's outputs and gradients against the single-process float32 reference."""

    max_abs_error: float = 0.0
    max_rel_error: float = 0.0

    def compare(self, out: torch.Tensor, ref: torch.Tensor) -> None:
        assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
        # one temporary of out's size (abs in place) and none for the scale: 64 MiB tensors at the seed's sizes
        err = (out.detach().cpu().float() - ref.detach().cpu().float()).abs_().max().item()
        low, high = torch.aminmax(ref.detach())
        scale = max(-low.item(), high.item())
        self.max_abs_error = max(self.max_abs_error, err)
        self.max_rel_error = max(self.max_rel_error, err / scale if scale > 0 else err)


def timed(device: torch.device, fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, float]:
    """Run ``fn`` after a barrier (all ranks start together); its wall time on this rank."""
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return out, time.perf_counter() - start
