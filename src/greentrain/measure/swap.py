"""Run a module's forward through another backend (seed 000's custom-forward decorator), and measure the
time and energy difference against the original forward.

A backend is ``"eager"`` (the original), ``"compile"`` (``torch.compile``) or a function that takes the
original forward and returns a replacement (``torch.compile`` itself has that shape).
"""

from __future__ import annotations

import functools
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.measure.meters import EnergyMeter, default_meters

Backend = str | Callable[[Callable[..., Any]], Callable[..., Any]]


def resolve_backend(backend: Backend) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    if callable(backend):
        return backend
    if backend == "eager":
        return lambda f: f
    if backend == "compile":
        return lambda f: torch.compile(f)
    raise ConfigError("backend", backend, "must be 'eager', 'compile' or a function(forward) -> forward")


def _sync(module: nn.Module | None) -> None:
    if torch.cuda.is_available() and module is not None and any(p.is_cuda for p in module.parameters()):
        torch.cuda.synchronize()


@dataclass(slots=True)
class ForwardStats:
    """Calls and wall time of a swapped forward (accumulated while it runs)."""

    calls: int = 0
    time_s: float = 0.0


def custom_forward(backend: Backend) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: ``@custom_forward("compile") def forward(self, x): ...``; ``forward.stats`` holds the time."""
    convert = resolve_backend(backend)

    def decorate(original_forward: Callable[..., Any]) -> Callable[..., Any]:
        swapped = convert(original_forward)
        stats = ForwardStats()

        @functools.wraps(original_forward)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            owner = args[0] if args and isinstance(args[0], nn.Module) else None
            t = time.perf_counter()
            out = swapped(*args, **kwargs)
            _sync(owner)
            stats.calls += 1
            stats.time_s += time.perf_counter() - t
            return out

        wrapper.stats = stats  # type: ignore[attr-defined]
        return wrapper

    return decorate


@dataclass(slots=True)
class SwapHandle:
    module: nn.Module
    stats: ForwardStats

    def restore(self) -> None:
        """Put the original forward back."""
        if "forward" in self.module.__dict__:
            del self.module.forward


def swap_forward(module: nn.Module, backend: Backend) -> SwapHandle:
    """Replace ``module.forward`` (on this instance) by the backend's version; ``restore()`` undoes it."""
    require(isinstance(module, nn.Module), "module", type(module).__name__, "must be a torch.nn.Module")
    if "forward" in module.__dict__:
        raise ConfigError("module", type(module).__name__, "forward is already swapped; restore() it first")
    original = module.forward  # bound method of the class
    wrapped = custom_forward(backend)(original)
    module.forward = wrapped
    return SwapHandle(module=module, stats=wrapped.stats)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True, kw_only=True)
class ForwardComparison:
    original_s: float  # median time of one forward
    swapped_s: float
    speedup: float  # original_s / swapped_s
    original_energy_j: float  # energy of one forward (meters' delta over a block / calls)
    swapped_energy_j: float
    energy_measured: bool  # every meter a hardware counter


def _block(fn: Callable[[], Any], module: nn.Module, n: int, meters: Sequence[EnergyMeter]) -> tuple[float, float]:
    e0 = sum(m.read().energy_j for m in meters)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        _sync(module)
        times.append(time.perf_counter() - t)
    return statistics.median(times), (sum(m.read().energy_j for m in meters) - e0) / n


def compare_forward(module: nn.Module, backend: Backend, *args: Any, repeat: int = 20, rounds: int = 3,
                    meters: Sequence[EnergyMeter] | None = None, **kwargs: Any) -> ForwardComparison:
    """Time and energy of one forward, original against ``backend``, interleaved in ``rounds`` blocks."""
    require(repeat >= 1, "repeat", repeat, "must be >= 1")
    require(rounds >= 1, "rounds", rounds, "must be >= 1")
    meters = list(meters) if meters is not None else default_meters(os.getpid())
    swapped = resolve_backend(backend)(module.forward)
    with torch.no_grad():
        swapped(*args, **kwargs)  # warm-up (compilation happens here)
        module(*args, **kwargs)
        res: dict[str, list[tuple[float, float]]] = {"orig": [], "swap": []}
        for _ in range(rounds):
            res["orig"].append(_block(lambda: module(*args, **kwargs), module, repeat, meters))
            res["swap"].append(_block(lambda: swapped(*args, **kwargs), module, repeat, meters))
    o_t = statistics.median(x[0] for x in res["orig"])
    s_t = statistics.median(x[0] for x in res["swap"])
    return ForwardComparison(original_s=o_t, swapped_s=s_t, speedup=o_t / s_t if s_t > 0 else float("inf"),
                             original_energy_j=statistics.median(x[1] for x in res["orig"]),
                             swapped_energy_j=statistics.median(x[1] for x in res["swap"]),
                             energy_measured=all(m.read().measured for m in meters))
