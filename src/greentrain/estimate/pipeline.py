"""How the layers are placed on pipeline stages, and which stage sets the pace; over ``float | ndarray``.

Frameworks place layers two ways (efficiency.pipeline_balance):
- "even": as evenly as the count allows, the remainder on the middle stages (Megatron-LM; uneven first and
  last stages as Llama 3 405B used them, Dubey et al. 2024 §3.3.2, are "cost" placements of a heavy end);
- "cost": the split that minimises the slowest stage, the embedding on the first stage and the LM head
  (with its loss) on the last counted as what they cost (nanotron's `get_block_compute_costs` and pipeline
  partitioning; Narayanan et al. 2021 §2.2 on balancing).

With costs in units of one layer's time (the embedding ``e`` and the head ``h``), a time T holds
floor(T - e) layers on the first stage, floor(T - h) on the last and floor(T) on each of the pp - 2 others;
the balanced split is the smallest T whose stages hold all L layers. With T0 = (L + e + h) / pp, the answer
lies in [T0, T0 + 1] (or at max(e, h) when an end alone outweighs a stage), so three candidates decide it.
The interleaved schedule (vpp > 1) keeps the even placement of whole chunks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from greentrain.estimate.step_terms import where

PIPELINE_BALANCE = ("even", "cost")


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Layers of the first, a middle and the last stage (the middle count is the largest middle stage), and
    which stage sets the pace: 0 first, 1 middle, 2 last (pp = 1: one stage, all layers, both ends)."""

    first: Any
    middle: Any
    last: Any
    slowest: Any  # 0, 1 or 2
    slowest_layers: Any


def _holds(t: Any, layers: Any, pp: Any, e: Any, h: Any) -> Any:
    first = np.floor(np.maximum(t - e, -1.0))
    last = np.floor(np.maximum(t - h, -1.0))
    return (first >= 0) & (last >= 0) & (first + last + (pp - 2) * np.floor(t) >= layers - 1e-9)


def _balanced_t(layers: Any, pp: Any, e: Any, h: Any) -> Any:
    """Smallest stage time (in layers) of the cost-balanced placement, pp >= 2."""
    t0 = (layers + e + h) / pp
    cands = [np.ceil(t0 - 1e-9), np.ceil(t0 - e - 1e-9) + e, np.ceil(t0 - h - 1e-9) + h, t0 + 1.0,
             np.maximum(e, h)]
    best = np.full(np.shape(t0), np.inf)
    for c in cands:
        c = np.maximum(c, np.maximum(e, h))
        best = np.where(_holds(c, layers, pp, e, h) & (c < best), c, best)
    return best


def placement(layers: Any, pp: Any, vpp: Any, e: Any, h: Any, balance: str) -> Placement:
    """Layers per stage for ``layers`` layers on ``pp`` stages; ``e`` and ``h`` the embedding's and the head's
    cost in layers (only the "cost" balance uses them)."""
    scalar = all(np.ndim(x) == 0 for x in (layers, pp, vpp, e, h))
    L, p, v = (np.asarray(x, dtype=np.float64) for x in (layers, pp, vpp))
    ee, hh = np.asarray(e, dtype=np.float64), np.asarray(h, dtype=np.float64)
    even_mid = np.ceil(L / (p * v)) * v
    even_end = np.floor(L / (p * v)) * v  # the ends take the smaller share of an uneven count
    if balance == "cost":
        t = _balanced_t(L, np.maximum(p, 2.0), ee, hh)
        last = np.minimum(np.floor(t - hh), L)
        first = np.minimum(np.floor(t - ee), L - last)
        rest = L - first - last
        mid = np.where(p > 2, np.ceil(rest / np.maximum(p - 2, 1.0)), 0.0)
        cost_ok = (v == 1) & (p > 1)
        first, mid, last = (np.where(cost_ok, a, b) for a, b in ((first, even_end), (mid, even_mid),
                                                                 (last, even_end)))
    else:
        first, mid, last = even_end, even_mid, even_end
    first = np.where(p == 1, L, np.where(p == 2, np.maximum(first, L - last), first))
    mid = np.where(p <= 2, 0.0, mid)
    times = np.stack(np.broadcast_arrays(first + ee, mid, last + hh))
    times[0] = np.where(p == 1, L + ee + hh, times[0])
    slowest = np.argmax(times, axis=0)
    counts = np.stack(np.broadcast_arrays(first, mid, last))
    slowest_layers = np.take_along_axis(counts, slowest[None], axis=0)[0]
    if scalar:
        return Placement(first=float(first), middle=float(mid), last=float(last), slowest=int(slowest),
                         slowest_layers=float(slowest_layers))
    return Placement(first=first, middle=mid, last=last, slowest=slowest, slowest_layers=slowest_layers)


def end_share(slowest: Any, pp: Any) -> tuple[Any, Any]:
    """(embedding, head) shares (0 or 1) of the stage that sets the pace."""
    emb = where(pp == 1, 1.0, where(slowest == 0, 1.0, 0.0))
    head = where(pp == 1, 1.0, where(slowest == 2, 1.0, 0.0))
    return emb, head

