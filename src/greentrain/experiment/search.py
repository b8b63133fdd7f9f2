"""Multi-objective search over an experiment's settings with Optuna (the ``search`` extra), instead of ``axes``.

    search:
      trials: 8                                   # trials told (finished or failed), resumed runs included
      sampler: nsga2                              # nsga2 (default) | tpe | random, seeded with the file's seed
      objectives: {rouge1: max, emissions_kg_co2e: min, cost_usd: min}    # default: quality, CO2e, $
      space:
        train.learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true}     # a range (floats: 3 significant digits)
        train.optim: [adamw_torch, adafactor]                             # a list: categorical

Each trial is a variant run by the runner (its own folder, phases, resume, waste), named by its settings
(``learning_rate=0.00354+optim=adafactor``; ``base`` for the base's own values, enqueued first).
The study lives in ``DIR/optuna.journal`` (``JournalFileBackend``): on a rerun, told trials are kept and their
variants are not run again; a trial left running by a killed runner is failed and its settings enqueued again,
so the same variant re-runs (its killed attempt moved aside and counted as waste). The study's name carries the
base job's hash and the search section's (trials aside: raising them continues the study), so a changed file
starts a new study in the same journal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.experiment import runner
from greentrain.experiment.extras import missing_modules
from greentrain.experiment.results import VariantResult, read_result
from greentrain.experiment.runner import Progress, RunOptions
from greentrain.experiment.search_spec import GOALS, Dimension
from greentrain.experiment.spec import BASE_ID, Experiment, Variant, make_variant

JOURNAL = "optuna.journal"
VARIANT_ATTR = "greentrain_variant_id"  # set on a trial when it is told: trials without it were never finished


def base_values(exp: Experiment) -> dict[str, Any] | None:
    """The base job's value of every dimension, when each lies in the space (then the base is enqueued first)."""
    assert exp.search is not None
    out = {}
    for d in exp.search.space:
        node: Any = exp.base.resolved
        for part in d.field.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        inside = node in d.choices if d.choices else (
            isinstance(node, (int, float)) and not isinstance(node, bool) and d.low <= node <= d.high)
        if not inside:
            return None
        out[d.field] = node
    return out


def _suggest(trial: Any, d: Dimension) -> Any:
    if d.choices:
        return trial.suggest_categorical(d.field, list(d.choices))
    if d.integer:
        return trial.suggest_int(d.field, int(d.low), int(d.high), log=d.log)
    return trial.suggest_float(d.field, d.low, d.high, log=d.log)


def _run_value(d: Dimension, v: Any) -> Any:
    """What runs: a sampled float rounded to 3 significant digits (so the variant's id names it exactly)."""
    return float(f"{v:.3g}") if not d.choices and not d.integer else v


def _names(dims: Sequence[Dimension]) -> list[str]:
    """Each dimension's name in ids: the field's last part (learning_rate) unless two dimensions share it."""
    last = [d.field.rsplit(".", 1)[-1] for d in dims]
    return [n if last.count(n) == 1 else d.field for n, d in zip(last, dims, strict=True)]


def trial_variant(exp: Experiment, params: dict[str, Any]) -> Variant:
    """The variant a trial's settings make: ``base`` when they are the base's own values."""
    assert exp.search is not None
    dims = exp.search.space
    settings = tuple((d.field, _run_value(d, params[d.field])) for d in dims)
    vid = BASE_ID if base_values(exp) == dict(settings) else "+".join(
        f"{n}={v}" for n, (_, v) in zip(_names(dims), settings, strict=True))
    return make_variant(exp.base_raw, vid, settings, exp.base_seed)


def _study(optuna: Any, out: Path, exp: Experiment) -> Any:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    spec = exp.search
    assert spec is not None
    samplers: dict[str, Callable[[], Any]] = {
        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=exp.base_seed, population_size=max(2, spec.trials // 2)),
        "tpe": lambda: optuna.samplers.TPESampler(seed=exp.base_seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=exp.base_seed)}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name=f"{exp.name}-{exp.base_hash}-{spec.fingerprint}", load_if_exists=True,
        storage=JournalStorage(JournalFileBackend(str(out / JOURNAL))), sampler=samplers[spec.sampler](),
        directions=[GOALS[goal] for _, goal in spec.objectives])


def _recover(optuna: Any, study: Any) -> None:
    """Trials a killed runner left running: failed, and their settings enqueued again (the same variant re-runs)."""
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
        if t.params:
            study.enqueue_trial(dict(t.params))


def told(study: Any) -> list[Any]:
    return [t for t in study.get_trials(deepcopy=False) if VARIANT_ATTR in t.user_attrs]


def _tell(optuna: Any, study: Any, trial: Any, r: VariantResult, objectives: Sequence[tuple[str, str]]) -> None:
    trial.set_user_attr(VARIANT_ATTR, r.variant_id)
    values = [getattr(r, name) for name, _ in objectives]
    if r.status == "ok" and all(v is not None for v in values):
        study.tell(trial, [float(v) for v in values])
    else:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)


def run_search(exp: Experiment, opts: RunOptions, *, progress: Callable[[int], Progress] | None = None,
               after_variant: Callable[[Path], None] | None = None) -> list[VariantResult]:
    """Ask, run, tell until ``trials`` trials are told or the measured budget is spent; resumable."""
    spec = exp.search
    assert spec is not None

    require(not opts.only, "only", ",".join(opts.only), "does not apply to a search (trials are not known ahead)")
    if missing_modules(("optuna",)):
        raise ConfigError("search", "optuna", "needs optuna, which is not installed: pip install 'greentrain[search]'")
    runner.start(exp, opts, list(exp.variants))
    import optuna

    out = opts.out_dir
    with runner.locked(out):
        if opts.fresh:
            runner.fresh_start(out)
        study = _study(optuna, out, exp)
        _recover(optuna, study)
        base = base_values(exp)
        if not study.trials and base is not None:
            study.enqueue_trial(base)
        seen: dict[str, Variant] = {}
        for t in told(study):
            v = trial_variant(exp, dict(t.params))
            seen[v.variant_id] = v
        watcher = progress(spec.trials) if progress is not None else runner.NoProgress()
        spent = runner.budget_spent(exp, out, _results(out, list(seen.values())))
        try:
            while len(told(study)) < spec.trials and not spent:
                trial = study.ask()
                v = trial_variant(exp, {d.field: _suggest(trial, d) for d in spec.space})
                seen.setdefault(v.variant_id, v)
                runner.write_manifest(out, exp, list(seen.values()))
                r = runner.run_in_folder(out, v, opts.isolation, watcher)
                _tell(optuna, study, trial, r, spec.objectives)
                watcher.end()
                spent = runner.budget_spent(exp, out, _results(out, list(seen.values())))
                if after_variant is not None:
                    after_variant(out)
        finally:
            watcher.close()
        runner.write_manifest(out, exp, list(seen.values()))
        return _results(out, list(seen.values()))


def _results(out: Path, variants: list[Variant]) -> list[VariantResult]:
    got = [read_result(runner.variant_dir(out, v.variant_id) / "result.json") for v in variants]
    return [r for r in got if r is not None]
