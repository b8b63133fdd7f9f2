"""`greentrain search --workers N`: the candidate table split over N processes, merged into the one-process answer.

The space of one search is a list of units (chip type x chip count, search/engine.chip_counts), and each unit's
table is the concatenation, in order, of its tables with tp pinned to each allowed degree (search/space.meshes
enumerates tp outermost): a part is a whole unit, or one (unit, tp) when there are few units per process (parts).
Parts go to a process pool in any order; each process evaluates its part exactly as engine.search evaluates a
unit (engine._evaluate) and reduces each of its blocks as engine.search does (engine.reduce_block: the rows that
can reach the answer, its own top k and its own Pareto front), sending back those rows and, for plots, the
(run time, cost, CO2e) of every feasible row. engine.answer then ranks these rows in the one-process order
(unit, site, tp, row): a global top-k row is in its part's top k, and a global front row is non-dominated within
its part (reduce_block says why).

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
from greentrain.estimate.efficiency import Profile
from greentrain.footprint.site import Site
from greentrain.scenario import Scenario
from greentrain.search.engine import (
    Constraints,
    SearchResult,
    _Block,
    _evaluate,
    answer,
    check_framework_space,
    check_query,
    chip_counts,
    reduce_block,
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
    """One unit (a scenario on one chip count), whole or with tp pinned to one degree (parts): what one process
    evaluates."""

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


# Below this many units per worker process, each unit is split by tensor-parallel degree so the processes share
# the few large units; above it, whole units balance the load, and each is evaluated in one vectorised pass (a
# unit split into its tp parts costs ~10 % more CPU: more, smaller numpy calls, and a reduction per part).
UNITS_PER_WORKER_TO_SPLIT = 8


def parts(scenarios: Sequence[Scenario], space: SearchSpace, cons: Constraints,
          workers: int = 1) -> tuple[tuple[Scenario, ...], list[tuple[int, SearchSpace]]]:
    """The units (each scenario on each of its chip counts) and the parts, (unit, space), in the one-process
    order. With fewer than UNITS_PER_WORKER_TO_SPLIT units per worker, one part per unit and tp degree (a divisor
    of the chip count up to the largest tp, as search/space.meshes); else, and for a pinned tp, one per unit."""
    out: list[tuple[int, SearchSpace]] = []
    units = tuple(with_chips(sc, n) for sc in scenarios for n in chip_counts(sc, cons.max_chips))
    split = len(units) < UNITS_PER_WORKER_TO_SPLIT * workers
    for u, sc in enumerate(units):
        if space.tp or not split:
            out.append((u, space))
            continue
        max_tp = space.max_tp or sc.cluster.node_size
        out += [(u, dataclasses.replace(space, tp=t)) for t in divisors(sc.cluster.num_chips) if t <= max_tp]
    return units, out


def _run_part(part: _Part) -> _Reduced:
    """Evaluate one part in a worker process (engine._evaluate, as the one-process search does)."""
    sh = _SHARED[0]
    total, blocks = _evaluate(sh.units[part.unit], part.space, sh.sites, sh.constraints, sh.profile)
    reduced = [reduce_block(b, sh.objective, sh.top_k, sh.constraints.tie_tolerance) for b in blocks]
    return _Reduced(index=part.index, unit=part.unit, num_candidates=total, blocks=tuple(b for b, _ in reduced),
                    feasible=tuple(len(b.rows) for b in blocks),
                    points=tuple(p if sh.points else np.zeros((0, 3)) for _, p in reduced))


def _merge(scenarios: Sequence[Scenario], answers: Sequence[_Reduced], *, objective: str, top_k: int,
           space: SearchSpace, cons: Constraints, profile: Profile, t0: float) -> SearchResult:
    """engine.answer over the parts' rows, put back in the one-process order: unit by unit; within a unit site by
    site (engine._evaluate's blocks), each site's tp parts in order."""
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
    units_ = [with_chips(sc, n) for sc in scenarios for n in chip_counts(sc, cons.max_chips)]
    return answer(scenarios, units_, blocks, points, feasible=feasible,
                  total=sum(a.num_candidates for a in ordered), objective=objective, top_k=top_k, space=space,
                  cons=cons, profile=profile, t0=t0)


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
    check_query(objective, top_k)
    cons, space, profile = constraints or Constraints(), space or SearchSpace(), profile or Profile()
    if scenarios:
        check_framework_space(space, profile, scenarios[0])
        if "tp" not in profile.for_chip(scenarios[0].cluster.chip.name).parallelisms:
            space = dataclasses.replace(space, tp=1)  # one part per unit: the framework has no tp to split by
    t0 = time.perf_counter()
    units, split = parts(scenarios, space, cons, workers)
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
