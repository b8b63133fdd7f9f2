"""Fit the few constants of one chip under one framework from measured runs, and say how well they predict runs
held back from the fit.

The constants (each bounded, each with a physical meaning; efficiency.yaml documents them):
- kernel_efficiency: what the framework's kernels reach of the chip's microbenchmark figures;
- host_layer_s: fixed host time per layer and micro-batch (eager Python, launches);
- host_layer_s_per_tp_pp_nodes: what a pipeline spanning nodes adds to it per tensor-parallel rank;
- inter_node_link: the network's achieved fraction of its line rate;
- fragmentation: the caching allocator's reserved memory over the tensors' peak, fitted on the median relative
  peak-memory error (a measured peak is the allocator's: MemoryBreakdown.allocator_bytes).
The time constants minimise the mean |MFU error| over the runs that ran (the error of the throughput relative to
the measurement, weighed by the run's MFU, as `greentrain validate` scores it: a run that reached 2 % MFU
because of something greentrain does not model weighs less than one at 40 %) by coordinate descent with
golden-section searches inside the bounds.
The runs are evaluated with the vectorised estimator, one StrategyTable per scenario.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from greentrain.calibrate.runs import Run
from greentrain.calibrate.validate import measured_step_time_s
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.step import estimate_step
from greentrain.estimate.vector import estimate_steps
from greentrain.parallel.table import StrategyTable

TIME_BOUNDS = (("kernel_efficiency", 0.3, 1.0), ("host_layer_s", 0.0, 0.02),
               ("host_layer_s_per_tp_pp_nodes", 0.0, 0.01), ("inter_node_link", 0.1, 1.0))
FRAGMENTATION_BOUNDS = (0.0, 0.6)
FIT_NAMES = ("kernel_efficiency", "host_layer_s", "host_layer_s_per_tp_pp_nodes", "inter_node_link", "fragmentation")
MIN_RUNS = 8  # runs that ran, with a measured step time, needed to fit every constant
# With fewer (one or two runs of the user's own job), only kernel_efficiency is fitted: one number per run
# constrains one constant, and the kernel efficiency is the one that scales every step alike.
FEW_RUNS_FIT = ("kernel_efficiency",)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Constants:
    kernel_efficiency: float
    host_layer_s: float
    host_layer_s_per_tp_pp_nodes: float
    inter_node_link: float
    fragmentation: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """Prediction error on a set of runs: mean |log time ratio| and the median |relative peak-memory error|."""

    num_runs: int
    mfu_error_mean: float  # mean |MFU error| as a fraction (0.03 = 3 points), on the runs' own FLOP counts
    time_error_median: float  # median |predicted / measured - 1|
    memory_error_median: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    chip: str
    framework: str
    start: Constants
    fitted: Constants
    num_fit: int
    num_holdout: int
    fit_before: Score
    fit_after: Score
    holdout_before: Score | None
    holdout_after: Score | None
    fitted_names: tuple[str, ...] = FIT_NAMES  # the constants fitted
    note: str = ""  # what the fit could not do with the runs given ("" : nothing to say)


class _Evaluator:
    """Step times and memory of many runs under an Efficiency, one vectorised table per scenario."""

    def __init__(self, runs: Sequence[Run], eff: Efficiency) -> None:
        groups: dict[object, list[Run]] = defaultdict(list)
        for r in runs:
            try:
                estimate_step(r.scenario, r.strategy, check_fit=False, eff=eff)
            except InfeasibleError:
                continue  # the strategy does not divide the model: nothing to fit on
            groups[(dataclasses.replace(r.scenario, strategy=None), r.strategy.flash_attention)].append(r)
        self.groups = [(rs[0].scenario, StrategyTable.from_strategies([r.strategy for r in rs]), rs)
                       for rs in groups.values()]
        self.runs = [r for _, _, rs in self.groups for r in rs]
        self.measured_s = np.array([measured_step_time_s(r) or np.nan for r in self.runs])
        self.measured_mem = np.array([r.measured.peak_memory_bytes or np.nan for r in self.runs])
        t0, _ = self.predict(eff)  # a run without a measured MFU weighs as predicted at the start
        self.mfu = np.array([r.measured.mfu if r.measured.mfu is not None else np.nan for r in self.runs])
        start_mfu = np.array([_predicted_mfu(r, t) for r, t in zip(self.runs, t0, strict=True)])
        self.mfu = np.where(np.isfinite(self.mfu), self.mfu, start_mfu)

    def predict(self, eff: Efficiency) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        times, mems = [], []
        for sc, table, rs in self.groups:
            st = estimate_steps(sc, table, check_fit=False, eff=eff)
            t, m = np.full(len(rs), np.nan), np.full(len(rs), np.nan)
            # the allocator's peak: the device's total less what PyTorch does not allocate (context, NCCL)
            t[st.index], m[st.index] = st.step_time_s, st.memory_bytes - eff.reserved_bytes
            times.append(t)
            mems.append(m)
        if not times:  # no run whose strategy divides the model
            return np.zeros(0), np.zeros(0)
        return np.concatenate(times), np.concatenate(mems)

    def score(self, eff: Efficiency) -> Score:
        t, m = self.predict(eff)
        ok = np.isfinite(t) & np.isfinite(self.measured_s)
        ratio = t[ok] / self.measured_s[ok]
        mfu_err = self.mfu[ok] * np.abs(1.0 / ratio - 1.0)  # validate.predict's MFU error, in absolute value
        mem_ok = np.isfinite(m) & np.isfinite(self.measured_mem)
        mem_err = np.abs(m[mem_ok] / self.measured_mem[mem_ok] - 1.0)
        return Score(num_runs=int(ok.sum()), mfu_error_mean=float(np.mean(mfu_err)),
                     time_error_median=float(np.median(np.abs(ratio - 1.0))),
                     memory_error_median=float(np.median(mem_err)) if mem_err.size else None)


def _predicted_mfu(run: Run, step_time_s: float) -> float:
    """Model FLOPs per step over (time x chips x peak): greentrain's MFU of the run at ``step_time_s``."""
    sc = run.scenario
    from greentrain.estimate.compose import step_flops
    from greentrain.model.ops import model_ops

    w = sc.workload
    ops = model_ops(sc.model, 1, w.seq_len, w.activation_bytes, w.target_seq_len, run.strategy.flash_attention)
    flop, _ = step_flops(sc, ops, run.strategy.flash_attention)
    peak = sc.cluster.chip.peak_flop_per_s(w.precision) * sc.cluster.num_chips
    return flop / (step_time_s * peak) if np.isfinite(step_time_s) and step_time_s > 0 else np.nan


def _golden(f: Callable[[float], float], lo: float, hi: float, iters: int = 14) -> float:
    """Minimum of a unimodal f on [lo, hi] (golden-section search, Kiefer 1953)."""
    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    return c if fc <= fd else d


def _with(eff: Efficiency, name: str, value: float) -> Efficiency:
    """``eff`` with one numeric constant replaced."""
    kw: dict[str, Any] = {name: value}
    return dataclasses.replace(eff, **kw)


def _loss(ev: _Evaluator, eff: Efficiency, name: str) -> Callable[[float], float]:
    """The mean |MFU error| as a function of one constant."""
    def f(x: float) -> float:
        return ev.score(_with(eff, name, x)).mfu_error_mean

    return f


def fit_constants(ev: _Evaluator, eff: Efficiency, names: Sequence[str] = FIT_NAMES, rounds: int = 10) -> Efficiency:
    """Coordinate descent over the time constants in ``names`` (up to ``rounds`` sweeps, until a sweep moves no
    constant by more than 0.1 % of its range: coupled constants such as the host floor and its cross-node part
    need several), then fragmentation (if named) on the median relative peak-memory error."""
    for _ in range(rounds):
        moved = 0.0
        for name, lo, hi in TIME_BOUNDS:
            if name in names:
                before = float(getattr(eff, name))
                eff = _with(eff, name, _golden(_loss(ev, eff, name), lo, hi))
                moved = max(moved, abs(float(getattr(eff, name)) - before) / (hi - lo))
        if moved < 1e-3:
            break
    if "fragmentation" in names and np.isfinite(ev.measured_mem).any():
        def mem_loss(x: float) -> float:
            return ev.score(dataclasses.replace(eff, fragmentation=x)).memory_error_median or 0.0

        eff = dataclasses.replace(eff, fragmentation=_golden(mem_loss, *FRAGMENTATION_BOUNDS))
    return eff


def _constants(eff: Efficiency) -> Constants:
    return Constants(kernel_efficiency=eff.kernel_efficiency, host_layer_s=eff.host_layer_s,
                     host_layer_s_per_tp_pp_nodes=eff.host_layer_s_per_tp_pp_nodes,
                     inter_node_link=eff.inter_node_link, fragmentation=eff.fragmentation)


def split(runs: Sequence[Run], holdout: float, seed: int) -> tuple[list[Run], list[Run]]:
    """Runs to fit on and runs held back, drawn at random (seeded) among the runs that ran."""
    ran = [r for r in runs if r.measured.ran and measured_step_time_s(r)]
    rng = random.Random(seed)
    order = list(ran)
    rng.shuffle(order)
    n_hold = round(holdout * len(order))
    return order[n_hold:], order[:n_hold]


def calibrate(runs: Sequence[Run], eff: Efficiency, *, holdout: float = 0.25, seed: int = 0,
              names: Sequence[str] = FIT_NAMES) -> Calibration:
    """Fit ``eff``'s constants on a random part of ``runs`` (which must share one chip) and score the fit on
    the part held back (``holdout`` of the runs that ran)."""
    chips = sorted({r.scenario.cluster.chip.name for r in runs})
    if len(chips) != 1:
        raise ConfigError("runs.chip", ", ".join(chips), "a calibration fits one chip: give runs of one chip")
    if not 0.0 <= holdout < 1.0:
        raise ConfigError("holdout", holdout, "must be in [0, 1)")
    unknown = [n for n in names if n not in FIT_NAMES]
    if unknown or not names:
        raise ConfigError("fit", ",".join(unknown) or "", f"must name some of {', '.join(FIT_NAMES)}")
    note = ""
    if not split(runs, 0.0, seed)[0]:
        raise ConfigError("runs", 0, "no run to fit: need one that ran, with a measured step time")
    fit_runs, hold_runs = split(runs, holdout, seed)
    ev_fit = _Evaluator(fit_runs, eff)
    if len(ev_fit.runs) < MIN_RUNS:  # few runs: all of them fit the one constant they support
        fit_runs, hold_runs = split(runs, 0.0, seed)
        ev_fit = _Evaluator(fit_runs, eff)
        if not ev_fit.runs:
            raise ConfigError("runs", 0, "no run to fit: need one whose strategy divides the model")
        if len(ev_fit.runs) < MIN_RUNS:
            if not set(FEW_RUNS_FIT) & set(names):  # fitting another constant than the one asked for is no answer
                raise ConfigError("fit", ",".join(names), f"{len(ev_fit.runs)} run(s) support one constant, "
                                  f"{', '.join(FEW_RUNS_FIT)}; {MIN_RUNS} or more runs fit the others")
            others = ", ".join(n for n in names if n not in FEW_RUNS_FIT) or "the others"
            note = (f"{len(ev_fit.runs)} run(s) support one constant: only {', '.join(FEW_RUNS_FIT)} was fitted, "
                    f"on every run (none held back); {MIN_RUNS} or more runs fit {others} too")
            names = FEW_RUNS_FIT
    fitted = fit_constants(ev_fit, eff, names)
    ev_hold = _Evaluator(hold_runs, eff) if hold_runs else None
    has_hold = ev_hold is not None and len(ev_hold.runs) > 0
    return Calibration(
        chip=chips[0], framework=eff.framework, start=_constants(eff), fitted=_constants(fitted),
        num_fit=len(ev_fit.runs), num_holdout=len(ev_hold.runs) if ev_hold else 0,
        fit_before=ev_fit.score(eff), fit_after=ev_fit.score(fitted),
        holdout_before=ev_hold.score(eff) if ev_hold and has_hold else None,
        holdout_after=ev_hold.score(fitted) if ev_hold and has_hold else None, fitted_names=tuple(names), note=note)
