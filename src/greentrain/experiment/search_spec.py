"""The ``search`` section of an experiment file (Optuna's multi-objective search; run by ``experiment.search``):
checked against the job schema when the file is read, without optuna.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from greentrain.config import BOUNDS, as_float, as_int, check_keys, require
from greentrain.errors import ConfigError, did_you_mean
from greentrain.experiment.job import METRICS_BY_TASK, parse_job, set_path
from greentrain.experiment.results import QUALITY_BY_TASK

SAMPLERS = ("nsga2", "tpe", "random")
COST_OBJECTIVES = ("emissions_kg_co2e", "cost_usd", "energy_j", "train_s", "wall_s", "peak_memory_bytes")
GOALS = {"max": "maximize", "min": "minimize"}
PRUNERS = ("none", "median", "hyperband")
# objectives with a value at every evaluation inside training (the pruner's intermediate values): eval_loss, and
# the perplexity as exp(eval_loss)
PRUNABLE = ("eval_loss", "perplexity")
PRUNER_KEYS = {"none": ("type",), "median": ("type", "startup_trials", "warmup_steps"),
               "hyperband": ("type", "reduction_factor")}


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunerSpec:
    """Optuna's pruner over the trials' evaluations inside training (optuna.pruners; Optuna's own defaults)."""

    kind: str = "none"  # none | median (MedianPruner) | hyperband (HyperbandPruner)
    startup_trials: int = 5  # median: trials that are never pruned, and before which nothing is
    warmup_steps: int = 0  # median: steps of each trial before it may be pruned
    reduction_factor: int = 3  # hyperband: 1 / the share of trials a rung promotes
    min_resource: int = 1  # hyperband: the first evaluation's step (the job's early_stopping.eval_steps)
    max_resource: int = 1  # hyperband: the job's train.max_steps


@dataclass(frozen=True, slots=True, kw_only=True)
class Dimension:
    field: str  # dotted job field
    choices: tuple[Any, ...] = ()  # categorical when not empty
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    integer: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpec:
    trials: int
    sampler: str
    objectives: tuple[tuple[str, str], ...]  # (VariantResult field, "max" | "min")
    space: tuple[Dimension, ...]
    fingerprint: str  # hash of the section but its trials, pruner and timeout (the study's name carries it)
    pruner: PrunerSpec = PrunerSpec()
    timeout_s: float | None = None  # no trial is asked for after this much of the runner's wall time


def _check_value(base_raw: dict[str, Any], field: str, value: Any) -> None:
    raw = copy.deepcopy(base_raw)
    set_path(raw, field, value, f"search.space.{field}")
    try:
        parse_job(raw)
    except ConfigError as e:
        raise ConfigError(f"search.space.{field}: {e.field}", e.value, e.rule) from None


def _dimension(field: str, d: Any, base_raw: dict[str, Any]) -> Dimension:
    where = f"search.space.{field}"
    if isinstance(d, list):
        require(len(d) > 0, where, d, "is empty: give at least one value")
        for v in d:
            require(v is None or isinstance(v, (bool, int, float, str)), where, v,
                    "categorical values must be numbers, strings, booleans or null")
            _check_value(base_raw, field, v)
        return Dimension(field=field, choices=tuple(d))
    require(isinstance(d, dict), where, d, "must be a list of values or a range {low, high, log}")
    check_keys(d, ("low", "high", "log"), where)
    require("low" in d and "high" in d, where, d, "a range needs low and high")
    integer = all(isinstance(d[k], int) and not isinstance(d[k], bool) for k in ("low", "high"))
    low = as_float(d["low"], f"{where}.low", positive=bool(d.get("log")))
    high = as_float(d["high"], f"{where}.high")
    require(high > low, f"{where}.high", high, f"must be above low ({low:g})")
    for v in (d["low"], d["high"]):
        _check_value(base_raw, field, v)
    return Dimension(field=field, low=low, high=high, log=bool(d.get("log", False)), integer=integer)


def parse_search(data: Any, base_raw: dict[str, Any], task: str) -> SearchSpec:
    """The ``search`` section, every value of its space checked against the job schema (no optuna needed)."""
    require(isinstance(data, dict), "search", data, "must be a mapping {trials, sampler, objectives, space}")
    check_keys(data, ("trials", "sampler", "objectives", "space", "pruner", "timeout_s"), "search")
    trials = BOUNDS["trials"].check_int(data.get("trials", 8), "search.trials")  # 1e12 was accepted
    sampler = str(data.get("sampler", "nsga2"))
    require(sampler in SAMPLERS, "search.sampler", sampler, f"must be one of {', '.join(SAMPLERS)}")
    q = QUALITY_BY_TASK[task]
    known = (*METRICS_BY_TASK[task], "eval_loss", *COST_OBJECTIVES)
    default = {q.field: "max" if q.higher_is_better else "min", "emissions_kg_co2e": "min", "cost_usd": "min"}
    objectives = data.get("objectives") or default
    require(isinstance(objectives, dict), "search.objectives", objectives, "must map result fields to max or min")
    for name, goal in objectives.items():
        require(name in known, "search.objectives", name, f"unknown objective for task {task}"
                + did_you_mean(str(name), known))
        require(goal in GOALS, f"search.objectives.{name}", goal, "must be max or min")
    space = data.get("space")
    require(isinstance(space, dict) and bool(space), "search.space", space,
            "must be a non-empty mapping of dotted fields to a list of values or a range")
    dims = tuple(_dimension(str(k), v, base_raw) for k, v in space.items())
    blob = json.dumps({"sampler": sampler, "objectives": objectives, "space": space},  # more trials: same study
                      sort_keys=True, default=str)
    timeout = data.get("timeout_s")
    spec = SearchSpec(trials=trials, sampler=sampler, objectives=tuple((str(k), str(v)) for k, v in objectives.items()),
                      space=dims, fingerprint=hashlib.sha256(blob.encode()).hexdigest()[:8],
                      timeout_s=None if timeout is None else as_float(timeout, "search.timeout_s", positive=True))
    return with_pruner(spec, data.get("pruner", "none"), base_raw)


def with_pruner(spec: SearchSpec, data: Any, base_raw: dict[str, Any], where: str = "search.pruner") -> SearchSpec:
    """The search with its pruner (a name, or a mapping {type, ...}), refused where Optuna cannot prune: a study
    of several objectives (Optuna's Trial.report and should_prune are single-objective), an objective with no
    value during training, or a job without evaluations inside training (early_stopping.eval_steps)."""
    d = {"type": data} if isinstance(data, str) else data
    require(isinstance(d, dict), where, data, f"must be one of {', '.join(PRUNERS)} or a mapping {{type, ...}}")
    kind = str(d.get("type", "none"))
    require(kind in PRUNERS, f"{where}.type" if isinstance(data, dict) else where, kind,
            f"must be one of {', '.join(PRUNERS)}")
    check_keys(d, PRUNER_KEYS[kind], where)
    if kind == "none":
        return replace(spec, pruner=PrunerSpec())
    names = [name for name, _ in spec.objectives]
    require(len(names) == 1, where, kind, f"prunes single-objective searches only (Optuna's Trial.report and "
            f"should_prune do not support several objectives); give search.objectives one of {', '.join(PRUNABLE)}"
            f" (min), not {', '.join(names)}")
    require(names[0] in PRUNABLE and spec.objectives[0][1] == "min", where, kind,
            f"needs an objective measured during training: {' or '.join(PRUNABLE)} (min), not "
            f"{names[0]} ({spec.objectives[0][1]})")
    job = parse_job(base_raw)
    es = job.early_stopping
    require(es is not None, where, kind, "needs evaluations inside training, whose eval_loss it compares: give the "
            "job an early_stopping section {eval_steps: N, patience: P} (a large patience only evaluates)")
    assert es is not None
    p = PrunerSpec(kind=kind, startup_trials=as_int(d.get("startup_trials", 5), f"{where}.startup_trials", minimum=0),
                   warmup_steps=as_int(d.get("warmup_steps", 0), f"{where}.warmup_steps", minimum=0),
                   reduction_factor=as_int(d.get("reduction_factor", 3), f"{where}.reduction_factor", minimum=2),
                   min_resource=es.eval_steps, max_resource=max(es.eval_steps, job.train.max_steps))
    return replace(spec, pruner=p)

