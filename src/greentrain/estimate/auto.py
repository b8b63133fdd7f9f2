"""The planner's own choice of strategy when none is given (until `greentrain search` replaces it).

Heuristic, in the spirit of Megatron-LM's and torchtitan's recipes: tensor parallelism stays inside a node
(tp in 1, 2, 4, 8 up to the node size) with sequence parallelism whenever tp > 1; pipeline parallelism only
as deep as needed (pp dividing the layers, up to 16); ZeRO-1 (distributed optimizer); flash attention;
recomputation none, selective or full; micro-batches 1, 2, 4, 8. Every candidate is estimated and the
fastest one that fits wins (ties: less memory). Expert parallelism for MoE models: the largest ep that
divides both the experts and dp.
"""

from __future__ import annotations

import itertools

from greentrain.errors import InfeasibleError
from greentrain.estimate.step import StepEstimate, estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario

TP_CHOICES = (1, 2, 4, 8)
PP_CHOICES = (1, 2, 4, 8, 16)
MICRO_BATCHES = (1, 2, 4, 8)
RECOMPUTE = ("none", "selective", "full")


def candidates(sc: Scenario) -> list[Strategy]:
    n, node = sc.cluster.num_chips, sc.cluster.node_size
    out: list[Strategy] = []
    for tp, pp, mb, rec in itertools.product(TP_CHOICES, PP_CHOICES, MICRO_BATCHES, RECOMPUTE):
        if tp > node or n % (tp * pp) or sc.model.total_layers % pp:
            continue
        dp = n // (tp * pp)
        ep = 1
        if sc.model.is_moe:
            ep = max(e for e in range(1, dp + 1) if dp % e == 0 and sc.model.num_experts % e == 0)
        out.append(Strategy(dp=dp, tp=tp, pp=pp, ep=ep, sp=tp > 1, zero=1 if dp > 1 else 0, recompute=rec,
                            micro_batch_size=mb))
    return out


def choose_strategy(sc: Scenario) -> tuple[Strategy, StepEstimate]:
    """The fastest feasible candidate; InfeasibleError with the closest miss when none fits."""
    best: tuple[float, float, Strategy, StepEstimate] | None = None
    smallest_short: InfeasibleError | None = None
    for s in candidates(sc):
        try:
            est = estimate_step(sc, s)
        except InfeasibleError as e:
            if e.shortfall_bytes is not None and (smallest_short is None or
                                                  e.shortfall_bytes < (smallest_short.shortfall_bytes or 0)):
                smallest_short = e
            continue
        key = (est.step_time_s, est.memory.total_bytes)
        if best is None or key < best[:2]:
            best = (*key, s, est)
    if best is None:
        why = f"; closest: {smallest_short}" if smallest_short else ""
        raise InfeasibleError(f"no strategy of the planner's heuristic fits {sc.model.name} on "
                              f"{sc.cluster.num_chips} x {sc.cluster.chip.name}{why}")
    return best[2], best[3]
