"""MLflow as its users expect (the ``mlflow`` extra): ``tracking: {mlflow: true}`` in the experiment file, or
``greentrain experiment report DIR --mlflow [URI]``.

- One parent run per experiment (run name = the experiment's name, tag ``greentrain.parent``), one nested child
  run per variant (``mlflow.parentRunId``), logged as soon as the variant finishes (``experiment run`` calls
  ``log_variants`` after each one), with the variant's real start and end times (``started_unix``, ``wall_s``).
- Step metrics: the Trainer's log history (``trainer_log_history.json`` in the variant's folder, written by
  ``GreentrainTrainerCallback``: loss, learning rate, grad norm and greentrain's energy, CO2e, tokens/s per
  logging step), each at its step; the result's figures as final metrics.
- Artifacts: the variant's ``result.json`` and log history on its run; ``report.md``, ``results.csv``,
  ``emissions.csv`` and the plots on the parent (refreshed at each call).
- Where: ``MLFLOW_TRACKING_URI`` and ``MLFLOW_EXPERIMENT_NAME`` are honoured when no URI is given; otherwise
  ``true`` (or ``--mlflow`` alone) tracks into ``sqlite:///DIR/mlflow.db`` with artifacts in
  ``DIR/mlflow-artifacts`` (MLflow 3 refuses a file store ``./mlruns`` unless ``MLFLOW_ALLOW_FILE_STORE=true``).

A run is tagged with its variant's id and config hash; a variant already logged with the same hash is not
logged again, so rerunning ``run`` or ``report`` adds no duplicate. Only finished variants (``ok``,
``not_applicable``) are logged: their results never change for a given hash.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from greentrain.errors import ConfigError
from greentrain.experiment.extras import require_modules
from greentrain.experiment.results import VariantResult
from greentrain.experiment.runner import variant_dir

MLFLOW_DB = "mlflow.db"
ARTIFACTS = "mlflow-artifacts"
ID_TAG, HASH_TAG, PARENT_TAG = "greentrain.variant_id", "greentrain.config_hash", "greentrain.parent"
LOGGED = ("ok", "not_applicable")
LOG_HISTORY = "trainer_log_history.json"  # measure/hf.py GreentrainTrainerCallback writes it
PARENT_ARTIFACTS = ("report.md", "results.csv", "results.json", "emissions.csv", "predictions.csv",
                    "attempts.csv")


def require_mlflow(field: str, value: object) -> None:
    """Before any work: one line naming the extra when mlflow is not installed."""
    require_modules(("mlflow",), "mlflow", field, value)


def tracking_uri(out_dir: Path, setting: str | bool | None) -> str:
    """The tracking URI: a given URI; else ``MLFLOW_TRACKING_URI``; else (``true`` or an empty setting) the
    SQLite store in the experiment folder."""
    if setting is True or setting in (None, ""):
        env = os.environ.get("MLFLOW_TRACKING_URI", "")
        return env or f"sqlite:///{(out_dir / MLFLOW_DB).resolve()}"
    return str(setting)


def _params(r: VariantResult) -> dict[str, str]:
    out = {k: str(v) for k, v in r.axis_values}
    out.update(task=r.task, seed=str(r.seed), status=r.status, device=r.device,
               precision_effective=r.precision_effective or r.precision_requested)
    return {k: v[:500] for k, v in out.items()}


def _metrics(r: VariantResult) -> dict[str, float]:
    out = {}
    for f in dataclasses.fields(r):
        v = getattr(r, f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f.name] = float(v)
    return out


def _experiment_id(client: Any, name: str, out_dir: Path, default_store: bool) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    where = str((out_dir / ARTIFACTS).resolve()) if default_store else None
    return str(client.create_experiment(name, artifact_location=where))


def _step_metrics(folder: Path, end_ms: int) -> list[tuple[str, float, int, int]]:
    """(key, value, timestamp ms, step) of each number in the Trainer's log history of a variant."""
    try:
        history = json.loads((folder / LOG_HISTORY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for entry in history if isinstance(history, list) else []:
        step = int(entry.get("step", 0))
        for k, v in entry.items():
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append((k, float(v), end_ms, step))
    return out


def _parent(client: Any, eid: str, name: str, out_dir: Path) -> str:
    """The experiment's parent run (one per experiment name and folder), created on first use."""
    runs = client.search_runs([eid], filter_string=f"tags.`{PARENT_TAG}` = '{out_dir.resolve()}'", max_results=1)
    if runs:
        return str(runs[0].info.run_id)
    return str(client.create_run(eid, run_name=name, tags={PARENT_TAG: str(out_dir.resolve())}).info.run_id)


def _parent_artifacts(client: Any, run_id: str, out_dir: Path) -> None:
    for name in PARENT_ARTIFACTS:
        if (out_dir / name).is_file():
            client.log_artifact(run_id, str(out_dir / name))
    for png in sorted(out_dir.glob("*.png")) + sorted((out_dir / "plots").glob("*.png")):
        client.log_artifact(run_id, str(png), artifact_path="plots")


def _log_one(client: Any, eid: str, parent: str, r: VariantResult, folder: Path) -> None:
    from mlflow.entities import Metric, Param, RunTag

    start_ms = int(r.started_unix * 1000) if r.started_unix > 0 else None
    end_ms = int((r.started_unix + r.wall_s) * 1000) if r.started_unix > 0 else None
    run = client.create_run(eid, run_name=r.variant_id, start_time=start_ms,
                            tags={ID_TAG: r.variant_id, HASH_TAG: r.config_hash, "mlflow.parentRunId": parent})
    ts = end_ms or 0
    metrics = [Metric(k, v, ts, step) for k, v, _t, step in _step_metrics(folder, ts)]
    metrics += [Metric(k, v, ts, r.num_steps) for k, v in _metrics(r).items()]
    for i in range(0, len(metrics), 1000):  # MLflow's log_batch takes at most 1,000 metrics
        client.log_batch(run.info.run_id, metrics=metrics[i:i + 1000],
                         params=[Param(k, v) for k, v in _params(r).items()] if i == 0 else [],
                         tags=[RunTag("greentrain.reason", r.reason)] if r.reason and i == 0 else [])
    for name in ("result.json", LOG_HISTORY):
        if (folder / name).is_file():
            client.log_artifact(run.info.run_id, str(folder / name))
    client.set_terminated(run.info.run_id, status="FINISHED", end_time=end_ms)


def log_variants(name: str, results: tuple[VariantResult, ...] | list[VariantResult], out_dir: Path,
                 setting: str | bool | None) -> tuple[int, int]:
    """Log each finished variant not yet in the store as a child of the experiment's parent run, and the
    report's files on the parent; returns (runs created, already there)."""
    require_mlflow("tracking.mlflow", setting)
    import logging

    from mlflow.tracking import MlflowClient

    for logger in ("mlflow", "alembic"):  # their INFO lines about creating the SQLite tables (set on import)
        logging.getLogger(logger).setLevel(logging.WARNING)

    from mlflow.exceptions import MlflowException

    uri = tracking_uri(out_dir, setting)
    try:  # a file:// store (refused by mlflow 3), a bad scheme: mlflow's exception was a traceback
        client = MlflowClient(tracking_uri=uri)
        eid = _experiment_id(client, os.environ.get("MLFLOW_EXPERIMENT_NAME") or name, out_dir,
                             uri == f"sqlite:///{(out_dir / MLFLOW_DB).resolve()}")
    except MlflowException as e:
        reason = " ".join(str(e.message).split())[:200]
        raise ConfigError("tracking.mlflow", uri, f"is not a usable MLflow tracking store: {reason}") from None
    parent = _parent(client, eid, name, out_dir)
    existing = {(r.data.tags.get(ID_TAG), r.data.tags.get(HASH_TAG))
                for r in client.search_runs([eid], max_results=50_000)}
    created = present = 0
    for r in results:
        if r.status not in LOGGED:
            continue
        if (r.variant_id, r.config_hash) in existing:
            present += 1
            continue
        _log_one(client, eid, parent, r, variant_dir(out_dir, r.variant_id))
        existing.add((r.variant_id, r.config_hash))
        created += 1
    _parent_artifacts(client, parent, out_dir)
    ended = [r.started_unix + r.wall_s for r in results if r.status in LOGGED and r.started_unix > 0]
    client.set_terminated(parent, status="FINISHED", end_time=int(max(ended) * 1000) if ended else None)
    return created, present
