"""Optuna pruning of a search's trials while they train (``search.pruner``; run by ``experiment.search``).

The runner asks Optuna for a trial and runs its variant in a worker; the worker opens the same study (the
storage's URL, the study's name and the trial's id in ``GREENTRAIN_OPTUNA_TRIAL``), and a Trainer callback
reports the ``eval_loss`` of every evaluation inside training as the trial's intermediate value at that global
step (``Trial.report``) and stops training when the pruner says so (``Trial.should_prune``), as
optuna-integration's ``TransformersPruningCallback`` does. The pruned variant skips its final evaluation and
generation, its result is ``pruned`` with what it measured (energy, CO2e, $ of the steps it ran), and the runner
tells Optuna ``TrialState.PRUNED`` (Optuna keeps the last intermediate value as the trial's value). The report's
F12 finding counts the pruned trials, the energy they used (in F11's total: nothing is hidden) and the energy
their remaining steps would have used at their own measured rate.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.experiment.findings import Finding
from greentrain.experiment.results import VariantResult
from greentrain.experiment.search_spec import PrunerSpec

TRIAL_ENV = "GREENTRAIN_OPTUNA_TRIAL"  # JSON: storage, study, trial_id, objective, pruner


def make_pruner(optuna: Any, p: PrunerSpec) -> Any:
    """Optuna's pruner for the spec: MedianPruner, HyperbandPruner (resource = global steps) or NopPruner."""
    if p.kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=p.startup_trials, n_warmup_steps=p.warmup_steps)
    if p.kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=p.min_resource, max_resource=p.max_resource,
                                              reduction_factor=p.reduction_factor)
    return optuna.pruners.NopPruner()


def trial_env(storage_url: str, study: str, trial_id: int, objective: str, pruner: PrunerSpec) -> str:
    return json.dumps({"storage": storage_url, "study": study, "trial_id": trial_id, "objective": objective,
                       "pruner": asdict(pruner)})


def check_storage(url: str, field: str = "--storage") -> str:
    """``url`` checked before any work (Optuna and torch load for 10-20 s first): ``journal:PATH`` and
    ``sqlite:///PATH`` need PATH's folder (a missing one was an exit-1 ``No such file or directory`` after the
    first trial was asked for); an in-memory SQLite database (``sqlite://``) is neither kept nor seen by the workers."""
    from pathlib import Path

    if not url:
        return url
    rule = "must be journal:PATH, sqlite:///PATH or another SQLAlchemy URL (postgresql://..., mysql://...)"
    if url.startswith("journal:") or url.startswith("sqlite:"):
        path = url.removeprefix("journal:") if url.startswith("journal:") else url.removeprefix("sqlite:///")
        if not url.startswith("journal:") and (not url.startswith("sqlite:///") or path in ("", ":memory:")):
            raise ConfigError(field, url, "is an in-memory database, neither kept nor seen by the variants' "
                              "workers: give sqlite:///PATH")
        if not path.strip():
            raise ConfigError(field, url, "names no file: give journal:PATH")
        p = Path(path).absolute()
        if p.is_dir():
            raise ConfigError(field, url, "is a folder: name a file in it")
        if not p.parent.is_dir():
            raise ConfigError(field, url, f"names a file in {str(p.parent)!r}, which is not an existing folder")
        return url
    require("://" in url and url.split("://", 1)[0].strip() != "", field, url, rule)
    _check_driver(url, field)
    return url


def _check_driver(url: str, field: str) -> None:
    """A database URL's SQLAlchemy dialect and driver loaded, nothing connected or written: an unknown dialect or a
    missing driver is refused here, not after the variants' check has loaded torch in a worker (4-20 s)."""
    try:
        from sqlalchemy.engine import make_url
    except ImportError:  # no optuna either: the search refuses that in one line
        return
    try:
        dialect: Any = make_url(url).get_dialect()
        (getattr(dialect, "import_dbapi", None) or dialect.dbapi)()  # SQLAlchemy 2's name; 1.4's
    except Exception as e:  # what open_storage would raise from RDBStorage, in the same words
        raise ConfigError(field, url, f"cannot be opened as an Optuna storage: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None


def absolute_storage(url: str) -> str:
    """``journal:PATH`` and ``sqlite:///PATH`` with PATH absolute (a worker's working directory is not the
    runner's); any other URL as it is."""
    from pathlib import Path

    if url.startswith("journal:"):
        return f"journal:{Path(url.removeprefix('journal:')).absolute()}"
    if url.startswith("sqlite:///") and url.removeprefix("sqlite:///") not in ("", ":memory:"):
        return f"sqlite:///{Path(url.removeprefix('sqlite:///')).absolute()}"
    return url


def open_storage(optuna: Any, url: str) -> Any:
    """``journal:PATH`` a journal file (its writes locked, for runners sharing a file system), else an SQLAlchemy
    URL (``sqlite:///PATH`` for one host, PostgreSQL or MySQL for several): what optuna-dashboard opens too."""
    from optuna.storages import JournalStorage, RDBStorage
    from optuna.storages.journal import JournalFileBackend

    if url.startswith("journal:"):
        return JournalStorage(JournalFileBackend(url.removeprefix("journal:")))
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite:") else {}  # runners wait, not fail
    for tries_left in (2, 1, 0):
        try:
            return RDBStorage(url, engine_kwargs=kwargs)
        except Exception as e:  # an unknown dialect, a missing driver, an unreachable server: one line
            if tries_left and type(e).__name__ in ("IntegrityError", "OperationalError"):
                time.sleep(1.0)  # another runner was creating the schema at the same instant
                continue
            raise ConfigError("storage", url, f"cannot be opened as an Optuna storage: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from None
    raise AssertionError("unreachable")


class _Reporter:
    """The worker's handle on its trial: report a value at a step, and whether the pruner stops it here."""

    def __init__(self, setting: dict[str, Any]) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.pruner = PrunerSpec(**setting["pruner"])
        study = optuna.load_study(study_name=setting["study"], storage=open_storage(optuna, setting["storage"]),
                                  pruner=make_pruner(optuna, self.pruner))
        self.trial = optuna.trial.Trial(study, int(setting["trial_id"]))
        self.objective = str(setting["objective"])
        self.pruned_at_step: int | None = None
        self.value: float | None = None

    def evaluated(self, eval_loss: float, step: int) -> bool:
        """Report the evaluation (the objective's value: eval_loss, or its exp for perplexity); True: prune."""
        value = math.exp(eval_loss) if self.objective == "perplexity" else eval_loss
        self.trial.report(value, step)
        if self.trial.should_prune():
            self.pruned_at_step, self.value = step, value
            return True
        return False


def pruning_callback() -> Any:
    """A TrainerCallback for the trial named in ``GREENTRAIN_OPTUNA_TRIAL``; None outside a pruned search."""
    text = os.environ.get(TRIAL_ENV, "")
    if not text:
        return None
    from transformers import TrainerCallback

    class OptunaPruning(TrainerCallback):
        def __init__(self) -> None:
            self.reporter = _Reporter(json.loads(text))
            self.reported: set[int] = set()

        def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kw: Any) -> None:
            loss, step = (metrics or {}).get("eval_loss"), state.global_step
            if loss is None or step == 0 or step in self.reported:  # the final evaluation repeats the last step
                return
            self.reported.add(step)
            if self.reporter.evaluated(float(loss), step):
                control.should_training_stop = True

        @property
        def pruned_at_step(self) -> int | None:
            return self.reporter.pruned_at_step

        def finish(self, measured: Any) -> Any:
            """The worker's measurements of a pruned trial: why, and the last in-training eval_loss as its own."""
            measured.pruned, measured.eval_loss = self.reason(), measured.in_train.losses[-1]
            return measured

        def reason(self) -> str:
            r = self.reporter
            return (f"pruned by Optuna's {r.pruner.kind} pruner at step {r.pruned_at_step} "
                    f"({r.objective} {r.value:.4g})")

    return OptunaPruning()


def pruning_finding(results: Sequence[VariantResult], max_steps: dict[str, int]) -> list[Finding]:
    """F12: the pruned trials, the energy they used, and what their remaining steps would have used at each one's
    own measured training energy per step (an estimate: evaluation and generation skipped are not counted)."""
    pruned = [r for r in results if r.status == "pruned"]
    if not pruned:
        return []
    used_j = sum(r.energy_j for r in pruned)
    avoided_j = sum(r.train_energy_j / r.num_steps * max(0, max_steps.get(r.variant_id, 0) - r.num_steps)
                    for r in pruned if r.num_steps > 0)
    g = sum((r.emissions_kg_co2e or 0.0) * 1e3 for r in pruned)
    wh = units.j_to_kwh(1.0) * 1e3
    text = (f"{len(pruned)} of {len(results)} trial(s) pruned ("
            + ", ".join(f"{r.variant_id} at step {r.num_steps}" for r in pruned)
            + f"): they used {used_j * wh:.4g} Wh ({g:.4g} g CO2e, in the experiment's total); running them to "
            f"max_steps would have used about {avoided_j * wh:.4g} Wh more in training")
    return [Finding(kind="F12", text=text, variants=tuple(r.variant_id for r in pruned),
                    numbers=(("pruned_energy_j", used_j), ("avoided_energy_j", avoided_j), ("pruned_g_co2e", g)))]
