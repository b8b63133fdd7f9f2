"""One MLflow run per variant (the ``mlflow`` extra): ``tracking: {mlflow: true}`` in the experiment file, or
``greentrain experiment report DIR --mlflow [URI]``.

``true`` (or ``--mlflow`` alone) tracks into ``sqlite:///DIR/mlflow.db`` with artifacts in ``DIR/mlflow-artifacts``:
MLflow 3 refuses a file store (``./mlruns``) unless ``MLFLOW_ALLOW_FILE_STORE=true``, so the experiment folder
holds a SQLite store instead. A run is tagged with its variant's id and config hash; a variant already logged with
the same hash is not logged again, so rerunning ``run`` or ``report`` adds no duplicate. Only finished variants
(``ok``, ``not_applicable``) are logged: their results never change for a given hash.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from greentrain.experiment.extras import require_modules
from greentrain.experiment.results import VariantResult

MLFLOW_DB = "mlflow.db"
ARTIFACTS = "mlflow-artifacts"
ID_TAG, HASH_TAG = "greentrain.variant_id", "greentrain.config_hash"
LOGGED = ("ok", "not_applicable")


def require_mlflow(field: str, value: object) -> None:
    """Before any work: one line naming the extra when mlflow is not installed."""
    require_modules(("mlflow",), "mlflow", field, value)


def tracking_uri(out_dir: Path, setting: str | bool | None) -> str:
    """The tracking URI: ``true`` or an empty setting is the SQLite store in the experiment folder."""
    if setting is True or setting in (None, ""):
        return f"sqlite:///{(out_dir / MLFLOW_DB).resolve()}"
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


def log_variants(name: str, results: tuple[VariantResult, ...] | list[VariantResult], out_dir: Path,
                 setting: str | bool | None) -> tuple[int, int]:
    """Log each finished variant not yet in the store as one run; returns (runs created, already there)."""
    require_mlflow("tracking.mlflow", setting)
    import logging

    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    for logger in ("mlflow", "alembic"):  # their INFO lines about creating the SQLite tables (set on import)
        logging.getLogger(logger).setLevel(logging.WARNING)

    uri = tracking_uri(out_dir, setting)
    client = MlflowClient(tracking_uri=uri)
    eid = _experiment_id(client, name, out_dir, uri == tracking_uri(out_dir, True))
    existing = {(r.data.tags.get(ID_TAG), r.data.tags.get(HASH_TAG))
                for r in client.search_runs([eid], max_results=50_000)}
    created = present = 0
    now_ms = int(time.time() * 1000)
    for r in results:
        if r.status not in LOGGED:
            continue
        if (r.variant_id, r.config_hash) in existing:
            present += 1
            continue
        run = client.create_run(eid, run_name=r.variant_id, tags={ID_TAG: r.variant_id, HASH_TAG: r.config_hash})
        client.log_batch(run.info.run_id,
                         metrics=[Metric(k, v, now_ms, 0) for k, v in _metrics(r).items()],
                         params=[Param(k, v) for k, v in _params(r).items()],
                         tags=[RunTag("greentrain.reason", r.reason)] if r.reason else [])
        client.set_terminated(run.info.run_id, status="FINISHED")
        existing.add((r.variant_id, r.config_hash))
        created += 1
    return created, present
