"""Multi-objective search over an experiment's settings with Optuna (the ``search`` extra), instead of ``axes``.

    search:
      trials: 8                                   # trials told (finished or failed), resumed runs included
      sampler: nsga2                              # nsga2 (default) | tpe | random, seeded with the file's seed
      objectives: {rouge1: max, emissions_kg_co2e: min, cost_usd: min}    # default: quality, CO2e, $
      space:
        train.learning_rate: {low: 1.0e-4, high: 1.0e-2, log: true}     # a range (floats: 3 significant digits)
        train.optim: [adamw_torch, adafactor]                             # a list: categorical
      pruner: median                              # none (default) | median | hyperband: experiment/pruning.py
      timeout_s: 3600                             # no trial is asked for after this much wall time

Each trial is a variant run by the runner (its own folder, phases, resume, waste), named by its settings
(``learning_rate=0.00354+optim=adafactor``; ``base`` for the base's own values, enqueued first).
The study lives in ``DIR/optuna.journal`` (``JournalFileBackend``): on a rerun, told trials are kept and their
variants are not run again; a trial left running by a killed runner is failed and its settings enqueued again,
so the same variant re-runs (its killed attempt moved aside and counted as waste). The study's name carries the
base job's hash and the search section's (trials aside: raising them continues the study), so a changed file
starts a new study in the same journal.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.experiment import runner
from greentrain.experiment.extras import missing_modules
from greentrain.experiment.pruning import TRIAL_ENV, absolute_storage, make_pruner, open_storage, trial_env
from greentrain.experiment.results import VariantResult, read_result
from greentrain.experiment.runner import Progress, RunOptions
from greentrain.experiment.search_spec import GOALS, Dimension
from greentrain.experiment.spec import BASE_ID, Experiment, Variant, make_variant

JOURNAL = "optuna.journal"
VARIANT_ATTR = "greentrain_variant_id"  # set on a trial when it is told: trials without it were never finished
RUNNER_ATTR = "greentrain_runner"  # "host pid" of the runner that asked for the trial
MEASURED_ATTRS = ("status", "num_steps", "energy_j", "emissions_kg_co2e", "cost_usd", "train_s")


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


def _storage(optuna: Any, out: Path, url: str) -> Any:
    """Where the study lives: ``DIR/optuna.journal`` by default, else ``open_storage``'s URL."""
    return open_storage(optuna, _url(out, url))


def _url(out: Path, url: str) -> str:
    """The storage's URL as a worker opens it: the default journal as ``journal:`` its absolute path."""
    return absolute_storage(url) if url else f"journal:{(out / JOURNAL).resolve()}"


def study_name(exp: Experiment) -> str:
    assert exp.search is not None
    return f"{exp.name}-{exp.base_hash}-{exp.search.fingerprint}"


def _study(optuna: Any, out: Path, exp: Experiment, storage: Any = None, shared: bool = False) -> Any:
    """The study (in ``storage``, else ``DIR/optuna.journal``), its sampler seeded with the file's seed; ``shared``
    (an explicit storage, several runners): the seed plus this runner's pid, or all would draw the same settings."""
    spec = exp.search
    assert spec is not None
    storage = _storage(optuna, out, "") if storage is None else storage
    seed = (exp.base_seed + (os.getpid() if shared else 0)) % 2**32  # numpy's seed range (config.BOUNDS["seed"])
    samplers: dict[str, Callable[[], Any]] = {
        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=seed, population_size=max(2, spec.trials // 2)),
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed)}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name=study_name(exp), load_if_exists=True, storage=storage, sampler=samplers[spec.sampler](),
        pruner=make_pruner(optuna, spec.pruner), directions=[GOALS[goal] for _, goal in spec.objectives])


def _me() -> str:
    return f"{socket.gethostname()} {os.getpid()}"


def _dead(runner_id: str) -> bool:
    """A runner of this host that is gone (a trial of a runner elsewhere is never taken for dead)."""
    host, _, pid = runner_id.rpartition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    return not Path(f"/proc/{pid}").exists() if Path("/proc").is_dir() else False


def _recover(optuna: Any, study: Any) -> None:
    """Trials a killed runner of this host left running (or a runner before runners were named): failed, and
    their settings enqueued again (the same variant re-runs). Trials of live runners are theirs."""
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if RUNNER_ATTR in t.user_attrs and not _dead(str(t.user_attrs[RUNNER_ATTR])):
            continue
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
        if t.params:
            study.enqueue_trial(dict(t.params))


def _surplus(optuna: Any, study: Any, trial: Any, trials: int) -> bool:
    """Several runners asked at once for the last trials: the highest-numbered running ones beyond ``trials``
    give way (every runner sees the same order), so the study gets ``trials`` told trials."""
    every = study.get_trials(deepcopy=False)
    n_told = sum(1 for t in every if VARIANT_ATTR in t.user_attrs)
    running = sorted(t.number for t in every if t.state == optuna.trial.TrialState.RUNNING)
    return trial.number in running[max(0, trials - n_told):]


def told(study: Any) -> list[Any]:
    return [t for t in study.get_trials(deepcopy=False) if VARIANT_ATTR in t.user_attrs]


def _tell(optuna: Any, study: Any, trial: Any, r: VariantResult, objectives: Sequence[tuple[str, str]]) -> None:
    """Told COMPLETE with the objectives, PRUNED (Optuna keeps its last intermediate value) or FAIL; what the
    variant measured, partial for a pruned one, kept as user attributes (optuna-dashboard shows them)."""
    trial.set_user_attr(VARIANT_ATTR, r.variant_id)
    for name in MEASURED_ATTRS:
        value = getattr(r, name)
        if value is not None:
            trial.set_user_attr(name, value)
    values = [getattr(r, name) for name, _ in objectives]
    if r.status == "ok" and all(v is not None for v in values):
        study.tell(trial, [float(v) for v in values])
    elif r.status == "pruned":
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)


def run_search(exp: Experiment, opts: RunOptions, *, progress: Callable[[int], Progress] | None = None,
               after_variant: Callable[[Path], None] | None = None) -> list[VariantResult]:
    """Ask, run, tell until ``trials`` trials are told or the measured budget is spent; resumable, and shared by
    several runners of the same study (``opts.storage``, each trial's variant under its claim)."""
    from greentrain.experiment.executors import claim, joined

    spec = exp.search
    assert spec is not None
    require(not opts.only, "only", ",".join(opts.only), "does not apply to a search (trials are not known ahead)")
    require(opts.executor == "local" and opts.jobs == 1, "executor", opts.executor,
            "a search runs its trials one at a time per runner: start several runners on one storage instead")
    if missing_modules(("optuna",)):
        raise ConfigError("search", "optuna", "needs optuna, which is not installed: pip install 'greentrain[search]'")
    runner.start(exp, opts, list(exp.variants))
    import optuna

    out = opts.out_dir
    database = opts.storage and not opts.storage.startswith("journal:")
    storage = _storage(optuna, out, opts.storage) if database else None  # checked before anything is written
    with joined(out, runner.manifest_of(exp, []), opts.fresh, runner.fresh_start):
        with claim(out, "_study", wait=True):  # one runner at a time recovers and enqueues the base
            if storage is None:  # a journal: opened after --fresh deleted DIR's
                storage = _storage(optuna, out, opts.storage)
            if opts.fresh and opts.storage:
                _forget(optuna, exp, storage)
            study = _study(optuna, out, exp, storage, bool(opts.storage))
            _recover(optuna, study)
            base = base_values(exp)
            if not study.trials and base is not None:
                study.enqueue_trial(base, skip_if_exists=True)
        watcher = progress(spec.trials) if progress is not None else runner.NoProgress()
        try:
            _trials(optuna, study, exp, opts, watcher, after_variant)
        finally:
            watcher.close()
        seen = _seen(exp, study, {})
        runner.write_manifest(out, exp, list(seen.values()))
        return _results(out, list(seen.values()))


def _forget(optuna: Any, exp: Experiment, storage: Any) -> None:
    assert exp.search is not None
    with contextlib.suppress(KeyError):
        optuna.delete_study(study_name=study_name(exp), storage=storage)


def _seen(exp: Experiment, study: Any, seen: dict[str, Variant]) -> dict[str, Variant]:
    """The variants of the study's told trials (every runner's) and those this runner has asked for."""
    for t in told(study):
        v = trial_variant(exp, dict(t.params))
        seen.setdefault(v.variant_id, v)
    return seen


def _trials(optuna: Any, study: Any, exp: Experiment, opts: RunOptions, watcher: Progress,
            after_variant: Callable[[Path], None] | None) -> None:
    spec = exp.search
    assert spec is not None
    out = opts.out_dir
    seen = _seen(exp, study, {})
    runner.write_manifest(out, exp, list(seen.values()))
    spent = runner.budget_spent(exp, out, _results(out, list(seen.values())))
    t0 = time.monotonic()
    while not spent and (spec.timeout_s is None or time.monotonic() - t0 < spec.timeout_s):
        every = study.get_trials(deepcopy=False)
        running = sum(1 for t in every if t.state == optuna.trial.TrialState.RUNNING)
        if len(told(study)) + running >= spec.trials:
            break
        trial = study.ask()
        try:
            trial.set_user_attr(RUNNER_ATTR, _me())
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # a runner starting that instant took it for a dead runner's: failed, its settings enqueued
        if _surplus(optuna, study, trial, spec.trials):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)  # never told a variant: not counted
            break
        v = trial_variant(exp, {d.field: _suggest(trial, d) for d in spec.space})
        seen = _seen(exp, study, {**seen, v.variant_id: v})
        runner.write_manifest(out, exp, list(seen.values()))
        with _trial_in_env(trial_env(_url(out, opts.storage), study.study_name, trial._trial_id,
                                     spec.objectives[0][0], spec.pruner) if spec.pruner.kind != "none" else ""):
            r = runner.run_in_folder(out, v, opts.isolation, watcher, max_retries=opts.max_retries)
        assert r is not None  # waited for the claim
        _tell(optuna, study, trial, r, spec.objectives)
        watcher.end()
        spent = runner.budget_spent(exp, out, _results(out, list(seen.values())))
        if after_variant is not None:
            after_variant(out)


@contextlib.contextmanager
def _trial_in_env(setting: str) -> Iterator[None]:
    """The trial the worker reports to (its process inherits the variable; an inline run reads it here)."""
    if not setting:
        yield
        return
    os.environ[TRIAL_ENV] = setting
    try:
        yield
    finally:
        os.environ.pop(TRIAL_ENV, None)


def _results(out: Path, variants: list[Variant]) -> list[VariantResult]:
    got = [read_result(runner.variant_dir(out, v.variant_id) / "result.json") for v in variants]
    return [r for r in got if r is not None]
