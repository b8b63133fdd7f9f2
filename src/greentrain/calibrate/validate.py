"""Predict every run of a runs CSV and score the predictions against what was measured.

Scores (the questions a user asks of a planner):
- MFU error in points, on the measurement's own FLOP count: a run measured at MFU u in time t and predicted to
  take t' is predicted at u * t / t' (so FLOP conventions, e.g. nanotron's full s^2 attention, cancel out);
- rank correlation (Spearman) of predicted and measured throughput inside each (model, num_chips) group: does
  the planner order the choices as the cluster did;
- best pick: the configuration predicted fastest (among those predicted to fit) against the measured best of
  its group: picked exactly, and reaching >= 90 % of the best (a run that crashed reaches 0 %);
- ran/crashed: predicted to fit versus status;
- peak memory: |predicted - measured| / measured, the allocator's peak (MemoryBreakdown.allocator_bytes: a
  measured peak is what PyTorch's allocator reports, as frameworks log it and `greentrain track` measures it;
  the CUDA context and NCCL's buffers are outside it). Whether the run fits counts them (total_bytes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from greentrain import units
from greentrain.calibrate.runs import Run
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.efficiency import DEFAULT_FRAMEWORK, Efficiency, efficiency_for, with_calibration
from greentrain.estimate.step import estimate_step

GOOD_PICK = 0.9  # a pick within 10 % of the measured best counts as good


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """greentrain's prediction of one run; the figures are None where the strategy cannot run at all."""

    run_id: str
    fits: bool
    reason: str  # why it does not fit or cannot run ("" when it fits)
    step_time_s: float | None
    mfu: float | None
    tokens_per_s_per_chip: float | None
    peak_memory_bytes: float | None  # the allocator's peak (MemoryBreakdown.allocator_bytes)
    device_memory_bytes: float | None  # everything on the device, against its capacity (total_bytes)
    measured_mfu_error: float | None  # predicted - measured MFU, points as a fraction (0.05 = 5 points)
    # predicted / measured throughput - 1 (measured step time / predicted - 1): > 0 predicts a faster run
    throughput_error: float | None = None
    peak_memory_error: float | None  # (predicted - measured) / measured
    compute_share: float | None = None  # StepEstimate.compute_share (calibrate/bands.py's regime)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    num_runs: int
    num_ran: int  # measured status ok
    num_predicted: int  # runs with a prediction (the strategy divides the model)
    num_scored: int  # runs that ran, with a prediction and a measured MFU and step time
    mfu_error_mean: float | None  # mean |error| in MFU fraction over runs that ran and are predicted
    mfu_error_bias: float | None  # mean signed error
    throughput_error_mean: float | None  # mean |predicted / measured tokens per second - 1| over runs that ran
    throughput_error_bias: float | None  # its mean signed value (> 0: optimistic)
    throughput_error_median: float | None  # median |error| (a few pathological runs weigh on the mean)
    rank_correlation_median: float | None  # over groups with >= 3 runs that ran
    num_groups: int
    best_pick_exact: float | None  # fraction of groups
    best_pick_good: float | None  # fraction of groups whose pick reaches GOOD_PICK of the measured best
    ran_crashed_accuracy: float | None
    crashes_missed: int  # failed runs predicted to fit
    runs_refused: int  # ran, but predicted not to fit
    peak_memory_error_median: float | None  # median |relative error|
    peak_memory_bias_bytes: float | None  # mean predicted - measured


def measured_step_time_s(run: Run) -> float | None:
    m = run.measured
    if m.step_time_s:
        return m.step_time_s
    if m.tokens_per_s_per_chip:
        w = run.scenario.workload
        return w.tokens_per_step / (m.tokens_per_s_per_chip * run.scenario.cluster.num_chips)
    return None


def predict(run: Run, eff: Efficiency | None = None) -> Prediction:
    sc = run.scenario
    try:
        est = estimate_step(sc, run.strategy, check_fit=False, eff=eff)
    except ConfigError as e:  # a cell the model or chip cannot take (fp8 on a chip without it, a sequence too long)
        raise ConfigError(f"runs[{run.run_id}].{e.field.split('.')[-1]}", e.value, e.rule) from None
    except InfeasibleError as e:
        return Prediction(run_id=run.run_id, fits=False, reason=str(e), step_time_s=None, mfu=None,
                          tokens_per_s_per_chip=None, peak_memory_bytes=None, device_memory_bytes=None,
                          measured_mfu_error=None, peak_memory_error=None)
    mem, cap = est.memory.total_bytes, sc.cluster.chip.memory_bytes
    fits = mem <= cap
    reason = "" if fits else (f"needs {units.bytes_to_gib(mem):.1f} GiB per device, "
                              f"{sc.cluster.chip.name} has {units.bytes_to_gib(cap):.1f} GiB")
    m, t_meas = run.measured, measured_step_time_s(run)
    mfu_err = tput_err = None
    if m.ran and m.mfu is not None and t_meas:
        mfu_err = m.mfu * t_meas / est.step_time_s - m.mfu
    if m.ran and t_meas:
        tput_err = t_meas / est.step_time_s - 1.0
    mem_err = None
    if m.ran and m.peak_memory_bytes:
        mem_err = (est.memory.allocator_bytes - m.peak_memory_bytes) / m.peak_memory_bytes
    return Prediction(run_id=run.run_id, fits=fits, reason=reason, step_time_s=est.step_time_s, mfu=est.mfu,
                      tokens_per_s_per_chip=est.tokens_per_s / sc.cluster.num_chips,
                      peak_memory_bytes=est.memory.allocator_bytes, device_memory_bytes=mem,
                      measured_mfu_error=mfu_err, peak_memory_error=mem_err, throughput_error=tput_err,
                      compute_share=est.compute_share)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman rank correlation with average ranks for ties (Spearman 1904); nan when a side is constant."""
    ra, rb = _ranks(np.asarray(a, dtype=float)), _ranks(np.asarray(b, dtype=float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # average the ranks of ties
        same = x == v
        if same.sum() > 1:
            r[same] = r[same].mean()
    return r


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupScore:
    rho: float | None
    exact: bool | None
    good: bool | None


def _group_score(members: list[tuple[Run, Prediction]]) -> _GroupScore:
    ran = [(r, p) for r, p in members if r.measured.ran and measured_step_time_s(r) and p.step_time_s]
    rho = None
    if len(ran) >= 3:
        v = spearman([1 / p.step_time_s for _, p in ran if p.step_time_s],
                     [1 / (measured_step_time_s(r) or 1) for r, _ in ran])
        rho = None if np.isnan(v) else v
    candidates = [(r, p) for r, p in members if p.fits and p.step_time_s]
    if not ran or not candidates:
        return _GroupScore(rho=rho, exact=None, good=None)
    best_t = min(measured_step_time_s(r) or np.inf for r, _ in ran)
    pick, _ = min(candidates, key=lambda rp: rp[1].step_time_s or np.inf)
    t_pick = measured_step_time_s(pick) if pick.measured.ran else None
    reach = best_t / t_pick if t_pick else 0.0
    return _GroupScore(rho=rho, exact=reach >= 1.0 - 1e-12, good=reach >= GOOD_PICK)


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def summarize(runs: Sequence[Run], preds: Sequence[Prediction]) -> Summary:
    pairs = list(zip(runs, preds, strict=True))
    errs = [p.measured_mfu_error for p in preds if p.measured_mfu_error is not None]
    tput = [p.throughput_error for p in preds if p.throughput_error is not None]
    groups: dict[tuple[str, int], list[tuple[Run, Prediction]]] = defaultdict(list)
    for r, p in pairs:
        groups[r.group].append((r, p))
    scores = [_group_score(m) for m in groups.values()]
    rhos = [s.rho for s in scores if s.rho is not None]
    picks = [s for s in scores if s.exact is not None]
    known = [(r, p) for r, p in pairs if r.measured.ran is not None]
    mem = [(p.peak_memory_error, (p.peak_memory_bytes or 0) - (r.measured.peak_memory_bytes or 0))
           for r, p in pairs if p.peak_memory_error is not None]
    return Summary(
        num_runs=len(runs), num_ran=sum(1 for r in runs if r.measured.ran),
        num_predicted=sum(1 for p in preds if p.step_time_s is not None), num_scored=len(errs),
        mfu_error_mean=_mean([abs(e) for e in errs]), mfu_error_bias=_mean(errs),
        throughput_error_mean=_mean([abs(e) for e in tput]), throughput_error_bias=_mean(tput),
        throughput_error_median=float(np.median(np.abs(tput))) if tput else None,
        rank_correlation_median=float(np.median(rhos)) if rhos else None, num_groups=len(groups),
        best_pick_exact=_mean([float(bool(s.exact)) for s in picks]),
        best_pick_good=_mean([float(bool(s.good)) for s in picks]),
        ran_crashed_accuracy=_mean([float(p.fits == r.measured.ran) for r, p in known]),
        crashes_missed=sum(1 for r, p in known if p.fits and not r.measured.ran),
        runs_refused=sum(1 for r, p in known if not p.fits and r.measured.ran),
        peak_memory_error_median=float(np.median([abs(e) for e, _ in mem])) if mem else None,
        peak_memory_bias_bytes=_mean([d for _, d in mem]))


def run_efficiency(run: Run, framework: str = "", calibration: str = "", attention_kernel: str = "",
                   selective_recompute: str = "", loss_kernel: str = "") -> Efficiency:
    """The efficiency a run is predicted with: its chip's, under ``framework`` if given, else the run's own
    framework column, else the default framework, with the row's selective-recomputation mode and attention and
    loss kernels where it names them (the arguments, given, override every row); with a calibration profile's
    constants if given."""
    eff = efficiency_for(run.scenario.cluster.chip.name, framework or run.framework or DEFAULT_FRAMEWORK,
                         attention_kernel or run.attention_kernel, selective_recompute or run.selective_recompute,
                         loss_kernel=loss_kernel or run.loss_kernel)
    return with_calibration(eff, calibration) if calibration else eff


def validate(runs: Sequence[Run], framework: str = "", calibration: str = "", eff: Efficiency | None = None,
             attention_kernel: str = "", selective_recompute: str = "",
             loss_kernel: str = "") -> tuple[tuple[Prediction, ...], Summary]:
    """Predict every run (with ``eff`` when given, else run_efficiency) and score the predictions."""
    preds = tuple(predict(r, eff or run_efficiency(r, framework, calibration, attention_kernel, selective_recompute,
                                                   loss_kernel)) for r in runs)
    return preds, summarize(runs, preds)
