"""Evaluate the strategy space with the vectorised estimator (estimate/vector.py) and rank it.

For each chip type and chip count the whole space (search/space.py) is one StrategyTable; estimate_steps
prunes what does not fit (the memory headroom lowers the capacity) and times the rest; footprint_arrays
gives energy, CO2e and cost in each site. Budget and deadline are filters on the result. Objectives: run
time, cost, operational + embodied CO2e, facility energy; ties go to the faster, then lighter strategy.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from greentrain import units
from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.efficiency import Profile
from greentrain.estimate.vector import estimate_steps
from greentrain.footprint.model import footprint_arrays
from greentrain.footprint.prices import device_price_usd_per_s
from greentrain.footprint.site import Site
from greentrain.hardware.cluster import MAX_CHIPS
from greentrain.parallel.strategy import Strategy
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import Scenario
from greentrain.search.feasibility import framework_space, nothing_fits_message, with_chips
from greentrain.search.space import SearchSpace, table

# Each objective and the Candidate field (and result column) it ranks by.
OBJECTIVE_COLUMNS = {"time": "run_time_s", "cost": "cost_usd", "co2e": "emissions_kg_co2e", "energy": "energy_j"}
OBJECTIVES = tuple(OBJECTIVE_COLUMNS)
# A planner that leaves room. Real runs avoid picks at 99 % of memory (allocator fragmentation, NCCL buffers
# that grow with the communicators, a longer sequence in the data): by default the search keeps 5 % of each
# device's memory free (--memory-headroom changes it). And it does not trust its most optimistic answer:
# candidates whose objective is within TIE_TOLERANCE of the best are ties to the model's own error (mean
# |error| 2 % on Korthikanti Table 5, 3-9 % on the validated frameworks: docs/validation.md), and among ties
# the one with the most free memory ranks first (then the one with the least CO2e).
DEFAULT_MEMORY_HEADROOM = 0.05
MAX_TOP_K = 10**6  # rows of a ranked table: far more than anyone reads (the Pareto front and --plot show the rest)
TIE_TOLERANCE = 0.03
_COLUMNS = ("run_time_s", "cost_usd", "emissions_kg_co2e", "energy_j", "step_time_s", "memory_bytes", "mfu",
            "offload")


@dataclass(frozen=True, slots=True, kw_only=True)
class Constraints:
    """Limits on the answer. 0 means no limit (max_chips 0: exactly the scenario's chip count)."""

    max_chips: int = 0  # also try every power of two below it (and itself): how many chips to use
    memory_headroom: float = DEFAULT_MEMORY_HEADROOM  # fraction of each device's memory left free
    tie_tolerance: float = TIE_TOLERANCE  # objectives within this fraction of the best are ties (most memory free wins)
    budget_usd: float = 0.0
    deadline_s: float = 0.0

    def __post_init__(self) -> None:
        require(0 <= self.max_chips <= MAX_CHIPS, "constraints.max_chips", self.max_chips,
                f"must be between 0 (the scenario's chip count) and {MAX_CHIPS:,}")
        require(0.0 <= self.memory_headroom < 1.0, "constraints.memory_headroom", self.memory_headroom,
                "must be in [0, 1)")
        require(0.0 <= self.tie_tolerance < 1.0, "constraints.tie_tolerance", self.tie_tolerance, "must be in [0, 1)")
        for value, kind, name in ((self.budget_usd, "budget_usd", "budget_usd"),
                                  (self.deadline_s, "duration_s", "deadline_s")):
            if value != 0:  # 0: no limit
                BOUNDS[kind].check(value, f"constraints.{name}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One feasible strategy on one chip type and count in one region, with the numbers the search ranks by."""

    strategy: Strategy
    chip: str
    num_chips: int
    region: str
    step_time_s: float
    run_time_s: float
    cost_usd: float
    emissions_kg_co2e: float
    energy_j: float
    memory_bytes: float  # per device
    mfu: float
    cost_basis: str = "cloud"  # "cloud": the region's instance or catalog price; "electricity": energy only

    def value(self, objective: str) -> float:
        value: float = getattr(self, OBJECTIVE_COLUMNS[objective])
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    objective: str
    num_candidates: int
    num_feasible: int  # fit in memory and meet the budget and deadline
    search_time_s: float
    ranked: tuple[Candidate, ...]  # the top k, best first
    pareto: tuple[Candidate, ...]  # non-dominated over (run time, cost, CO2e), by run time
    points: npt.NDArray[np.float64]  # (run time s, cost USD, kg CO2e) of every feasible candidate, for plots
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Block:
    """The feasible rows of one (scenario, chip count, site)."""

    scenario: Scenario
    table: StrategyTable
    rows: npt.NDArray[np.int64]
    values: dict[str, npt.NDArray[np.float64]]
    cost_basis: str


def check_query(objective: str, top_k: int) -> None:
    """What a search is asked for: a known objective and a table of 1 to MAX_TOP_K rows."""
    require(objective in OBJECTIVES, "search.objective", objective, f"must be one of {', '.join(OBJECTIVES)}")
    require(1 <= top_k <= MAX_TOP_K, "search.top_k", top_k, f"must be between 1 and {MAX_TOP_K:,}")


def chip_counts(sc: Scenario, max_chips: int) -> list[int]:
    """The scenario's count, or with a maximum every power of two up to it and the maximum itself."""
    if not max_chips:
        return [sc.cluster.num_chips]
    return sorted({1 << i for i in range(max_chips.bit_length()) if (1 << i) <= max_chips} | {max_chips})


def check_framework_space(space: SearchSpace, profile: Profile, sc: Scenario) -> None:
    """Refuse a degree the user pinned on an axis the framework has no parallelism for (efficiency.parallelisms)."""
    eff = profile.for_chip(sc.cluster.chip.name)
    for axis in eff.lacks(tp=space.tp, pp=space.pp, cp=space.cp, ep=space.ep):
        raise ConfigError(f"strategy.{axis}", getattr(space, axis), eff.lacks_message((axis,)))
    # pins that need an axis: model chunks need a pipeline, sequence and expert-tensor parallelism need tp
    needs = {"vpp": (space.vpp > 1, "pp"), "sp": (space.sp is True, "tp"), "etp": ((space.etp or 0) > 1, "tp")}
    for field, (used, axis) in needs.items():
        if used and axis not in eff.parallelisms:
            raise ConfigError(f"strategy.{field}", getattr(space, field), eff.lacks_message((axis,)))
    if False not in space.offload and not eff.optimizer_offload:
        raise ConfigError("strategy.offload_optimizer", True, f"the {profile.framework} framework keeps the "
                          "optimizer states on the device (no optimizer offload)")
    if space.offload_activations and 0 not in space.offload_activations and not eff.activation_offload:
        raise ConfigError("strategy.offload_activations", space.offload_activations[0], f"the {profile.framework} "
                          "framework keeps activations on the device (no activation offload)")


def _evaluate(sc: Scenario, space: SearchSpace, sites: Sequence[Site], cons: Constraints,
              profile: Profile) -> tuple[int, list[_Block]]:
    eff = profile.for_chip(sc.cluster.chip.name)
    runs = framework_space(space, eff)
    if runs is None:
        return 0, []
    t = table(sc, runs)
    capacity = sc.cluster.chip.memory_bytes * (1.0 - cons.memory_headroom)
    st = estimate_steps(sc, t, capacity_bytes=capacity, eff=eff)
    run_s = st.step_time_s * (sc.workload.steps() or 1)
    blocks = []
    for site in sites or [sc.site]:
        quote = device_price_usd_per_s(sc.cluster.chip, site)  # as estimate_run: the region's instance price
        fp = footprint_arrays(num_chips=sc.cluster.num_chips, duration_s=run_s, utilization=st.utilization, site=site,
                              chip=sc.cluster.chip, price_usd_per_device_s=quote.usd_per_device_s if quote else None)
        values = {"run_time_s": run_s, "cost_usd": fp.cost_usd, "emissions_kg_co2e": fp.emissions_kg_co2e,
                  "energy_j": fp.energy_j, "step_time_s": st.step_time_s, "memory_bytes": st.memory_bytes,
                  "mfu": st.mfu,  # how much is offloaded: the optimizer 1, activations their share of the layers
                  "offload": t.offload_optimizer[st.index] + t.offload_activations[st.index] / sc.model.total_layers}
        keep = np.ones(len(run_s), dtype=bool)
        if cons.budget_usd:
            keep &= fp.cost_usd <= cons.budget_usd
        if cons.deadline_s:
            keep &= run_s <= cons.deadline_s
        blocks.append(_Block(scenario=dataclasses.replace(sc, site=site), table=t, rows=st.index[keep],
                             values={k: v[keep] for k, v in values.items()},
                             cost_basis="cloud" if quote is not None else "electricity"))
    return len(t) * max(1, len(sites)), blocks


def first_in_order(rows: npt.NDArray[np.int64], keys: Sequence[npt.NDArray[np.float64]],
                   k: int) -> npt.NDArray[np.int64]:
    """The first ``k`` of ``rows`` sorted as np.lexsort sorts ``keys`` (the last the primary key; ties keep the
    rows' order). Only the rows whose primary key is at most the k-th smallest can be among them: only
    those are sorted."""
    primary = keys[-1][rows]
    if len(rows) > k:
        kth = np.partition(primary, k - 1)[k - 1]
        if not np.isnan(kth):
            rows = rows[primary <= kth]
    return rows[np.lexsort([key[rows] for key in keys])[:k]]


def pareto_mask(points: npt.NDArray[np.float64],
                tiebreak: npt.NDArray[np.float64] | None = None) -> npt.NDArray[np.bool_]:
    """Rows of ``points`` (n x d, lower is better) that no other row beats on every column while strictly
    beating on one. In lexicographic order the first remaining row is never dominated (a row that dominates
    it sorts before it); it joins the front and removes every row it dominates or equals (dominance is
    transitive), so the loop runs once per front member on a shrinking set. Of equal rows the one with the
    smallest ``tiebreak`` stays. The rows that the best row of some column strictly dominates are dropped
    before sorting: they are never on the front, and they sort after the row that dominates them."""
    n, d = points.shape
    front = np.zeros(n, dtype=bool)
    if not n:
        return front
    # column by column: comparing 1-D columns is several times quicker than reducing an n x d array along its rows
    cols = [np.ascontiguousarray(points[:, j]) for j in range(d)]
    rows = np.arange(n)
    for best in {int(np.argmin(c)) for c in cols}:
        q, le, lt = points[best], np.ones(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool)
        for j in range(d):
            c = cols[j][rows]
            le &= q[j] <= c
            lt |= q[j] < c
        rows = rows[~(le & lt)]
    keys = [c[rows] for c in cols[::-1]]
    idx = rows[np.lexsort(keys if tiebreak is None else [tiebreak[rows], *keys])]
    while idx.size:
        i, idx = idx[0], idx[1:]
        front[i] = True
        covered = np.ones(len(idx), dtype=bool)  # rows i dominates or equals (a NaN compares as neither)
        for j in range(d):
            covered &= points[i, j] <= cols[j][idx]
        idx = idx[~covered]
    return front


def _candidate(b: _Block, j: int) -> Candidate:
    sc, v = b.scenario, b.values
    return Candidate(strategy=b.table.row(int(b.rows[j])), chip=sc.cluster.chip.name, num_chips=sc.cluster.num_chips,
                     region=sc.site.region, step_time_s=float(v["step_time_s"][j]),
                     run_time_s=float(v["run_time_s"][j]), cost_usd=float(v["cost_usd"][j]),
                     emissions_kg_co2e=float(v["emissions_kg_co2e"][j]), energy_j=float(v["energy_j"][j]),
                     memory_bytes=float(v["memory_bytes"][j]), mfu=float(v["mfu"][j]), cost_basis=b.cost_basis)


def search(scenarios: Sequence[Scenario], *, objective: str = "time", top_k: int = 10,
           space: SearchSpace | None = None, sites: Sequence[Site] = (), constraints: Constraints | None = None,
           progress: Callable[[int, int], None] | None = None, profile: Profile | None = None) -> SearchResult:
    """Evaluate every strategy of every scenario (one per chip type), chip count and site (region), each chip
    with its efficiency under ``profile`` (default: the default framework);
    ``progress`` is called with (done, total) after each (chip type, count). Raises InfeasibleError naming the
    smallest number of chips that would fit when nothing does, or the constraint that excluded everything."""
    check_query(objective, top_k)
    cons, space, profile = constraints or Constraints(), space or SearchSpace(), profile or Profile()
    if scenarios:
        check_framework_space(space, profile, scenarios[0])
    t0 = time.perf_counter()
    units_ = [with_chips(sc, n) for sc in scenarios for n in chip_counts(sc, cons.max_chips)]
    total, feasible, blocks, points = 0, 0, [], []
    for done, sc in enumerate(units_, 1):
        n, bs = _evaluate(sc, space, sites, cons, profile)
        total += n
        for b in bs:  # only the rows that can reach the answer stay (reduce_block): far fewer to rank
            small, pts = reduce_block(b, objective, top_k, cons.tie_tolerance)
            blocks.append(small)
            points.append(pts)
            feasible += len(b.rows)
        if progress is not None:
            progress(done, len(units_))
    return answer(scenarios, units_, blocks, points, feasible=feasible, total=total, objective=objective,
                  top_k=top_k, space=space, cons=cons, profile=profile, t0=t0)


def reduce_block(block: _Block, objective: str, top_k: int,
                 tolerance: float) -> tuple[_Block, npt.NDArray[np.float64]]:
    """The block's rows that can be in the answer, in their order, and the (run time, cost, CO2e) of all its rows.
    The ranking puts the rows within ``tolerance`` of the best objective first (_tie_keys): the global best is at
    most this block's, so every row of the block the answer may call a tie has an objective within ``tolerance``
    of the block's best; the others rank by (objective, run time, memory). The block's first rows in that order,
    its ties and then ``top_k`` more, hold every row of the block the ranking can reach; the front adds its own
    (pareto_mask with memory as tiebreak: a global front row is non-dominated within its block, and of equal
    points the one that survives globally survives in its block; dominance is transitive)."""
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


def answer(scenarios: Sequence[Scenario], units_: Sequence[Scenario], blocks: Sequence[_Block],
           points: Sequence[npt.NDArray[np.float64]], *, feasible: int, total: int, objective: str, top_k: int,
           space: SearchSpace, cons: Constraints, profile: Profile, t0: float) -> SearchResult:
    """The ranking and the front over the rows of ``blocks`` (each reduced by reduce_block, in the one-process
    order: unit, site, tp), with ``points`` their blocks' points; ``feasible`` rows and ``total`` candidates in
    all. Raises ConfigError when the framework runs none of the ZeRO stages asked for, InfeasibleError when
    nothing is feasible."""
    if not blocks:  # the framework runs none of the ZeRO stages asked for
        stages = ", ".join(map(str, profile.for_chip(scenarios[0].cluster.chip.name).zero_stages))
        raise ConfigError("strategy.zero", ", ".join(map(str, space.zero)),
                          f"the {profile.framework} framework runs ZeRO stages {stages}")
    if not feasible:
        raise InfeasibleError(_nothing_fits(scenarios, units_, total, space, cons, profile))
    cols = {k: np.concatenate([b.values[k] for b in blocks]) for k in _COLUMNS}
    owner = np.concatenate([np.full(len(b.rows), i) for i, b in enumerate(blocks)])
    local = np.concatenate([np.arange(len(b.rows)) for b in blocks])
    value = cols[OBJECTIVE_COLUMNS[objective]]
    comparable, notes = _cost_bases(blocks, owner, objective)
    candidates = np.flatnonzero(comparable) if objective == "cost" else np.arange(len(value))
    best = first_in_order(candidates, _tie_keys(cols, value, candidates, cons.tie_tolerance), top_k)
    kept = np.stack([cols["run_time_s"], cols["cost_usd"], cols["emissions_kg_co2e"]], axis=1)
    rows = np.flatnonzero(comparable)  # the front's cost axis compares like with like
    front = rows[pareto_mask(kept[rows], cols["memory_bytes"][rows])]
    front = front[np.argsort(kept[front, 0], kind="stable")]
    return SearchResult(objective=objective, num_candidates=total, num_feasible=feasible,
                        search_time_s=time.perf_counter() - t0,
                        ranked=tuple(_candidate(blocks[owner[i]], local[i]) for i in best),
                        pareto=tuple(_candidate(blocks[owner[i]], local[i]) for i in front),
                        points=np.concatenate(points), notes=notes)


def _tie_keys(cols: dict[str, npt.NDArray[np.float64]], value: npt.NDArray[np.float64],
              candidates: npt.NDArray[np.int64], tolerance: float) -> tuple[npt.NDArray[np.float64], ...]:
    """Sort keys (np.lexsort order, primary last): the candidates within ``tolerance`` of the best objective
    come first, those that keep the optimizer and the activations on the device first, then the less offloaded
    (offloading trades host-link time and host memory for device memory: not the robust pick), then the least
    memory per device, then the least CO2e (the same strategy in a cleaner region, at a cost or time the model
    cannot tell apart), then the faster; the others by the objective, then run time, then memory."""
    if not len(candidates) or tolerance <= 0:
        return cols["memory_bytes"], cols["run_time_s"], value
    tied = value <= float(np.min(value[candidates])) * (1.0 + tolerance)
    primary = np.where(tied, cols["offload"] - 2.0, value)  # ties: -2 on the device, the less offloaded next
    mem, run, co2 = cols["memory_bytes"], cols["run_time_s"], cols["emissions_kg_co2e"]
    return np.where(tied, run, mem), np.where(tied, co2, mem), np.where(tied, mem, run), primary


def _cost_bases(blocks: Sequence[_Block], owner: npt.NDArray[np.int64],
                objective: str) -> tuple[npt.NDArray[np.bool_], tuple[str, ...]]:
    """Rows whose cost compares with the others': a rented chip's price per hour and an owned chip's
    electricity are not the same quantity, so when both occur the electricity-only rows leave the cost
    ranking and the Pareto front (they stay in the time, CO2e and energy rankings)."""
    cloud = np.array([b.cost_basis == "cloud" for b in blocks])[owner]
    if cloud.all() or not cloud.any():
        return np.ones(len(owner), dtype=bool), ()
    chips = sorted({f"{b.scenario.cluster.chip.name} in {b.scenario.site.region or 'the given site'}"
                    for b in blocks if b.cost_basis != "cloud" and len(b.rows)})
    left_out = "left out of the cost ranking and the Pareto front" if objective == "cost" else \
        "left out of the Pareto front"
    return cloud, (f"no cloud price for {', '.join(chips)}: cost is electricity only (marked e), not comparable "
                   f"with rented chips; {left_out}",)


def best_strategy(sc: Scenario, space: SearchSpace | None = None, profile: Profile | None = None,
                  memory_headroom: float | None = None) -> Strategy:
    """The fastest strategy of the space (default: the whole space) for ``sc``, leaving ``memory_headroom``
    (None: DEFAULT_MEMORY_HEADROOM, and none when nothing fits with it) and resolving near-ties to the one with
    the most free memory: what `greentrain plan` uses when no strategy is given, or within the degrees the
    user's flags pin."""
    given = memory_headroom is not None
    cons = Constraints(memory_headroom=DEFAULT_MEMORY_HEADROOM if memory_headroom is None else memory_headroom)
    try:
        return search([sc], objective="time", top_k=1, space=space, profile=profile,
                      constraints=cons).ranked[0].strategy
    except InfeasibleError:  # nothing fits with the default headroom: the fastest that fits at all
        if given:
            raise
        return search([sc], objective="time", top_k=1, space=space, profile=profile,
                      constraints=Constraints(memory_headroom=0.0)).ranked[0].strategy


def _nothing_fits(scenarios: Sequence[Scenario], units_: Sequence[Scenario], total: int, space: SearchSpace,
                  cons: Constraints, profile: Profile) -> str:
    given = [f"budget {cons.budget_usd:,.4g} USD" if cons.budget_usd else "",
             f"deadline {units.s_to_days(cons.deadline_s):.4g} days" if cons.deadline_s else "",
             f"memory headroom {cons.memory_headroom:.0%}" if cons.memory_headroom not in (0.0, DEFAULT_MEMORY_HEADROOM)
             else ""]
    if any(given):
        c = search(units_, space=space, top_k=1, profile=profile, constraints=Constraints(
            memory_headroom=0.0 if given[2] else DEFAULT_MEMORY_HEADROOM)).ranked[0]
        return (f"none of the {total:,} strategies meets the constraints ({', '.join(g for g in given if g)}); "
                f"without them the fastest takes {units.s_to_days(c.run_time_s):.4g} days and costs "
                f"{c.cost_usd:,.0f} USD on {c.num_chips} x {c.chip}")
    pins = pinned_fields(space)
    if total == 0 and pins:
        where = "; ".join(f"{u.cluster.num_chips} x {u.cluster.chip.name}" for u in units_)
        return (f"no strategy on {where} keeps the pinned {' '.join(pins)} for {units_[0].model.name}: dp must "
                "divide the batch, tp the heads, pp at most the layers, and dp * tp * pp * cp = the chips"
                + ("; etp is 1 or tp" if space.etp is not None else ""))
    return nothing_fits_message(scenarios, units_, total, profile)


def pinned_fields(space: SearchSpace) -> list[str]:
    """The fields a search space pins, as ``field=value`` (a scenario file's strategy, `plan --tp 8`)."""
    ints = [f"{k}={getattr(space, k)}" for k in ("dp", "tp", "pp", "vpp", "cp", "ep") if getattr(space, k)]
    others = [f"etp={space.etp}" if space.etp is not None else "",
              f"sp={str(space.sp).lower()}" if space.sp is not None else "",
              f"micro_batch_size={space.micro_batch}" if space.micro_batch else ""]
    return ints + [o for o in others if o]
