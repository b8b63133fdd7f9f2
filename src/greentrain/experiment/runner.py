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
import csv
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from greentrain.config import require
from greentrain.errors import ConfigError, GreentrainError
from greentrain.experiment.cost import price, site_of
from greentrain.experiment.extras import missing_modules, require_modules
from greentrain.experiment.results import VariantResult, read_result, write_result, write_text_atomic
from greentrain.experiment.spec import Experiment, Variant
from greentrain.results.experiment import ExperimentManifest

DONE = ("ok", "not_applicable")
WORKER_ERROR = "greentrain experiment: error: "  # the worker's one-line refusal on stderr
ATTEMPT_COLUMNS = ("variant_id", "attempt", "config_hash", "status", "wall_s", "energy_j", "emissions_kg_co2e",
                   "cost_usd", "folder")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    out_dir: Path
    only: tuple[str, ...] = ()
    isolation: str = "process"  # process | inline
    fresh: bool = False
    over_budget_ok: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """A earlier attempt moved aside: what it spent."""

    variant_id: str
    attempt: int
    config_hash: str
    status: str  # killed | failed | superseded
    wall_s: float
    energy_j: float
    emissions_kg_co2e: float | None
    cost_usd: float | None
    folder: str

    @property
    def wasted(self) -> bool:
        return self.status in ("killed", "failed")


def safe_name(variant_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+@-]", "_", variant_id)


def variant_dir(out_dir: Path, variant_id: str) -> Path:
    return out_dir / "variants" / safe_name(variant_id)


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


def _record_energy_j(folder: Path) -> tuple[float, float]:
    """(wall seconds, IT energy) recorded by the phase trackers in ``folder`` (a killed run's records too)."""
    from greentrain.measure.records import read_jsonl
    from greentrain.measure.summary import summarize

    wall = energy = 0.0
    for path in sorted(folder.glob("*.jsonl")):
        if path.name == "predictions.jsonl":
            continue
        try:
            m = summarize(read_jsonl(path))
        except ConfigError:
            continue
        wall, energy = wall + m.duration_s, energy + m.it_energy_j
    return wall, energy


def previous_attempts(out_dir: Path) -> list[Attempt]:
    path = out_dir / "attempts.csv"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))

    def opt(x: str) -> float | None:
        return float(x) if x not in ("", "None") else None

    return [Attempt(variant_id=r["variant_id"], attempt=int(r["attempt"]), config_hash=r["config_hash"],
                    status=r["status"], wall_s=float(r["wall_s"]), energy_j=float(r["energy_j"]),
                    emissions_kg_co2e=opt(r["emissions_kg_co2e"]), cost_usd=opt(r["cost_usd"]), folder=r["folder"])
            for r in rows]


def _append_attempt(out_dir: Path, a: Attempt) -> None:
    path = out_dir / "attempts.csv"
    new = not path.is_file()
    with path.open("a", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(ATTEMPT_COLUMNS)
        w.writerow([getattr(a, c) for c in ATTEMPT_COLUMNS])


def _move_aside(out_dir: Path, v: Variant, old: VariantResult | None, attempts: list[Attempt]) -> Attempt:
    """Move an unfinished, failed or superseded attempt to DIR/attempts/ and record what it spent."""
    folder = variant_dir(out_dir, v.variant_id)
    n = 1 + sum(1 for a in attempts if a.variant_id == v.variant_id)
    dest = out_dir / "attempts" / f"{safe_name(v.variant_id)}-{n}"
    wall, energy = _record_energy_j(folder)
    if old is None:
        status = "killed"
    elif old.status in DONE or old.status == "skipped_budget":
        status = "superseded"
    else:
        status = "failed"
    p = price(energy_j=energy, wall_s=wall, site=site_of(v.job.site), usd_per_hour=v.job.site.usd_per_hour)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder), str(dest))
    a = Attempt(variant_id=v.variant_id, attempt=n, config_hash=old.config_hash if old else "?", status=status,
                wall_s=wall, energy_j=energy, emissions_kg_co2e=p.emissions_kg_co2e, cost_usd=p.cost_usd,
                folder=str(dest.relative_to(out_dir)))
    _append_attempt(out_dir, a)
    return a


def _run_one(v: Variant, folder: Path, isolation: str, attempt: int, wasted_j: float) -> VariantResult:
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
    env = {**os.environ, "GREENTRAIN_EXPERIMENT_RUNNER_PID": str(os.getpid())}
    proc = subprocess.run([sys.executable, "-m", "greentrain.experiment.worker", str(spec_path)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=env)
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        raise GreentrainError(lines[-1].removeprefix(WORKER_ERROR) if lines else "refused by the worker")
    got = read_result(folder / "result.json")
    if got is not None:
        return got
    # the worker died without a result (killed, out of memory)
    tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    r = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, axis_values=v.axis_values,
                      seed=v.seed, attempts=attempt, status="failed",
                      reason=f"worker exited {proc.returncode} without a result {tail}".strip(),
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

    def close(self) -> None:
        pass


def precheck(variants: list[Variant], isolation: str) -> None:
    """The extra installed, and training arguments checked against the installed transformers for every variant,
    before any trains."""
    missing = missing_modules()
    if missing:
        raise ConfigError("experiment run", ", ".join(missing), "not installed: pip install 'greentrain[experiment]'")
    if isolation == "inline":
        from greentrain.experiment.worker import check_variants

        check_variants([v.to_dict() for v in variants])
        return
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump([v.to_dict() for v in variants], f)
    try:
        proc = subprocess.run([sys.executable, "-m", "greentrain.experiment.worker", "--check", f.name],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    finally:
        Path(f.name).unlink(missing_ok=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise GreentrainError(lines[-1].removeprefix(WORKER_ERROR) if lines else f"check exited {proc.returncode}")


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


def write_manifest(out: Path, exp: Experiment, variants: Sequence[Variant]) -> None:
    """``DIR/experiment.json``: what ``status`` and ``report`` read (name, site, task, the variants)."""
    manifest = {**ExperimentManifest.head(), "name": exp.name, "file": exp.path, "combine": exp.combine,
                "task": exp.base.task, "site": exp.base.resolved["site"],
                "variants": [{"variant_id": v.variant_id, "config_hash": v.config_hash,
                              "max_steps": v.job.train.max_steps,
                              "axis_values": [[k, val] for k, val in v.axis_values]} for v in variants]}
    write_text_atomic(out / "experiment.json", json.dumps(manifest, indent=1))


def start(exp: Experiment, opts: RunOptions, chosen: list[Variant]) -> None:
    """Checks before anything is written: the budget of the plan, the extras, the training arguments."""
    from greentrain.experiment.plan import plan_experiment

    plan = plan_experiment(exp)
    if plan.over_budget and not opts.over_budget_ok:
        raise over_budget_error(plan.over_budget[0])
    if exp.base.mlflow:
        require_modules(("mlflow",), "mlflow", "tracking.mlflow", exp.base.mlflow)
    precheck(chosen, opts.isolation)


def fresh_start(out: Path) -> None:
    for sub in ("variants", "attempts"):
        shutil.rmtree(out / sub, ignore_errors=True)
    for name in ("attempts.csv", "optuna.journal", "mlflow.db"):
        (out / name).unlink(missing_ok=True)


def run_experiment(exp: Experiment, opts: RunOptions, *, progress: Callable[[int], Progress] | None = None,
                   after_variant: Callable[[Path], None] | None = None) -> list[VariantResult]:
    """Run (or resume) every selected variant; returns their results in the experiment's order. ``progress``
    makes the progress display for the number of variants chosen (none by default). An experiment with a
    ``search`` section runs through ``experiment.search.run_search`` (Optuna's trials) instead."""
    require(exp.search is None, "search", exp.name, "a search runs through greentrain.experiment.search.run_search")
    known = {v.variant_id for v in exp.variants}
    for vid in opts.only:
        if vid not in known:
            from greentrain.errors import did_you_mean

            raise ConfigError("only", vid, "no such variant" + did_you_mean(vid, known))
    chosen = [v for v in exp.variants if not opts.only or v.variant_id in opts.only]
    start(exp, opts, chosen)
    out = opts.out_dir
    with locked(out):
        if opts.fresh:
            fresh_start(out)
        write_manifest(out, exp, exp.variants)
        return _run_all(exp, chosen, opts, progress, after_variant)


def budget_spent(exp: Experiment, out: Path, results: list[VariantResult]) -> tuple[str, ...]:
    """The budget limits the measured totals (energy with the waste of failed attempts, CO2e, $) exceed."""
    from greentrain.experiment.plan import budget_breaches

    energy, kg, usd = _measured_totals(results, previous_attempts(out))
    return budget_breaches(exp.base.budget, energy, kg, usd, "measured")


def run_in_folder(out: Path, v: Variant, isolation: str, watcher: Progress, spent_over: tuple[str, ...] = ()
                  ) -> VariantResult:
    """One variant: its result when finished with the same hash; else any earlier attempt moved aside, then run
    (or recorded as ``skipped_budget`` when the budget is spent)."""
    folder = variant_dir(out, v.variant_id)
    old = read_result(folder / "result.json")
    if old is not None and old.config_hash == v.config_hash and old.status in DONE:
        return old
    attempts = previous_attempts(out)
    if folder.exists() and any(folder.iterdir()):
        attempts.append(_move_aside(out, v, old, attempts))
    mine = [a for a in attempts if a.variant_id == v.variant_id]
    if spent_over:
        r = VariantResult(variant_id=v.variant_id, config_hash=v.config_hash, axis_values=v.axis_values,
                          seed=v.seed, status="skipped_budget", reason="; ".join(spent_over))
        folder.mkdir(parents=True, exist_ok=True)
        write_result(folder / "result.json", r)
        return r
    watcher.begin(v.variant_id, v.job.train.max_steps, folder)
    return _run_one(v, folder, isolation, len(mine) + 1, sum(a.energy_j for a in mine if a.wasted))


def _run_all(exp: Experiment, chosen: list[Variant], opts: RunOptions, progress: Callable[[int], Progress] | None,
             after_variant: Callable[[Path], None] | None) -> list[VariantResult]:
    out = opts.out_dir
    results: list[VariantResult] = []
    watcher = progress(len(chosen)) if progress is not None else NoProgress()
    spent_over: tuple[str, ...] = ()
    try:
        for v in chosen:
            results.append(run_in_folder(out, v, opts.isolation, watcher, spent_over))
            watcher.end()
            spent_over = budget_spent(exp, out, results)
            if after_variant is not None:
                after_variant(out)
    finally:
        watcher.close()
    return results
