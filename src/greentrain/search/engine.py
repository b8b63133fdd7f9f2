"""Evaluate the strategy space with the scalar analytical estimator (estimate/run.py) and rank it.

One source of truth: every candidate goes through estimate_run (estimate_step + footprint), which raises
InfeasibleError for strategies that do not divide the model or do not fit in the chip's memory; those are
counted as infeasible. Objectives: run time, cost, operational + embodied CO2e, facility energy.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from greentrain.config import require
from greentrain.errors import InfeasibleError
from greentrain.estimate.run import RunEstimate, estimate_run
from greentrain.footprint.site import Site
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario
from greentrain.search.space import LIGHTEST, SearchSpace, meshes, strategies

OBJECTIVES = ("time", "cost", "co2e", "energy")


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One feasible strategy on one chip type in one region, with the numbers the search ranks by."""

    strategy: Strategy
    chip: str
    region: str
    step_time_s: float
    run_time_s: float
    cost_usd: float
    emissions_kg_co2e: float
    energy_j: float
    memory_bytes: float  # per device
    mfu: float

    def value(self, objective: str) -> float:
        return {"time": self.run_time_s, "cost": self.cost_usd, "co2e": self.emissions_kg_co2e,
                "energy": self.energy_j}[objective]

    def key(self, objective: str) -> tuple[float, float, float]:
        """Rank: the objective, then run time, then memory (ties go to the faster, lighter strategy)."""
        return (self.value(objective), self.run_time_s, self.memory_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    objective: str
    num_candidates: int
    num_feasible: int
    search_time_s: float
    ranked: tuple[Candidate, ...]  # the top k, best first
    pareto: tuple[Candidate, ...]  # non-dominated over (run time, cost, CO2e), by run time


def _candidate(run: RunEstimate) -> Candidate:
    fp = run.footprint
    return Candidate(strategy=run.strategy, chip=run.scenario.cluster.chip.name, region=run.scenario.site.region,
                     step_time_s=run.step.step_time_s, run_time_s=run.run_time_s, cost_usd=fp.cost_usd,
                     emissions_kg_co2e=fp.emissions_kg_co2e, energy_j=fp.energy_j,
                     memory_bytes=run.step.memory.total_bytes, mfu=run.step.mfu)


def pareto_front(cands: Sequence[Candidate]) -> list[Candidate]:
    """Candidates no other candidate beats on all of (run time, cost, CO2e) while strictly beating on one.
    Sweep by run time: a candidate is dominated only by one already on the front (Kung et al. 1975)."""
    front: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (c.run_time_s, c.cost_usd, c.emissions_kg_co2e)):
        p = (c.run_time_s, c.cost_usd, c.emissions_kg_co2e)
        if any(f.cost_usd <= p[1] and f.emissions_kg_co2e <= p[2] for f in front):
            continue  # f is also no slower (sorted), so it dominates c or equals it
        front.append(c)
    return front


def search(scenarios: Sequence[Scenario], *, objective: str = "time", top_k: int = 10,
           space: SearchSpace | None = None, sites: Sequence[Site] = (),
           progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Evaluate every strategy of every scenario (one per chip type) in every site (region); ``progress``
    is called with (done, total) after each strategy. Raises InfeasibleError naming the smallest number of
    chips that would fit when nothing does."""
    require(objective in OBJECTIVES, "--objective", objective, f"must be one of {', '.join(OBJECTIVES)}")
    require(top_k >= 1, "--top", top_k, "must be >= 1")
    t0 = time.perf_counter()
    spaces = [(sc, strategies(sc, space)) for sc in scenarios]
    total = sum(len(s) for _, s in spaces)
    feasible: list[Candidate] = []
    done = 0
    for sc, strats in spaces:
        variants = [dataclasses.replace(sc, site=site) for site in sites] or [sc]
        for s in strats:
            done += 1
            for v in variants:
                try:
                    feasible.append(_candidate(estimate_run(v, s)))
                except InfeasibleError:
                    break  # the step does not depend on the site: infeasible in one, infeasible in all
            if progress is not None:
                progress(done, total)
    if not feasible:
        raise InfeasibleError(_nothing_fits(scenarios, total))
    ranked = heapq.nsmallest(top_k, feasible, key=lambda c: c.key(objective))
    return SearchResult(objective=objective, num_candidates=total * max(1, len(sites)), num_feasible=len(feasible),
                        search_time_s=time.perf_counter() - t0, ranked=tuple(ranked),
                        pareto=tuple(pareto_front(feasible)))


def fits(sc: Scenario, num_chips: int) -> bool:
    """Whether any strategy fits on ``num_chips`` chips: the memory-lightest choices of every mesh suffice
    (ZeRO-3, full recomputation, micro-batch 1, offloaded optimizer use the least device memory)."""
    cl = dataclasses.replace(sc.cluster, num_chips=num_chips)
    sc = dataclasses.replace(sc, cluster=cl)
    for mesh in meshes(sc, LIGHTEST, num_chips):
        s = dataclasses.replace(mesh, zero=3 if mesh.dp * mesh.cp > 1 else 0, recompute="full",
                                offload_optimizer=True)
        try:
            estimate_run(sc, s)
            return True
        except InfeasibleError:
            continue
    return False


def min_chips_to_fit(sc: Scenario, limit: int = 1 << 20) -> int | None:
    """The smallest chip count above the scenario's that fits: doubling finds a count that fits, then the
    node-size multiples (and powers of two below one node) up to it are tried in order."""
    n, node = sc.cluster.num_chips, sc.cluster.node_size
    hi = n * 2
    while hi <= limit and not fits(sc, hi):
        hi *= 2
    if hi > limit:
        return None
    counts = sorted({c for c in range(node, hi + 1, node)}
                    | {1 << i for i in range(hi.bit_length()) if (1 << i) <= node or (1 << i) % node == 0})
    return next(c for c in counts if n < c <= hi and (c == hi or fits(sc, c)))


def _nothing_fits(scenarios: Sequence[Scenario], total: int) -> str:
    parts = []
    for sc in scenarios:
        need = min_chips_to_fit(sc)
        where = f"{sc.cluster.num_chips} x {sc.cluster.chip.name}"
        parts.append(f"{where}: smallest count that fits is {need}" if need else f"{where}: no count up to 2^20 fits")
    return (f"none of the {total} strategies fits {scenarios[0].model.name}; " + "; ".join(parts))
