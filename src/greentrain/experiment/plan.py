"""``greentrain experiment plan``: every variant predicted by the planner, summed, checked against the budget,
and (``lengths=True``, the CLI's plan) the token lengths of its examples against its max lengths: truncation is
seen before any compute is spent (experiment/lengths.py; finding F13's text).

No torch: the planner is analytical. Time, energy, CO2e and $ need ``site.chip`` (the chip the runs will use);
without it the plan gives FLOPs, tokens and memory, and the budget is checked on measured totals while running.
A search (Optuna) is planned as its base job times its trials.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.experiment.data import LengthStats
from greentrain.experiment.findings import Finding, truncation
from greentrain.experiment.job import BudgetSpec, Job
from greentrain.experiment.predict import Prediction, predict
from greentrain.experiment.spec import Experiment
from greentrain.results.experiment import ExperimentPlanResult


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRow:
    variant_id: str
    settings: str
    prediction: Prediction
    num_steps: int
    lengths: tuple[LengthStats, LengthStats | None] | None = None  # sources, targets; None: not counted


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentPlan:
    name: str
    rows: tuple[PlanRow, ...]
    energy_j: float | None  # summed over the variants; None when a variant has no time prediction
    kg_co2e: float | None
    cost_usd: float | None
    budget: BudgetSpec
    over_budget: tuple[str, ...]  # one sentence per exceeded limit
    search_trials: int = 0  # a search: its trials, each predicted as the base (the one row)
    truncation: tuple[Finding, ...] = ()  # F13 per distinct length distribution of the rows

    def to_dict(self) -> dict[str, object]:
        return {**ExperimentPlanResult.head(), "name": self.name,
                "variants": [{"variant_id": r.variant_id, "settings": r.settings, "num_steps": r.num_steps,
                              "flop_per_step": r.prediction.flop_per_step,
                              "tokens_per_step": r.prediction.tokens_per_step,
                              "memory_bytes": r.prediction.memory_bytes, "chip": r.prediction.chip,
                              "train_s": r.prediction.train_s, "energy_j": r.prediction.energy_j,
                              "emissions_kg_co2e": r.prediction.kg_co2e, "cost_usd": r.prediction.cost_usd,
                              **length_fields(r)}
                             for r in self.rows],
                "truncation": [f.text for f in self.truncation],
                "energy_kwh": units.j_to_kwh(self.energy_j) if self.energy_j is not None else None,
                "emissions_kg_co2e": self.kg_co2e, "cost_usd": self.cost_usd, "over_budget": list(self.over_budget),
                "search_trials": self.search_trials}


def length_fields(r: PlanRow) -> dict[str, Any]:
    """The row's length figures under VariantResult's names (usage.py's), empty when not counted."""
    from greentrain.experiment.usage import length_fields as fields

    return {} if r.lengths is None else fields(r.lengths[0], r.lengths[1])


def _truncation(rows: list[PlanRow], jobs: dict[str, Job]) -> tuple[Finding, ...]:
    from greentrain.experiment.results import VariantResult

    counted = [VariantResult(variant_id=r.variant_id, config_hash="", status="ok",
                             max_source_tokens=jobs[r.variant_id].data.max_source_tokens,
                             max_target_tokens=jobs[r.variant_id].data.max_target_tokens, **length_fields(r))
               for r in rows if r.lengths is not None]
    return tuple(truncation(counted))


def _lengths(jobs: dict[str, Job]) -> dict[str, tuple[LengthStats, LengthStats | None] | None]:
    """Each variant's lengths, counted once per distinct data, tokenizer and task."""
    from greentrain.experiment.lengths import planned_lengths

    done: dict[Any, tuple[LengthStats, LengthStats | None] | None] = {}
    out = {}
    for vid, job in jobs.items():
        key = (job.task, job.data, job.tokenizer_kind, job.tokenizer_path, job.model.init, job.model.path)
        if key not in done:
            done[key] = planned_lengths(job)
        out[vid] = done[key]
    return out


def _sum(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def budget_breaches(budget: BudgetSpec, energy_j: float | None, kg: float | None, usd: float | None,
                    what: str) -> tuple[str, ...]:
    """Sentences naming each budget limit that ``what`` (predicted / measured) totals exceed."""
    out = []
    kwh = units.j_to_kwh(energy_j) if energy_j is not None else None
    for field, limit, value, unit in (("budget.max_kwh", budget.max_kwh, kwh, "kWh"),
                                      ("budget.max_kg_co2e", budget.max_kg_co2e, kg, "kg CO2e"),
                                      ("budget.max_usd", budget.max_usd, usd, "$")):
        if limit is not None and value is not None and value > limit:
            out.append(f"{field}={limit}: the {what} total is {value:.4g} {unit}")
    return tuple(out)


def plan_experiment(exp: Experiment, lengths: bool = False) -> ExperimentPlan:
    """Every variant predicted and summed; with ``lengths`` also its examples' token lengths (the CLI's plan;
    the runner's budget check needs none)."""
    rows = []
    for v in exp.variants:
        try:
            p = predict(v.job)
        except ConfigError as e:
            raise ConfigError(f"variant {v.variant_id}: {e.field}", e.value, e.rule) from None
        settings = ", ".join(f"{k}={val}" for k, val in v.axis_values) or "(base)"
        rows.append(PlanRow(variant_id=v.variant_id, settings=settings, prediction=p, num_steps=v.job.train.max_steps))
    # a search: the trials are not known ahead; each is taken to cost what the base does
    n = exp.search.trials if exp.search is not None else 1
    energy, kg, usd = (None if x is None else n * x for x in (_sum([r.prediction.energy_j for r in rows]),
                                                              _sum([r.prediction.kg_co2e for r in rows]),
                                                              _sum([r.prediction.cost_usd for r in rows])))
    trunc: tuple[Finding, ...] = ()
    if lengths:
        jobs = {v.variant_id: v.job for v in exp.variants}
        counted = _lengths(jobs)
        rows = [dataclasses.replace(r, lengths=counted[r.variant_id]) for r in rows]
        trunc = _truncation(rows, jobs)
    return ExperimentPlan(name=exp.name, rows=tuple(rows), energy_j=energy, kg_co2e=kg, cost_usd=usd,
                          truncation=trunc,
                          search_trials=exp.search.trials if exp.search is not None else 0,
                          budget=exp.base.budget, over_budget=budget_breaches(exp.base.budget, energy, kg, usd,
                                                                              "predicted"))
