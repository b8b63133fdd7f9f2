"""`greentrain search --workers N`: the candidate table split over N processes, merged into the one-process answer.

The space of one search is a list of units (chip type x chip count, search/engine.chip_counts), and each unit's
table is the concatenation, in order, of its tables with tp pinned to each allowed degree (search/space.meshes
enumerates tp outermost): a part is one (unit, tp). Parts go to a process pool in any order; each process
evaluates its part exactly as engine.search evaluates a unit (engine._evaluate) and sends back, per site, only
the rows that can reach the answer: its own top k by (objective, run time, memory) and its own Pareto front
over (run time, cost, CO2e) with memory as tiebreak, plus the (run time, cost, CO2e) of every feasible row for
plots. Ranking and front are then computed on these rows in the one-process order (unit, site, tp, row):

- a global top-k row is in its part's top k (within a part the order is the global one, restricted), and
  np.lexsort is stable, so ties fall the same way;
- a global front row is non-dominated within its part, and of equal points the one that survives globally
  (least memory, then first in order) survives in its part too; dominance is transitive.

So rankings, fronts, counts and points are those of engine.search with the same arguments (the test compares
them field by field). Only the wall time differs; parts are independent, so N idle cores give close to N times
the candidates per second once a search is long enough to amortise starting the processes (BENCHMARKS.md).
"""

from __future__ import annotations

import dataclasses
import errno
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from greentrain.config import require
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.efficiency import Profile
from greentrain.footprint.site import Site
from greentrain.scenario import Scenario
from greentrain.search.engine import (
    _COLUMNS,
    OBJECTIVE_COLUMNS,
    OBJECTIVES,
    Constraints,
    SearchResult,
    _Block,
    _candidate,
    _cost_bases,
    _evaluate,
    _nothing_fits,
    _tie_keys,
    check_framework_space,
    chip_counts,
    first_in_order,
    pareto_mask,
    search,
)
from greentrain.search.feasibility import with_chips
from greentrain.search.space import SearchSpace, divisors

MAX_WORKERS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shared:
    """What every part of one search shares: sent to each worker process once (its initializer), not with each
    part, so the parts of one unit evaluated in one process share one scenario object and the estimator's
    caches keyed by identity (compute peaks, op lists, kernel tables) hit from part to part, as in one process."""

    units: tuple[Scenario, ...]  # a scenario on each chip count, in the one-process order
    sites: tuple[Site, ...]
    constraints: Constraints
    profile: Profile
    objective: str
    top_k: int
    points: bool  # send every feasible row's (run time, cost, CO2e) back (for plots)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    """One unit (a scenario on one chip count) with tp pinned to one degree: what one process evaluates."""

    index: int  # position in the one-process order
    unit: int
    space: SearchSpace


_SHARED: list[_Shared] = []  # in a worker process: the search it serves (_share)


def _share(shared: _Shared) -> None:
    """A worker process's initializer: keep the search's shared inputs."""
    _SHARED[:] = [shared]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Reduced:
    """A part's answer: candidates evaluated, and per site the rows that can reach the answer and every
    feasible row's (run time s, cost USD, kg CO2e)."""

    index: int
    unit: int
    num_candidates: int
    blocks: tuple[_Block, ...]
    feasible: tuple[int, ...]  # per block
    points: tuple[npt.NDArray[np.float64], ...]  # per block; empty unless the part was asked for them


def parts(scenarios: Sequence[Scenario], space: SearchSpace,
          cons: Constraints) -> tuple[tuple[Scenario, ...], list[tuple[int, SearchSpace]]]:
    """The units (each scenario on each of its chip counts) and the parts, (unit, space with tp pinned), in the
    one-process order. A pinned tp stays one part; otherwise one part per divisor of the chip count up to the
    largest tp (as search/space.meshes)."""
    out: list[tuple[int, SearchSpace]] = []
    units = tuple(with_chips(sc, n) for sc in scenarios for n in chip_counts(sc, cons.max_chips))
    for u, sc in enumerate(units):
        if space.tp:
            out.append((u, space))
            continue
        max_tp = space.max_tp or sc.cluster.node_size
        out += [(u, dataclasses.replace(space, tp=t)) for t in divisors(sc.cluster.num_chips) if t <= max_tp]
    return units, out


def _reduce(block: _Block, objective: str, top_k: int, tolerance: float) -> tuple[_Block, npt.NDArray[np.float64]]:
    """The block's rows that can be in the answer, in their order, and its points. The ranking puts the rows
    within ``tolerance`` of the best objective first (engine._tie_keys): the global best is at most this
    block's, so every row of the block the answer may call a tie has an objective within ``tolerance`` of
    the block's best; the others rank by (objective, run time, memory). The block's first rows in that order,
    its ties and then ``top_k`` more, hold every row of the block the ranking can reach; the front adds its
    own (pareto_mask with memory as tiebreak)."""
    v = block.values
    n = len(block.rows)
    points = np.stack([v["run_time_s"], v["cost_usd"], v["emissions_kg_co2e"]], axis=1)
    value = v[OBJECTIVE_COLUMNS[objective]]
    ties = int(np.count_nonzero(value <= float(np.min(value)) * (1.0 + tolerance))) if n and tolerance > 0 else 0
    best = first_in_order(np.arange(n), (v["memory_bytes"], v["run_time_s"], value), ties + top_k)
    keep = np.union1d(best, np.flatnonzero(pareto_mask(points, v["memory_bytes"])))  # sorted: the block's order
    small = dataclasses.replace(block, table=block.table.take(block.rows[keep]), rows=np.arange(len(keep)),
                                values={k: a[keep] for k, a in v.items()})
    return small, points


def _run_part(part: _Part) -> _Reduced:
    """Evaluate one part in a worker process (engine._evaluate, as the one-process search does)."""
    sh = _SHARED[0]
    total, blocks = _evaluate(sh.units[part.unit], part.space, sh.sites, sh.constraints, sh.profile)
    reduced = [_reduce(b, sh.objective, sh.top_k, sh.constraints.tie_tolerance) for b in blocks]
    return _Reduced(index=part.index, unit=part.unit, num_candidates=total, blocks=tuple(b for b, _ in reduced),
                    feasible=tuple(len(b.rows) for b in blocks),
                    points=tuple(p if sh.points else np.zeros((0, 3)) for _, p in reduced))


def _merge(scenarios: Sequence[Scenario], answers: Sequence[_Reduced], *, objective: str, top_k: int,
           space: SearchSpace, cons: Constraints, profile: Profile, t0: float) -> SearchResult:
    """engine.search's ranking and front over the parts' rows, put back in the one-process order: unit by
    unit; within a unit site by site (engine._evaluate's blocks), each site's tp parts in order."""
    ordered = sorted(answers, key=lambda a: a.index)
    blocks: list[_Block] = []
    points: list[npt.NDArray[np.float64]] = []
    feasible = 0
    for u in dict.fromkeys(a.unit for a in ordered):
        mine = [a for a in ordered if a.unit == u and a.blocks]  # no blocks: the framework runs no such ZeRO
        for s in range(len(mine[0].blocks) if mine else 0):
            blocks += [a.blocks[s] for a in mine]
            points += [a.points[s] for a in mine]
            feasible += sum(a.feasible[s] for a in mine)
    total = sum(a.num_candidates for a in ordered)
    if not blocks:  # the framework runs none of the ZeRO stages asked for
        stages = ", ".join(map(str, profile.for_chip(scenarios[0].cluster.chip.name).zero_stages))
        raise ConfigError("strategy.zero", ", ".join(map(str, space.zero)),
                          f"the {profile.framework} framework runs ZeRO stages {stages}")
    num_feasible = feasible
    if not num_feasible:
        units_ = [with_chips(sc, n) for sc in scenarios for n in chip_counts(sc, cons.max_chips)]
        raise InfeasibleError(_nothing_fits(scenarios, units_, total, space, cons, profile))
    cols = {k: np.concatenate([b.values[k] for b in blocks]) for k in _COLUMNS}
    owner = np.concatenate([np.full(len(b.rows), i) for i, b in enumerate(blocks)])
    local = np.concatenate([np.arange(len(b.rows)) for b in blocks])
    value = cols[OBJECTIVE_COLUMNS[objective]]
    comparable, notes = _cost_bases(blocks, owner, objective)
    candidates = np.flatnonzero(comparable) if objective == "cost" else np.arange(len(value))
    best = first_in_order(candidates, _tie_keys(cols, value, candidates, cons.tie_tolerance), top_k)
    kept = np.stack([cols["run_time_s"], cols["cost_usd"], cols["emissions_kg_co2e"]], axis=1)
    rows = np.flatnonzero(comparable)  # the front's cost axis compares like with like (engine._cost_bases)
    front = rows[pareto_mask(kept[rows], cols["memory_bytes"][rows])]
    front = front[np.argsort(kept[front, 0], kind="stable")]
    return SearchResult(objective=objective, num_candidates=total, num_feasible=num_feasible,
                        search_time_s=time.perf_counter() - t0,
                        ranked=tuple(_candidate(blocks[owner[i]], local[i]) for i in best),
                        pareto=tuple(_candidate(blocks[owner[i]], local[i]) for i in front),
                        points=np.concatenate(points), notes=notes)


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _pool(processes: int, shared: _Shared) -> ProcessPoolExecutor:
    """Worker processes started by fork when this process runs one thread (the quickest start: nothing to
    import again), else from a fork server that imported this module once (a thread of the caller, such as a
    progress bar's, holding a lock would be copied into forked workers with its lock held).

    concurrent.futures, not multiprocessing.Pool: a worker that dies (the OOM killer, a signal, a failed import
    in the fork server) breaks the executor and the search stops with one line; Pool starts a new worker and
    waits for the lost part's answer for ever. Each worker keeps ``shared`` (_share), received once."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return ProcessPoolExecutor(processes, multiprocessing.get_context("fork"), _share, (shared,))
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload([__name__])
    return ProcessPoolExecutor(processes, ctx, _share, (shared,))


def search_parallel(scenarios: Sequence[Scenario], *, workers: int, objective: str = "time", top_k: int = 10,
                    space: SearchSpace | None = None, sites: Sequence[Site] = (),
                    constraints: Constraints | None = None, progress: Callable[[int, int], None] | None = None,
                    profile: Profile | None = None, points: bool = True) -> SearchResult:
    """engine.search over ``workers`` processes: the same result (rankings, front, counts, points, notes);
    ``progress`` is called with (parts done, parts) as parts finish. One worker is engine.search itself.
    ``points=False``: ``result.points`` is left empty (it is only drawn by --plot): the workers then send
    back only the rows that can reach the answer, not 24 bytes per feasible candidate."""
    require(1 <= workers <= MAX_WORKERS, "search.workers", workers, f"must be between 1 and {MAX_WORKERS:,}")
    if workers == 1:
        return search(scenarios, objective=objective, top_k=top_k, space=space, sites=sites,
                      constraints=constraints, progress=progress, profile=profile)
    require(objective in OBJECTIVES, "search.objective", objective, f"must be one of {', '.join(OBJECTIVES)}")
    require(top_k >= 1, "search.top_k", top_k, "must be >= 1")
    cons, space, profile = constraints or Constraints(), space or SearchSpace(), profile or Profile()
    if scenarios:
        check_framework_space(space, profile, scenarios[0])
        if "tp" not in profile.for_chip(scenarios[0].cluster.chip.name).parallelisms:
            space = dataclasses.replace(space, tp=1)  # one part per unit: the framework has no tp to split by
    t0 = time.perf_counter()
    units, split = parts(scenarios, space, cons)
    todo = [_Part(index=i, unit=u, space=sp) for i, (u, sp) in enumerate(split)]
    shared = _Shared(units=units, sites=tuple(sites), constraints=cons, profile=profile, objective=objective,
                     top_k=top_k, points=points)
    answers = []
    with _pool(min(workers, len(todo)), shared) as pool:
        try:
            for done, future in enumerate(as_completed([pool.submit(_run_part, part) for part in todo]), 1):
                answers.append(future.result())
                if progress is not None:
                    progress(done, len(todo))
        except BrokenProcessPool:
            raise ChildProcessError(errno.ECHILD, f"a search worker process died before it answered (killed by the "
                                    f"system, often for memory): run again with fewer than {workers} workers") from None
    return _merge(scenarios, answers, objective=objective, top_k=top_k, space=space, cons=cons, profile=profile,
                  t0=t0)
