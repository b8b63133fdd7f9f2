"""The ``search`` section of an experiment file (Optuna's multi-objective search; run by ``experiment.search``):
checked against the job schema when the file is read, without optuna.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from greentrain.config import as_float, as_int, check_keys, require
from greentrain.errors import ConfigError, did_you_mean
from greentrain.experiment.job import METRICS_BY_TASK, parse_job, set_path
from greentrain.experiment.results import QUALITY_BY_TASK

SAMPLERS = ("nsga2", "tpe", "random")
COST_OBJECTIVES = ("emissions_kg_co2e", "cost_usd", "energy_j", "train_s", "wall_s", "peak_memory_bytes")
GOALS = {"max": "maximize", "min": "minimize"}


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
    fingerprint: str  # hash of the section but its trials (the study's name carries it)


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
    check_keys(data, ("trials", "sampler", "objectives", "space"), "search")
    trials = as_int(data.get("trials", 8), "search.trials", minimum=1)
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
    return SearchSpec(trials=trials, sampler=sampler, objectives=tuple((str(k), str(v)) for k, v in objectives.items()),
                      space=dims, fingerprint=hashlib.sha256(blob.encode()).hexdigest()[:8])
