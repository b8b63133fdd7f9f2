"""The runner (no torch): every variant of an experiment in turn, resumable, one output folder, one runner.

    DIR/.lock                         fcntl lock: a second runner on the same folder is refused
    DIR/experiment.json               name, file, and the variants (id, hash, settings)
    DIR/variants/<id>/variant.json    the worker's input
    DIR/variants/<id>/result.json     written atomically by the worker: present = finished
    DIR/variants/<id>/*.jsonl         the phases' run records (Tracker)
    DIR/attempts/<id>-<n>/            an attempt that was killed, failed or superseded, moved aside
    DIR/attempts.csv                  one row per moved attempt: its energy, CO2e, $ (waste when killed or failed)

Resume follows Ray Tune's ``Tuner.restore``: a variant whose result is ``ok`` or ``not_applicable`` with the
same config hash is never run again; anything else left in its folder is an earlier attempt and is moved aside.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError, GreentrainError
from greentrain.experiment import ranks
from greentrain.experiment.attempts import (  # noqa: F401 (names the report and tests take from here)
    ATTEMPT_COLUMNS,
    DONE,
    Attempt,
    move_aside,
    previous_attempts,
    safe_name,
    variant_dir,
)
from greentrain.experiment.executors import Slot, live_worker, run_worker, stopping
from greentrain.experiment.extras import missing_modules, require_modules
from greentrain.experiment.results import VariantResult, read_result, write_result, write_text_atomic
from greentrain.experiment.spec import Experiment, Variant
from greentrain.experiment.warm import WORKER_ERROR, WarmWorker
from greentrain.results.experiment import ExperimentManifest

FAILED_PREFIX = "greentrain experiment: variant "  # a worker's (a rank's) one line when its variant raised
MAX_RETRIES = 100  # --max-retries: runs again a variant whose worker a signal killed (OOM, preemption)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    out_dir: Path
    only: tuple[str, ...] = ()
    isolation: str = "process"  # process | inline
    fresh: bool = False
    over_budget_ok: bool = False
    executor: str = "local"  # local | ray | slurm (experiment/executors.py, experiment/cluster.py)
    jobs: int = 1  # local: variants at once, each in its own worker process
    max_retries: int = 0  # a worker killed by a signal (OOM, preemption): run again, the attempt counted as waste
    ray_address: str = ""  # ray: ray.init(address=...); "" starts a local cluster
    storage: str = ""  # search: the Optuna storage URL; "" is DIR/optuna.journal
    slurm: tuple[tuple[str, str], ...] = ()  # slurm: submitit parameters (partition, gpus_per_node, timeout_min)


@contextlib.contextmanager
def locked(out_dir: Path) -> Iterator[None]:
    """Hold ``DIR/.lock`` for the whole run; another runner on the folder gets a ConfigError."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        f: IO[str] = (out_dir / ".lock").open("a+", encoding="utf-8")
    except OSError as e:
        raise ConfigError("out", str(out_dir), f"cannot be written: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise ConfigError("out", str(out_dir), f"is locked by another experiment runner (pid {holder})") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        yield
    finally:
        f.close()


def _run_one(v: Variant, folder: Path, isolation: str, attempt: int, wasted_j: float,
             env_extra: Sequence[tuple[str, str]] = (), killed_ok: bool = False,
             warm: WarmWorker | None = None) -> VariantResult | None:
    """Run the variant in ``folder`` (in ``warm``'s checked worker when it waits in this environment); None when
    ``killed_ok`` and its worker was killed by a signal (no result)."""
    folder.mkdir(parents=True, exist_ok=True)
    payload = {**v.to_dict(), "attempt": attempt, "wasted_energy_j": wasted_j}
    spec_path = folder / "variant.json"
    text = json.dumps(payload, indent=1)
    write_text_atomic(spec_path, text, "variant")
    t0 = time.perf_counter()
    if isolation == "inline":
        from greentrain.experiment.worker import failed_result, run_variant

        try:
            return run_variant(payload, folder)
        except ConfigError:
            raise
        except Exception as e:
            r = failed_result(payload, f"{type(e).__name__}: {e}", time.perf_counter() - t0)
            write_result(folder / "result.json", r)
            return r
    taken = warm.take(env_extra) if warm is not None else None
    if taken is not None and warm is not None:  # the worker that checked every variant (experiment/warm.py)
        with live_worker(taken):
            code, stderr = warm.run(taken, str(spec_path))
    else:
        env = {**os.environ, **dict(env_extra), ranks.PARENT_ENV: str(os.getpid())}
        # runtime.devices > 1: the launcher that becomes torchrun over the worker (experiment/ranks.py)
        many = v.job.devices > 1 or v.job.nodes > 1
        module = "greentrain.experiment.ranks" if many else "greentrain.experiment.worker"
        code, stderr = run_worker([sys.executable, "-m", module, str(spec_path)], env)
    lines = stderr.strip().splitlines()
    refusals = [x for x in lines if x.startswith(WORKER_ERROR)]  # under torchrun: a rank's, torchrun exits 1
    if code == 2 or (refusals and code != 0):
        raise GreentrainError((refusals or lines or ["refused by the worker"])[-1].removeprefix(WORKER_ERROR))
    got = read_result(folder / "result.json")
    if got is not None:
        return got
    # OOM killer, preemption: retried; stopped by run_pool (a signal to the runner): moved aside, rerun next time
    if (killed_ok or stopping()) and (code < 0 or ranks.rank_killed(stderr)):
        return None
    # the worker died without a result (killed, out of memory; under torchrun: a rank's error, then the others)
    tail = ([x for x in lines if x.startswith(FAILED_PREFIX)] or lines or [""])[-1]
    r = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, axis_values=v.axis_values,
                      seed=v.seed, attempts=attempt, status="failed",
                      reason=f"worker exited {code} without a result {tail}".strip(),
                      wall_s=time.perf_counter() - t0)
    write_result(folder / "result.json", r)
    return r


class Progress(Protocol):
    """What the runner tells a progress display (``report.experiment.RichProgress`` draws a bar)."""

    def begin(self, variant_id: str, max_steps: int, folder: Path) -> None: ...

    def end(self) -> None: ...

    def close(self) -> None: ...


class NoProgress:
    def begin(self, variant_id: str, max_steps: int, folder: Path) -> None:
        pass

    def end(self) -> None:
        pass

    close = end


def precheck(variants: list[Variant], isolation: str, warm: WarmWorker | None = None) -> None:
    """The extra installed, and training arguments checked against the installed transformers for every variant,
    before any trains and before anything is written. Process isolation: by the first worker (``warm``, which
    then waits to run the first variant; without one, a worker started for the check alone)."""
    missing = missing_modules()
    if missing:
        raise ConfigError("experiment run", ", ".join(missing), "not installed: pip install 'greentrain[experiment]'")
    if isolation == "inline":
        from greentrain.experiment.warm import check_variants

        check_variants([v.to_dict() for v in variants])
        return
    with contextlib.ExitStack() as stack:
        if warm is None:
            warm = stack.enter_context(WarmWorker(runner_pid_env=ranks.PARENT_ENV))
        warm.check([v.to_dict() for v in variants])


def _measured_totals(results: list[VariantResult], attempts: list[Attempt]) -> tuple[float, float | None, float | None]:
    energy = sum(r.energy_j for r in results) + sum(a.energy_j for a in attempts if a.wasted)
    kg = [r.emissions_kg_co2e for r in results if r.status == "ok"]
    usd = [r.cost_usd for r in results if r.status == "ok"]
    return (energy, sum(x for x in kg if x is not None) if kg else None,
            sum(x for x in usd if x is not None) if usd else None)


def over_budget_error(sentence: str) -> ConfigError:
    """The refusal of a plan over budget: ``budget.max_kwh=0.05: the predicted total is ...`` as field, value, rule."""
    head, rest = sentence.split(": ", 1)
    field, limit = head.split("=", 1)
    return ConfigError(field, float(limit), f"{rest}: predicted over budget (RunOptions.over_budget_ok runs it "
                       "anyway)")


def spec_hash(exp: Experiment, variants: Sequence[Variant]) -> str:
    """What two runners (or two folders merged by ``report``) must agree on: the name and the variants' ids and
    hashes; a search's base job and space (its trials are found as it runs)."""
    import hashlib

    if exp.search is not None:
        key = ["search", exp.name, exp.base_hash, exp.search.fingerprint]
    else:
        key = ["axes", exp.name, *sorted(f"{v.variant_id}={v.config_hash}" for v in variants)]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def manifest_of(exp: Experiment, variants: Sequence[Variant]) -> dict[str, object]:
    """``DIR/experiment.json``: what ``status`` and ``report`` read (name, site, task, the variants)."""
    return {**ExperimentManifest.head(), "name": exp.name, "file": exp.path, "combine": exp.combine,
            "task": exp.base.task, "site": exp.base.resolved["site"],
            "spec_hash": spec_hash(exp, exp.variants if exp.search is None else variants),
            "variants": [{"variant_id": v.variant_id, "config_hash": v.config_hash,
                          "max_steps": v.job.train.max_steps,
                          "axis_values": [[k, val] for k, val in v.axis_values]} for v in variants]}


def write_manifest(out: Path, exp: Experiment, variants: Sequence[Variant]) -> None:
    write_text_atomic(out / "experiment.json", json.dumps(manifest_of(exp, variants), indent=1))


def check_executor(opts: RunOptions) -> None:
    """The executor options agree with each other (one line naming the field otherwise; the CLI names its flag)."""
    from greentrain.experiment.executors import EXECUTORS

    require(opts.executor in EXECUTORS, "executor", opts.executor, f"must be one of {', '.join(EXECUTORS)}")
    require(opts.jobs >= 1, "jobs", opts.jobs, "must be at least 1")
    # one worker process each (--jobs 1000000 hung starting them): config.BOUNDS num_threads, the largest hosts'
    require(BOUNDS["num_threads"].ok(opts.jobs), "jobs", opts.jobs, f"must be at most {BOUNDS['num_threads'].hi:,.0f} "
            f"worker processes: {BOUNDS['num_threads'].reason}")
    require(opts.max_retries >= 0, "max_retries", opts.max_retries, "must be at least 0")
    require(opts.max_retries <= MAX_RETRIES, "max_retries", opts.max_retries, f"must be at most {MAX_RETRIES} (a "
            f"variant killed {MAX_RETRIES} times is killed again: lower its memory or batch)")
    require(opts.jobs == 1 or opts.executor == "local", "jobs", opts.jobs,
            f"applies to the local executor (the {opts.executor} scheduler places the variants)")
    require(opts.jobs == 1 or opts.isolation == "process", "jobs", opts.jobs, "needs process isolation")


def check_devices(chosen: Sequence[Variant], opts: RunOptions) -> None:
    """Variants of several devices (runtime.devices) run as torchrun's processes: process isolation, and in the
    local pool a device group of at least as many GPUs for each worker (executors.check_device_groups)."""
    nodes = max((v.job.nodes for v in chosen), default=1)
    require(nodes == 1 or opts.executor != "local", "runtime.nodes", nodes, "needs executor ray or slurm (the "
            "local executor runs a variant on this one machine; give runtime.devices for its ranks here)")
    require(nodes == 1 or opts.isolation == "process", "runtime.nodes", nodes, "needs process isolation")
    most = max((v.job.devices for v in chosen), default=1)
    if most == 1:
        return
    require(opts.isolation == "process", "runtime.devices", most, "needs process isolation (torchrun starts one "
            "process per device)")
    if opts.executor == "local":
        from greentrain.experiment.executors import check_device_groups, local_slots

        check_device_groups(local_slots(opts.jobs), most, opts.jobs)


def start(exp: Experiment, opts: RunOptions, chosen: list[Variant], warm: WarmWorker | None = None) -> None:
    """Checks before anything is written: the budget of the plan, the extras, the training arguments (by
    ``warm``'s worker, which then waits for the first variant)."""
    from greentrain.experiment.plan import plan_experiment

    check_executor(opts)
    check_devices(chosen, opts)
    plan = plan_experiment(exp)
    if plan.over_budget and not opts.over_budget_ok:
        raise over_budget_error(plan.over_budget[0])
    if exp.base.mlflow:
        require_modules(("mlflow",), "mlflow", "tracking.mlflow", exp.base.mlflow)
    if opts.executor in ("ray", "slurm"):
        require_modules(("ray",) if opts.executor == "ray" else ("submitit",), opts.executor, "--executor",
                        opts.executor)
    if opts.executor == "slurm":  # submitit's parameters, before a worker loads torch (nothing written)
        from greentrain.experiment.slurm import slurm_executor
        slurm_executor(chosen, opts)
    precheck(chosen, opts.isolation, warm)


def fresh_start(out: Path) -> None:
    for sub in ("variants", "attempts"):
        shutil.rmtree(out / sub, ignore_errors=True)
    for name in ("attempts.csv", "optuna.journal", "mlflow.db"):
        (out / name).unlink(missing_ok=True)


def run_experiment(exp: Experiment, opts: RunOptions, *, progress: Callable[[int], Progress] | None = None,
                   after_variant: Callable[[Path], None] | None = None,
                   cluster: Callable[..., list[VariantResult]] | None = None) -> list[VariantResult]:
    """Run (or resume) every selected variant; returns their results in the experiment's order. ``progress``
    makes the progress display for the number of variants chosen (none by default). ``opts.executor`` ray or
    slurm: through ``cluster`` (``experiment.cluster.run_on_cluster``). An experiment with a ``search`` section
    runs through ``experiment.search.run_search`` (Optuna's trials) instead."""
    from greentrain.experiment.executors import joined

    require(exp.search is None, "search", exp.name, "a search runs through greentrain.experiment.search.run_search")
    require(not opts.storage, "storage", opts.storage, "applies to a search (a search: section), not to axes")
    known = {v.variant_id for v in exp.variants}
    for vid in opts.only:
        if vid not in known:
            from greentrain.errors import did_you_mean

            raise ConfigError("only", vid, "no such variant" + did_you_mean(vid, known))
    chosen = [v for v in exp.variants if not opts.only or v.variant_id in opts.only]
    require(opts.executor == "local" or cluster is not None, "executor", opts.executor,
            "needs cluster=greentrain.experiment.cluster.run_on_cluster")
    if opts.executor != "local":  # experiment/cluster.py: Ray tasks or a Slurm job array
        assert cluster is not None
        start(exp, opts, chosen)
        with joined(opts.out_dir, manifest_of(exp, exp.variants), opts.fresh, fresh_start):
            return cluster(exp, chosen, opts, after_variant)
    from greentrain.experiment.executors import local_slots

    check_executor(opts)
    check_devices(chosen, opts)  # before the first worker starts (start() checks again)
    slots = local_slots(opts.jobs)
    with WarmWorker(slots[0].env, ranks.PARENT_ENV) as warm:  # the first slot's worker checks, then runs
        start(exp, opts, chosen, warm)
        with joined(opts.out_dir, manifest_of(exp, exp.variants), opts.fresh, fresh_start):
            return _run_all(exp, chosen, opts, slots, progress, after_variant, warm)


def budget_spent(exp: Experiment, out: Path, results: list[VariantResult]) -> tuple[str, ...]:
    """The budget limits the measured totals (energy with the waste of failed attempts, CO2e, $) exceed."""
    from greentrain.experiment.plan import budget_breaches

    energy, kg, usd = _measured_totals(results, previous_attempts(out))
    return budget_breaches(exp.base.budget, energy, kg, usd, "measured")


def run_in_folder(out: Path, v: Variant, isolation: str, watcher: Progress, spent_over: tuple[str, ...] = (), *,
                  env: Sequence[tuple[str, str]] = (), wait: bool = True, max_retries: int = 0,
                  warm: WarmWorker | None = None) -> VariantResult | None:
    """One variant, under its claim (executors.claim): its result when finished with the same hash; else any
    earlier attempt moved aside, then run (or recorded as ``skipped_budget`` when the budget is spent); a worker
    killed by a signal is run again up to ``max_retries`` times. None when another runner holds the claim and
    not ``wait``."""
    from greentrain.experiment.executors import claim

    with claim(out, v.variant_id, wait) as mine:
        if not mine:
            return None
        for retry in range(max_retries + 1):
            r = _claimed(out, v, isolation, watcher, spent_over, env, retry < max_retries, warm)
            if r is not None:
                return r
        raise AssertionError("unreachable: the last try returns a result")


def _claimed(out: Path, v: Variant, isolation: str, watcher: Progress, spent_over: tuple[str, ...],
             env: Sequence[tuple[str, str]], killed_ok: bool, warm: WarmWorker | None) -> VariantResult | None:
    folder = variant_dir(out, v.variant_id)
    old = read_result(folder / "result.json")
    if old is not None and old.config_hash == v.config_hash and old.status in DONE:
        return old
    attempts = previous_attempts(out)
    if folder.exists() and any(folder.iterdir()):
        attempts.append(move_aside(out, v, old, attempts))
    mine = [a for a in attempts if a.variant_id == v.variant_id]
    if spent_over:
        r = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, axis_values=v.axis_values,
                          seed=v.seed, status="skipped_budget", reason="; ".join(spent_over))
        folder.mkdir(parents=True, exist_ok=True)
        write_result(folder / "result.json", r)
        return r
    watcher.begin(v.variant_id, v.job.train.max_steps, folder)
    return _run_one(v, folder, isolation, len(mine) + 1, sum(a.energy_j for a in mine if a.wasted), env, killed_ok,
                    warm)


def _run_all(exp: Experiment, chosen: list[Variant], opts: RunOptions, slots: list[Slot],
             progress: Callable[[int], Progress] | None, after_variant: Callable[[Path], None] | None,
             warm: WarmWorker) -> list[VariantResult]:
    """The local pool (``opts.jobs`` workers; one: in order, as a sequential run)."""
    from greentrain.experiment.executors import run_pool

    out = opts.out_dir
    done: dict[str, VariantResult] = {}
    watcher = progress(len(chosen)) if progress is not None else NoProgress()
    lock = threading.Lock()
    spent_over: list[tuple[str, ...]] = [()]

    def run(v: Variant, slot: Slot, wait: bool) -> VariantResult | None:
        r = run_in_folder(out, v, opts.isolation, watcher if len(slots) == 1 else NoProgress(), spent_over[0],
                          env=slot.env, wait=wait, max_retries=opts.max_retries, warm=warm)
        if r is None:
            return None
        with lock:
            done[v.variant_id] = r
            watcher.end()
            spent_over[0] = budget_spent(exp, out, list(done.values()))
            if after_variant is not None:
                after_variant(out)
        return r

    try:
        run_pool(chosen, slots, run)
    finally:
        watcher.close()
    return [done[v.variant_id] for v in chosen]
