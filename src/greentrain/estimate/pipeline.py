"""How the layers are placed on pipeline stages, and which stage sets the pace; over ``float | ndarray``.

Frameworks place layers two ways (efficiency.pipeline_balance):
- "even": as evenly as the count allows, the ends taking the smaller share and the remainder spread over the
  middle stages (Megatron-LM; with the interleaved schedule each stage's layers are then cut into vpp chunks
  as evenly as they allow: Llama 3 405B's 126 layers on pp 16 put 7 on the first and last stage and 8 on the
  others, one layer fewer where the embedding and the head sit, Dubey et al. 2024 §3.3.2);
- "cost": the split that minimises the slowest stage, the embedding on the first stage and the LM head on the
  last counted as what nanotron's static cost table says they cost (models/llama.py get_block_compute_costs:
  a decoder layer 4*heads*d_qkv*h + 3*d_ff*h, the LM head vocab*h, the embedding nothing; block_costs_units);
  the time of each stage then follows from what it holds (Narayanan et al. 2021 §2.2 on balancing).

With costs in units of one layer's time (the embedding ``e`` and the head ``h``), a time T holds
floor(T - e) layers on the first stage, floor(T - h) on the last and floor(T) on each of the pp - 2 others;
the balanced split is the smallest T whose stages hold all L layers. With T0 = (L + e + h) / pp, the answer
lies in [T0, T0 + 1] (or at max(e, h) when an end alone outweighs a stage), so three candidates decide it.
The interleaved schedule (vpp > 1) keeps the even placement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from greentrain.num import ceil, floor, maximum, minimum, where

_EPS = 1e-9  # whole layer counts: floor(8.000001 - 1.000001) is 7, though the float difference is 6.999...


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
    first = floor(maximum(t - e + _EPS, -1.0))
    last = floor(maximum(t - h + _EPS, -1.0))
    ok = first + last + (pp - 2) * floor(t + _EPS) >= layers - _EPS
    return (first >= 0) & (last >= 0) & ok


def _balanced_t(layers: Any, pp: Any, e: Any, h: Any) -> Any:
    """Smallest stage time (in layers) of the cost-balanced placement, pp >= 2."""
    t0 = (layers + e + h) / pp
    low = maximum(e, h)
    best = t0 + 1.0 + low  # always holds
    for c in (ceil(t0 - _EPS), ceil(t0 - e - _EPS) + e, ceil(t0 - h - _EPS) + h, t0 + 1.0, low):
        c = maximum(c, low)
        best = where(_holds(c, layers, pp, e, h) & (c < best), c, best)
    return best


def block_cost_units(*, hidden: float, ffn: float, ffn_matrices: float, vocab: float) -> tuple[float, float]:
    """(embedding, LM head) in units of one decoder layer as nanotron's partitioning weighs them
    (models/llama.py get_block_compute_costs @2411b02): a layer 4*heads*d_qkv*h + 3*d_ff*h with
    d_qkv = h // heads (so 4h^2 whatever the KV heads), the LM head vocab*h, the embedding nothing."""
    layer = 4.0 * hidden * hidden + ffn_matrices * ffn * hidden
    return 0.0, vocab * hidden / layer


def placement(layers: Any, pp: Any, vpp: Any, e: Any, h: Any, balance: str,
              balance_units: tuple[float, float] | None = None) -> Placement:
    """Layers per stage for ``layers`` layers on ``pp`` stages; ``e`` and ``h`` the embedding's and the head's
    time in layers (which stage sets the pace); the "cost" balance places by ``balance_units`` (the
    framework's static costs of the two ends, block_cost_units; default: e and h). Floats in, floats out; or
    columns (ndarray)."""
    L, p, v = layers, pp, vpp
    # floor(L / p) each and the r = L mod p extra layers on the middle stages first (the largest holds one more),
    # then on the first stage (r = p - 1); the last, with the head, keeps floor(L / p)
    base = floor(L / p + _EPS)
    r = L - p * base
    first, mid, last = base + where(r > p - 2 + _EPS, 1.0, 0.0), base + where(r > _EPS, 1.0, 0.0), base
    if balance == "cost":
        be, bh = balance_units if balance_units is not None else (e, h)
        t = _balanced_t(L, maximum(p, 2.0), be, bh)
        c_last = minimum(floor(t - bh + _EPS), L)
        c_first = minimum(floor(t - be + _EPS), L - c_last)
        c_mid = where(p > 2, ceil((L - c_first - c_last) / maximum(p - 2, 1.0)), 0.0)
        cost_ok = (v == 1) & (p > 1)
        first, mid, last = where(cost_ok, c_first, first), where(cost_ok, c_mid, mid), where(cost_ok, c_last, last)
    first = where(p == 1, L, where(p == 2, maximum(first, L - last), first))
    mid = where(p <= 2, 0.0 * L, mid)
    t_first = where(p == 1, L + e + h, first + e)
    t_last = last + h
    slowest = where((t_first >= mid) & (t_first >= t_last), 0, where(mid >= t_last, 1, 2))
    slowest_layers = where(slowest == 0, first, where(slowest == 1, mid, last))
    return Placement(first=first, middle=mid, last=last, slowest=slowest, slowest_layers=slowest_layers)


def given_placement(counts: tuple[int, ...], e: float, h: float) -> Placement:
    """The placement a run pins (Strategy.stage_layers), for one strategy: the stage that sets the pace is the
    slowest with its ends counted; ``middle`` is the largest middle stage."""
    times = [n + (e if i == 0 else 0.0) + (h if i == len(counts) - 1 else 0.0) for i, n in enumerate(counts)]
    if len(counts) == 1:
        return Placement(first=float(counts[0]), middle=0.0, last=float(counts[0]), slowest=0,
                         slowest_layers=float(counts[0]))
    middle = max(counts[1:-1], default=0)
    mid_time = float(middle)
    slowest = 0 if times[0] >= max(mid_time, times[-1]) else (1 if mid_time >= times[-1] else 2)
    layers = {0: counts[0], 1: middle, 2: counts[-1]}[slowest]
    return Placement(first=float(counts[0]), middle=float(middle), last=float(counts[-1]), slowest=slowest,
                     slowest_layers=float(layers))


def end_share(slowest: Any, pp: Any) -> tuple[Any, Any]:
    """(embedding, head) shares (0 or 1) of the stage that sets the pace."""
    emb = where(pp == 1, 1.0, where(slowest == 0, 1.0, 0.0))
    head = where(pp == 1, 1.0, where(slowest == 2, 1.0, 0.0))
    return emb, head

