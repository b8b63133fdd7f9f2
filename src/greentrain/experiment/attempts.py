"""Earlier attempts of a variant (killed, failed or superseded): moved aside to ``DIR/attempts/<id>-<n>/`` with a
row in ``DIR/attempts.csv`` saying what they spent (energy of killed and failed attempts is waste, finding F7).
Several runners may append to ``attempts.csv`` at once: each append holds ``DIR/.attempts.lock``."""

from __future__ import annotations

import csv
import fcntl
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

from greentrain.config import read_text
from greentrain.errors import ConfigError, csv_errors
from greentrain.experiment.cost import price, site_of
from greentrain.experiment.results import VariantResult
from greentrain.experiment.spec import Variant, safe_name

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


def _attempt(r: dict[str, str | None]) -> Attempt | None:
    """The attempt of one row; None for a row with fewer cells than the header (torn by a crash mid-append)."""
    def opt(x: str | None) -> float | None:
        return None if x in ("", "None") else float(str(x))

    cells = {c: r.get(c) for c in ATTEMPT_COLUMNS}
    if None in r:
        raise ValueError("more cells than the header")
    if any(v is None for v in cells.values()):
        return None
    return Attempt(variant_id=str(cells["variant_id"]), attempt=int(str(cells["attempt"])),
                   config_hash=str(cells["config_hash"]), status=str(cells["status"]),
                   wall_s=float(str(cells["wall_s"])), energy_j=float(str(cells["energy_j"])),
                   emissions_kg_co2e=opt(cells["emissions_kg_co2e"]), cost_usd=opt(cells["cost_usd"]),
                   folder=str(cells["folder"]))


def previous_attempts(out_dir: Path) -> list[Attempt]:
    """The attempts recorded in ``out_dir``/attempts.csv. A row torn by a full disk or a kill during
    append_attempt (the file's unfinished last line, or a line with fewer cells than the header) is left out, as
    if the attempt had not been recorded (its variant runs again; move_aside numbers past its folder); any other
    row that does not parse is refused in one line naming the file and line."""
    path = out_dir / "attempts.csv"
    if not path.is_file():
        return []
    text = read_text(path, "attempts.csv")
    if not text.endswith("\n"):  # the last line was torn mid-append (even within its last cell): left out
        text = text[:text.rfind("\n") + 1]
    if not text.strip():  # empty, or a header torn by a full disk on the first append
        return []
    with csv_errors("attempts.csv", path):
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = list(reader)
    if tuple(reader.fieldnames or ()) != ATTEMPT_COLUMNS:
        raise ConfigError("attempts.csv", str(path), f"has the header {','.join(reader.fieldnames or [])!r}, not "
                          f"{','.join(ATTEMPT_COLUMNS)!r}; move the file away to start the record again")
    out = []
    for i, r in enumerate(rows):
        try:
            a = _attempt(r)
        except (TypeError, ValueError) as e:
            raise ConfigError("attempts.csv", f"{path}:{i + 2}", f"is not a row greentrain wrote ({e}); "
                              "remove the line to resume") from None
        if a is not None:
            out.append(a)
    return out


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _has_header(path: Path) -> bool:
    with path.open("rb") as f:
        return f.readline().rstrip(b"\r\n") == ",".join(ATTEMPT_COLUMNS).encode()


def append_attempt(out_dir: Path, a: Attempt) -> None:
    path = out_dir / "attempts.csv"
    with (out_dir / ".attempts.lock").open("a") as lk, path.open("a", encoding="utf-8", newline="") as f:
        fcntl.flock(lk, fcntl.LOCK_EX)  # released when the file closes
        if f.tell() and not _has_header(path):  # only a header torn by a crash: start the record again
            f.truncate(0)
            f.seek(0)
        new = f.tell() == 0
        if not new and not _ends_with_newline(path):
            f.write("\n")  # a row torn by an earlier crash stays on its own line (previous_attempts skips it)
        w = csv.writer(f)
        if new:
            w.writerow(ATTEMPT_COLUMNS)
        w.writerow([getattr(a, c) for c in ATTEMPT_COLUMNS])


def move_aside(out_dir: Path, v: Variant, old: VariantResult | None, attempts: list[Attempt]) -> Attempt:
    """Move an unfinished, failed or superseded attempt to DIR/attempts/ and record what it spent."""
    folder = variant_dir(out_dir, v.variant_id)
    n = 1 + sum(1 for a in attempts if a.variant_id == v.variant_id)
    while (out_dir / "attempts" / f"{safe_name(v.variant_id)}-{n}").exists():  # an attempt whose row was torn
        n += 1
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
