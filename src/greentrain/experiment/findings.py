"""Findings: what the numbers of an experiment say, each with its figures (frozen Finding records, no prose
without numbers). Computed only from VariantResults, so unit tests feed hand-made tables.

F1 cheapest vs greenest (within the quality tolerance of the best; one cost basis at a time)
F2 fastest, best quality, best quality per g CO2e (ROUGE-1 per g; not for perplexity, where lower is better)
F3 what each axis changed relative to the base (shown only above noise: 10 % time or energy, 1 ROUGE point or 2 %
   of the perplexity; with repeats, 2 standard deviations)
F4 the Pareto set of quality (best) x CO2e (min) x $ (min)
F5 early stopping: steps saved
F7 failed attempts: their energy (waste)
F8 prediction errors: FLOPs per step, blind and calibrated training time
F9 Hugging Face total_flos against the counted FLOPs
F11 the experiment's own footprint (all variants and failed attempts)
F13 truncation: the share of sources and targets longer than the max lengths, with their length distribution
(F10, the re-priced regions, is computed by report.py; F12, pruned trials, by pruning.py)
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from greentrain import units
from greentrain.experiment.results import Quality, VariantResult, quality_of

TIME_NOISE = 0.10  # relative change in time or energy below which an axis "did not change it"
# quality noise and F1's tolerance: results.QUALITY_BY_TASK (1 ROUGE point; 2 % of the perplexity)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    kind: str  # F1 ... F11
    text: str
    variants: tuple[str, ...]
    numbers: tuple[tuple[str, float], ...]


def _ok(results: Sequence[VariantResult]) -> list[VariantResult]:
    return [r for r in results if r.status == "ok"]


def _g(r: VariantResult) -> float:
    return (r.emissions_kg_co2e or 0.0) * 1e3


def pareto_set(results: Sequence[VariantResult], q: Quality | None = None) -> list[str]:
    """Ids of the ok variants no other beats on quality (ROUGE-1 higher, perplexity lower), CO2e and $ (lower) at
    once."""
    from greentrain.search.engine import pareto_mask

    q = q or quality_of(results)
    rows = [r for r in _ok(results) if q.value(r) is not None and r.emissions_kg_co2e is not None
            and r.cost_usd is not None]
    if not rows:
        return []
    pts = np.array([[-(q.score(r) or 0.0), r.emissions_kg_co2e or 0.0, r.cost_usd or 0.0] for r in rows])
    mask = pareto_mask(pts)
    return [r.variant_id for r, keep in zip(rows, mask, strict=True) if keep]


def cheapest_vs_greenest(results: Sequence[VariantResult], q: Quality | None = None) -> list[Finding]:
    """F1, per cost basis: the cheapest and the greenest of the variants within the quality's noise of the best
    (1 ROUGE-1 point; 2 % of the perplexity)."""
    q = q or quality_of(results)
    out = []
    rows = [r for r in _ok(results) if r.cost_usd is not None and r.emissions_kg_co2e is not None]
    for basis in sorted({r.cost_basis for r in rows}):
        group = [r for r in rows if r.cost_basis == basis]
        scored = [r for r in group if q.score(r) is not None]
        top = max(scored, key=lambda r: q.score(r) or 0.0, default=None)
        best = q.value(top) if top is not None else None
        if best is not None:
            group = [r for r in scored if q.within(q.value(r) or 0.0, best)]
        cheap = min(group, key=lambda r: (r.cost_usd or 0.0, _g(r)))
        green = min(group, key=lambda r: (_g(r), r.cost_usd or 0.0))
        nums = (("cheapest_cost_usd", cheap.cost_usd or 0.0), ("cheapest_g_co2e", _g(cheap)),
                ("greenest_cost_usd", green.cost_usd or 0.0), ("greenest_g_co2e", _g(green)))
        noise = f"{q.noise:.0%}" if q.relative else f"{q.noise:g}"
        shown = "" if best is None else q.fmt(best) if q.relative else f"{best:.1f}"
        where = f" ({q.label} within {noise} of the best, {shown})" if best is not None else ""
        if cheap.variant_id == green.variant_id:
            text = (f"{cheap.variant_id} is both the cheapest and the greenest{where}: ${cheap.cost_usd:.4g}, "
                    f"{_g(cheap):.4g} g CO2e ({basis} cost)")
        else:
            text = (f"cheapest is not greenest{where}: {cheap.variant_id} ${cheap.cost_usd:.4g} and "
                    f"{_g(cheap):.4g} g; {green.variant_id} ${green.cost_usd:.4g} and {_g(green):.4g} g "
                    f"({basis} cost). Why: {why_not_greenest(cheap, green)}")
        out.append(Finding(kind="F1", text=text, variants=(cheap.variant_id, green.variant_id), numbers=nums))
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and a > 0 and b > 0 else None


def _factors(pairs: Sequence[tuple[str, float | None]]) -> str:
    """'name 2.1x, other 0.5x' for the factors that differ from 1 by more than 2 %."""
    shown = [f"{name} {x:.3g}x" for name, x in pairs if x is not None and abs(x - 1.0) > 0.02]
    return ", ".join(shown) or "no factor differs by more than 2 %"


def why_not_greenest(cheap: VariantResult, green: VariantResult) -> str:
    """The cause of a cheapest-is-not-greenest pair, as the ratios of the factors of each figure (cheapest over
    greenest). $ = price x billed time (cloud) or facility energy x electricity price (electricity); CO2e = IT energy
    x PUE x grid intensity (+ embodied), IT energy = mean power x wall time (experiment/cost.py)."""
    energy = _ratio(cheap.energy_j, green.energy_j)
    wall = _ratio(cheap.wall_s, green.wall_s)
    if cheap.cost_basis == "electricity":
        cost = [("electricity price", _ratio(cheap.electricity_usd_per_kwh, green.electricity_usd_per_kwh)),
                ("PUE", _ratio(cheap.pue, green.pue)), ("energy", energy)]
    else:
        price_per_s = _ratio((cheap.cost_usd or 0.0) / cheap.wall_s if cheap.wall_s else None,
                             (green.cost_usd or 0.0) / green.wall_s if green.wall_s else None)
        cost = [("price per hour", price_per_s), ("billed time", wall)]
    carbon = [("grid intensity", _ratio(cheap.grid_g_co2e_per_kwh, green.grid_g_co2e_per_kwh)),
              ("PUE", _ratio(cheap.pue, green.pue)), ("mean power", _ratio(cheap.mean_power_w, green.mean_power_w)),
              ("wall time", wall)]
    return (f"{cheap.variant_id} costs {_ratio(cheap.cost_usd, green.cost_usd) or 0.0:.3g}x as much as "
            f"{green.variant_id} ({_factors(cost)}) and emits {_ratio(_g(cheap), _g(green)) or 0.0:.3g}x as much "
            f"CO2e ({_factors(carbon)})")


def truncation(results: Sequence[VariantResult]) -> list[Finding]:
    """F13: per distinct length distribution (variants sharing their data share it), the share of the sources and
    targets cut by the max lengths."""
    groups: dict[tuple[object, ...], list[VariantResult]] = {}
    for r in _ok(results):
        if r.source_truncated_fraction is None:
            continue
        key = (r.source_tokens_p50, r.source_tokens_p95, r.source_tokens_longest, r.source_truncated_fraction,
               r.target_tokens_p50, r.target_tokens_p95, r.target_tokens_longest, r.target_truncated_fraction,
               r.max_source_tokens, r.max_target_tokens)
        groups.setdefault(key, []).append(r)
    out = []
    for group in groups.values():
        r = group[0]
        src_max, tgt_max = r.max_source_tokens, r.max_target_tokens
        joined = r.target_truncated_fraction is None  # causal-lm: one sequence, source and target joined
        parts = [f"{r.source_truncated_fraction:.1%} of the {'sequences' if joined else 'sources'} are longer than "
                 f"{src_max + tgt_max if joined else src_max} tokens (p50 {r.source_tokens_p50:.0f}, p95 "
                 f"{r.source_tokens_p95:.0f}, longest {r.source_tokens_longest})"]
        nums: list[tuple[str, float]] = [("source_truncated_fraction", r.source_truncated_fraction or 0.0)]
        if not joined and r.target_truncated_fraction is not None:
            parts.append(f"{r.target_truncated_fraction:.1%} of the targets longer than {tgt_max} (p50 "
                         f"{r.target_tokens_p50:.0f}, p95 {r.target_tokens_p95:.0f}, longest "
                         f"{r.target_tokens_longest})")
            nums.append(("target_truncated_fraction", r.target_truncated_fraction))
        who = "every variant" if len(group) == len(_ok(results)) else ", ".join(x.variant_id for x in group)
        cut = any(x for _, x in nums)
        out.append(Finding(kind="F13", text=f"truncation ({who}): " + "; ".join(parts)
                           + (": cut before training" if cut else ": nothing is cut"),
                           variants=tuple(x.variant_id for x in group), numbers=tuple(nums)))
    return out


def extremes(results: Sequence[VariantResult], q: Quality | None = None) -> list[Finding]:
    """F2: fastest training, best quality, best ROUGE-1 per g CO2e (a lower-is-better perplexity has no "per g")."""
    q = q or quality_of(results)
    ok = _ok(results)
    out = []
    if ok:
        f = min(ok, key=lambda r: r.train_s)
        out.append(Finding(kind="F2", text=f"fastest: {f.variant_id}, {f.train_s:.3g} s of training, "
                           f"{f.tokens_per_s:.4g} tokens/s", variants=(f.variant_id,),
                           numbers=(("train_s", f.train_s), ("tokens_per_s", f.tokens_per_s))))
    scored = [r for r in ok if q.value(r) is not None]
    if scored:
        b = max(scored, key=lambda r: q.score(r) or 0.0)
        out.append(Finding(kind="F2", text=f"best quality: {b.variant_id}, {q.label} {q.fmt(q.value(b) or 0.0)}",
                           variants=(b.variant_id,), numbers=((q.field, q.value(b) or 0.0),)))
    per_g = [r for r in scored if _g(r) > 0] if q.higher_is_better else []
    if per_g:
        e = max(per_g, key=lambda r: (q.value(r) or 0.0) / _g(r))
        out.append(Finding(kind="F2", text=f"best quality per g CO2e: {e.variant_id}, "
                           f"{(q.value(e) or 0.0) / _g(e):.4g} {q.label} points per g",
                           variants=(e.variant_id,), numbers=((f"{q.field}_per_g", (q.value(e) or 0.0) / _g(e)),)))
    return out


def _rel(new: float, old: float) -> float | None:
    return (new - old) / old if old else None


REPEAT_SEP = "@seed"  # spec.py: with repeats > 1 a variant's runs are <id>@seed<k>
COST_METRICS = (("train time", "train_s", True), ("energy", "energy_j", True),
                ("peak memory", "peak_memory_bytes", True))  # (name, field, relative change)


def _value(r: VariantResult, field: str) -> float | None:
    v = getattr(r, field)
    return None if v is None else float(v)


def repeat_deltas(results: Sequence[VariantResult], base_id: str = "base", q: Quality | None = None) -> list[Finding]:
    """F3 with repeats: each variant's mean against the base's, shown only beyond 2 standard deviations (the
    larger of the two groups'); the fixed thresholds do not apply."""
    q = q or quality_of(results)
    groups: dict[str, list[VariantResult]] = {}
    for r in _ok(results):
        groups.setdefault(r.variant_id.split(REPEAT_SEP)[0], []).append(r)
    base = groups.get(base_id)
    if not base or len(base) < 2:
        return []
    out = []
    for vid, runs in groups.items():
        if vid == base_id or len(runs) < 2:
            continue
        parts, nums = [], []
        for name, field, relative in (*COST_METRICS, (q.label, q.field, q.relative)):
            a = [x for x in (_value(r, field) for r in runs) if x is not None]
            b = [x for x in (_value(r, field) for r in base) if x is not None]
            if len(a) < 2 or len(b) < 2:
                continue
            delta, noise = statistics.fmean(a) - statistics.fmean(b), 2 * max(statistics.stdev(a), statistics.stdev(b))
            if abs(delta) <= noise:
                continue
            if relative and statistics.fmean(b):
                change = delta / statistics.fmean(b)
                parts.append(f"{name} {change:+.0%} (2 sd: {noise / statistics.fmean(b):.0%})")
                nums.append((f"{field}_change", change))
            else:
                parts.append(f"{name} {delta:+.2f} (2 sd: {noise:.2f})")
                nums.append((f"{field}_delta", delta))
        text = (f"{vid} vs {base_id} over {len(runs)} and {len(base)} seeds: "
                + (", ".join(parts) if parts else "no change beyond 2 sd"))
        out.append(Finding(kind="F3", text=text, variants=(vid, base_id), numbers=tuple(nums)))
    return out


def _quality_delta(q: Quality, new: float | None, old: float | None) -> tuple[str, tuple[str, float]] | None:
    """The quality change above noise, as text and a number (ROUGE points; the perplexity's relative change)."""
    if new is None or old is None or not q.changed(new, old):
        return None
    if q.relative:
        return f"{q.label} {(new - old) / old:+.1%}", (f"{q.field}_change", (new - old) / old)
    return f"{q.label} {new - old:+.1f} points", (f"{q.field}_points", new - old)


def axis_deltas(results: Sequence[VariantResult], base_id: str = "base", q: Quality | None = None) -> list[Finding]:
    """F3: each one-axis variant against the base; changes below the noise thresholds are not reported (with
    repeats: beyond 2 standard deviations, ``repeat_deltas``)."""
    q = q or quality_of(results)
    if any(REPEAT_SEP in r.variant_id for r in results):
        return repeat_deltas(results, base_id, q)
    ok = {r.variant_id: r for r in _ok(results)}
    base = ok.get(base_id)
    if base is None:
        return []
    out = []
    for r in ok.values():
        if r.variant_id == base_id:
            continue
        parts: list[str] = []
        nums: list[tuple[str, float]] = []
        for name, new, old in (("train time", r.train_s, base.train_s), ("energy", r.energy_j, base.energy_j),
                               ("peak memory", r.peak_memory_bytes, base.peak_memory_bytes)):
            d = _rel(new, old)
            if d is not None and abs(d) >= TIME_NOISE:
                parts.append(f"{name} {d:+.0%}")
                nums.append((f"{name.replace(' ', '_')}_change", d))
        delta = _quality_delta(q, q.value(r), q.value(base))
        if delta is not None:
            parts.append(delta[0])
            nums.append(delta[1])
        noisy = r.load_avg_1m > r.cpu_count > 0 or base.load_avg_1m > base.cpu_count > 0
        text = (f"{r.variant_id} vs {base_id}: " + (", ".join(parts) if parts else "no change above noise")
                + (" (time figures unreliable: load average above the core count)" if noisy and parts else ""))
        out.append(Finding(kind="F3", text=text, variants=(r.variant_id, base_id), numbers=tuple(nums)))
    return out


def waste(results: Sequence[VariantResult], attempts_energy_j: float, num_attempts: int) -> list[Finding]:
    """F7 (failed attempts) and F11 (the experiment's own footprint)."""
    out = []
    if num_attempts:
        out.append(Finding(kind="F7", text=f"{num_attempts} killed or failed attempt(s) used "
                           f"{units.j_to_kwh(attempts_energy_j) * 1e3:.4g} Wh, counted as waste",
                           variants=(), numbers=(("wasted_energy_j", attempts_energy_j),)))
    total_j = sum(r.energy_j for r in results) + attempts_energy_j
    g = sum(_g(r) for r in results if r.emissions_kg_co2e is not None)
    usd = sum(r.cost_usd or 0.0 for r in results)
    stored = [r.storage_cost_usd for r in results if r.storage_cost_usd is not None]
    storage = f" (+ ${sum(stored):.4g} to store {sum(r.output_bytes for r in results) / units.MB:.4g} MB of " \
        "outputs)" if stored else ""
    out.append(Finding(kind="F11", text=f"the experiment itself: {units.j_to_kwh(total_j) * 1e3:.4g} Wh, "
                       f"{g:.4g} g CO2e, ${usd:.4g}{storage} over {len(results)} variant(s)", variants=(),
                       numbers=(("energy_j", total_j), ("g_co2e", g), ("cost_usd", usd),
                                ("storage_cost_usd", sum(stored)))))
    return out


def prediction_errors(results: Sequence[VariantResult]) -> list[Finding]:
    """F8 (planner and calibrated errors) and F9 (total_flos against counted FLOPs)."""
    out = []
    for r in _ok(results):
        nums = [(k, e) for k in ("flop_per_step", "train_s", "calibrated_train_s", "energy_j")
                if (e := r.error(k)) is not None]
        if nums:
            text = f"{r.variant_id} prediction error: " + ", ".join(f"{k} {e:+.1%}" for k, e in nums)
            out.append(Finding(kind="F8", text=text, variants=(r.variant_id,), numbers=tuple(nums)))
        if r.flop > 0 and r.hf_total_flos > 0:
            ratio = r.hf_total_flos / r.flop
            out.append(Finding(kind="F9", text=f"{r.variant_id}: Hugging Face total_flos is {ratio:.3g}x the "
                               "counted FLOPs", variants=(r.variant_id,), numbers=(("total_flos_ratio", ratio),)))
    return out


def early_stopping(results: Sequence[VariantResult], max_steps: dict[str, int]) -> list[Finding]:
    """F5: variants that stopped early, and the steps they saved."""
    return [Finding(kind="F5", text=f"{r.variant_id} stopped early at step {r.early_stopped_at_step} of "
                    f"{max_steps.get(r.variant_id, 0)}", variants=(r.variant_id,),
                    numbers=(("stopped_at_step", float(r.early_stopped_at_step)),))
            for r in _ok(results) if r.early_stopped_at_step is not None]


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatSummary:
    """A variant run with several seeds (``repeats``): the mean and standard deviation of its ok runs."""

    variant_id: str  # without the @seed<k> suffix
    runs: int
    stats: tuple[tuple[str, float, float], ...]  # (VariantResult field, mean, sample standard deviation)

    def mean(self, field: str) -> float | None:
        return next((m for f, m, _ in self.stats if f == field), None)

    def sd(self, field: str) -> float | None:
        return next((d for f, _, d in self.stats if f == field), None)


SUMMARY_FIELDS = ("train_s", "energy_j", "emissions_kg_co2e", "cost_usd")


def repeat_summaries(results: Sequence[VariantResult], q: Quality | None = None) -> list[RepeatSummary]:
    """Mean and standard deviation over seeds of time, energy, CO2e, $ and quality, per variant with >= 2 ok runs."""
    q = q or quality_of(results)
    groups: dict[str, list[VariantResult]] = {}
    for r in _ok(results):
        if REPEAT_SEP in r.variant_id:
            groups.setdefault(r.variant_id.split(REPEAT_SEP)[0], []).append(r)
    out = []
    for vid, runs in groups.items():
        if len(runs) < 2:
            continue
        stats = []
        for field in (*SUMMARY_FIELDS, q.field):
            xs = [x for x in (_value(r, field) for r in runs) if x is not None]
            if len(xs) >= 2:
                stats.append((field, statistics.fmean(xs), statistics.stdev(xs)))
        out.append(RepeatSummary(variant_id=vid, runs=len(runs), stats=tuple(stats)))
    return out


def all_findings(results: Sequence[VariantResult], *, attempts_energy_j: float = 0.0, num_attempts: int = 0,
                 max_steps: dict[str, int] | None = None) -> list[Finding]:
    q = quality_of(results)
    pareto = pareto_set(results, q)
    f4 = [Finding(kind="F4", text=f"Pareto set ({q.label} {q.direction}, CO2e and $ down): " + ", ".join(pareto),
                  variants=tuple(pareto), numbers=())] if pareto else []
    return [*cheapest_vs_greenest(results, q), *extremes(results, q), *axis_deltas(results, q=q), *f4,
            *early_stopping(results, max_steps or {}), *waste(results, attempts_energy_j, num_attempts),
            *prediction_errors(results), *truncation(results)]
