"""Earlier attempts of a variant (killed, failed or superseded): moved aside to ``DIR/attempts/<id>-<n>/`` with a
row in ``DIR/attempts.csv`` saying what they spent (energy of killed and failed attempts is waste, finding F7).
Several runners may append to ``attempts.csv`` at once: each append holds ``DIR/.attempts.lock``."""

from __future__ import annotations

import csv
import fcntl
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.experiment.cost import price, site_of
from greentrain.experiment.results import VariantResult
from greentrain.experiment.spec import Variant

DONE = ("ok", "not_applicable", "pruned")  # pruned: an Optuna trial stopped by its pruner
ATTEMPT_COLUMNS = ("variant_id", "attempt", "config_hash", "status", "wall_s", "energy_j", "emissions_kg_co2e",
                   "cost_usd", "folder")


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


def _record_energy_j(folder: Path) -> tuple[float, float]:
    """(wall seconds, IT energy) recorded by the phase trackers in ``folder`` (a killed run's records too); a
    variant of several devices: every rank's energy, rank 0's time (``<phase>.rank<r>.jsonl``, experiment/ranks.py)."""
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
        wall, energy = wall + (m.duration_s if ".rank" not in path.name else 0.0), energy + m.it_energy_j
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


def append_attempt(out_dir: Path, a: Attempt) -> None:
    path = out_dir / "attempts.csv"
    with (out_dir / ".attempts.lock").open("a") as lk, path.open("a", encoding="utf-8", newline="") as f:
        fcntl.flock(lk, fcntl.LOCK_EX)  # released when the file closes
        new = f.tell() == 0
        w = csv.writer(f)
        if new:
            w.writerow(ATTEMPT_COLUMNS)
        w.writerow([getattr(a, c) for c in ATTEMPT_COLUMNS])


def move_aside(out_dir: Path, v: Variant, old: VariantResult | None, attempts: list[Attempt]) -> Attempt:
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
    append_attempt(out_dir, a)
    return a
