"""The experiment file: one base job plus axes of variants, expanded into frozen Variants (no torch here).

    name: tiny-summarize
    combine: one-at-a-time        # base + one variant per axis value | grid | list
    data: {source: synthetic-news, train_size: 1024, ...}
    model: {arch: t5, config: {d_model: 64}, init: random}
    train: {max_steps: 80, per_device_train_batch_size: 16, precision: fp32, optim: adamw_torch}
    axes:
      train.precision: [bf16, fp16]                    # a field: id "train.precision=bf16"
      batch: [{label: bs32, set: {train.per_device_train_batch_size: 32, train.max_steps: 40}}]   # id "bs32"

Each variant is the base job with its settings applied and re-checked, so an axis cannot smuggle in a value the
base would refuse. ``config_hash`` (sha256 of the resolved job, the library versions and the device kind) is the
resume key: a finished variant whose hash is unchanged is never run again.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from greentrain.config import BOUNDS, check_keys, load_mapping, require
from greentrain.errors import ConfigError
from greentrain.experiment.cost import reprice_regions
from greentrain.experiment.job import JOB_SECTIONS, Job, parse_job, set_path
from greentrain.experiment.search_spec import SearchSpec, parse_search
from greentrain.files import check_plain_name

COMBINES = ("one-at-a-time", "grid", "list")
TOP_KEYS = ("name", "seed", "repeats", "combine", "axes", "search", "description", *JOB_SECTIONS)
BASE_ID = "base"
# each variant is one fine-tuning run (minutes to days of accelerator time): a study past this is a slip (a grid
# of 4 axes x 40 values is 2.56 M runs, which took minutes and gigabytes only to list)
MAX_VARIANTS = 10_000
MAX_ID_CHARS = 240  # a variant's folder name (attempts/<id>-N, claims/<id>.lock; file systems allow 255 bytes)


def safe_name(variant_id: str) -> str:
    """The folder and file name of a variant (variants/<name>, attempts/<name>-N, claims/<name>.lock)."""
    return re.sub(r"[^A-Za-z0-9._=+@-]", "_", variant_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One job to run: the base with ``axis_values`` applied; ``job`` is its checked, resolved form."""

    variant_id: str
    axis_values: tuple[tuple[str, Any], ...]  # (dotted field, value) pairs applied to the base
    job: Job
    seed: int
    config_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"variant_id": self.variant_id, "axis_values": [[k, v] for k, v in self.axis_values],
                "seed": self.seed, "config_hash": self.config_hash, "job": self.job.resolved}


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    name: str
    path: str
    combine: str  # one-at-a-time | grid | list | search
    base: Job
    variants: tuple[Variant, ...]  # with a search: the base alone (the trials are not known ahead)
    base_raw: dict[str, Any] = field(default_factory=dict)  # the job sections as given (axes apply to them)
    base_seed: int = 0
    search: SearchSpec | None = None

    @property
    def base_hash(self) -> str:
        return config_hash(self.base.resolved, self.base_seed)


def device_kind() -> str:
    """'cuda' when an NVIDIA driver is present, else 'cpu' (read without importing torch)."""
    return "cuda" if Path("/proc/driver/nvidia/gpus").is_dir() or os.environ.get("GREENTRAIN_DEVICE") == "cuda" \
        else "cpu"


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "absent"


def config_hash(resolved: Mapping[str, Any], seed: int) -> str:
    """sha256 of the resolved job, the seed, the versions that change results, and the device kind (not where
    the results are logged: tracking.mlflow)."""
    versions = {p: _version(p) for p in ("greentrain", "torch", "transformers", "accelerate", "rouge-score")}
    job = {**resolved, "tracking": {**resolved.get("tracking", {}), "mlflow": None}}  # where results are logged
    blob = json.dumps({"job": job, "seed": seed, "versions": versions, "device": device_kind()},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _axis_entries(name: str, values: Any) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    """(label, settings) for each value of one axis."""
    where = f"axes.{name}"
    require(isinstance(values, list), where, values, "must be a list of values")
    require(len(values) > 0, where, values, "is empty: give at least one value")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, dict):
            check_keys(v, ("label", "set"), f"{where}[{i}]")
            require(isinstance(v.get("label"), str) and bool(v.get("label")), f"{where}[{i}].label",
                    v.get("label"), "must be a non-empty string")
            settings = v.get("set")
            if not isinstance(settings, dict) or not settings:
                raise ConfigError(f"{where}[{i}].set", settings, "must be a non-empty mapping of dotted fields to "
                                  "values")
            out.append((str(v["label"]), tuple((str(k), s) for k, s in settings.items())))
        else:
            require("." in name, where, v, "a plain value needs a dotted field as the axis name "
                    "(train.precision); else give {label, set}")
            out.append((f"{name}={v}", ((name, v),)))
    return out


def _combinations(axes: Mapping[str, Any], combine: str) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    per_axis = [_axis_entries(str(k), v) for k, v in axes.items()]  # axes: checked to be a mapping
    if combine == "one-at-a-time":
        return [e for entries in per_axis for e in entries]
    if combine == "list":
        lengths = {len(e) for e in per_axis}
        require(len(lengths) <= 1, "axes", {k: len(v) for k, v in axes.items()},
                "combine: list needs axes of equal length (they are zipped)")
        rows: list[Any] = list(zip(*per_axis, strict=True))
    else:
        n = math.prod(len(e) for e in per_axis)
        require(n <= MAX_VARIANTS, "axes", " x ".join(str(len(e)) for e in per_axis),
                f"combine: grid makes {n:,} variants, more than {MAX_VARIANTS:,} training runs")
        rows = list(itertools.product(*per_axis))
    return [("+".join(label for label, _ in row), tuple(s for _, settings in row for s in settings))
            for row in rows]


def make_variant(base_raw: dict[str, Any], vid: str, settings: tuple[tuple[str, Any], ...], seed: int) -> Variant:
    raw = copy.deepcopy(base_raw)
    for dotted, value in settings:
        set_path(raw, dotted, value, f"axes[{vid}]")
    try:
        job = parse_job(raw)
    except ConfigError as e:
        if e.field in dict(settings):  # the axis names the bad field itself: say so once
            raise ConfigError(f"axes.{e.field}", e.value, e.rule) from None
        raise ConfigError(f"variant {vid}: {e.field}", e.value, e.rule) from None
    return Variant(variant_id=vid, axis_values=settings, job=job, seed=seed,
                   config_hash=config_hash(job.resolved, seed))


def experiment_from_dict(data: dict[str, Any], path: str = "") -> Experiment:
    check_keys(data, TOP_KEYS, "")
    name = data.get("name")
    require(isinstance(name, str) and bool(name), "name", name, "is required: a non-empty string")
    check_plain_name(name, "name")  # it names the results folder (experiments/NAME): it may not leave it
    combine = str(data.get("combine", "one-at-a-time"))
    require(combine in COMBINES, "combine", combine, f"must be one of {', '.join(COMBINES)}")
    seed = data.get("seed", 0)
    require(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0, "seed", seed,
            "must be an integer >= 0")
    repeats = data.get("repeats", 1)
    require(isinstance(repeats, int) and not isinstance(repeats, bool) and 1 <= repeats <= 100, "repeats",
            repeats, "must be an integer from 1 to 100")
    require(BOUNDS["seed"].ok(seed + repeats - 1), "seed", seed,
            f"{BOUNDS['seed'].rule()} (repeat r runs with seed + r)")
    axes = data.get("axes") or {}
    require(isinstance(axes, dict), "axes", axes, "must be a mapping of axis name to a list of values")
    base_raw = {k: copy.deepcopy(v) for k, v in data.items() if k in JOB_SECTIONS}
    base = parse_job(base_raw)
    reprice_regions(base.site, base.site.reprice, "site.reprice")  # before any work: once refused only in the report
    if data.get("search") is not None:
        require(not axes and repeats == 1, "search", "axes" if axes else f"repeats={repeats}",
                "a search replaces axes and repeats: give one or the other")
        spec = parse_search(data["search"], base_raw, base.task)
        return Experiment(name=str(name), path=path, combine="search", base=base, base_raw=base_raw, base_seed=seed,
                          variants=(make_variant(base_raw, BASE_ID, (), seed),), search=spec)
    entries: list[tuple[str, tuple[tuple[str, Any], ...]]] = \
        [(BASE_ID, ())] if combine == "one-at-a-time" or not axes else []
    entries += _combinations(axes, combine) if axes else []
    require(len(entries) * repeats <= MAX_VARIANTS, "axes", f"{len(entries):,} variants x {repeats} repeats",
            f"must make at most {MAX_VARIANTS:,} training runs")
    seen: set[str] = set()
    for vid, _ in entries:  # ids become folder names: distinct after safe_name and case folding, and plain
        folder = safe_name(vid)
        require(folder.lower() not in seen, "axes", vid, "two variants have the same id (or the same folder "
                "name once characters other than letters, digits and ._=+@- become _): give them distinct labels")
        require(folder.strip(".") != "" and len(folder) <= MAX_ID_CHARS, "axes", vid,
                f"a variant id names its folder: not '.' or '..', at most {MAX_ID_CHARS} characters (a long "
                "combination of axes takes a short name with {label: NAME, set: {...}})")
        seen.add(folder.lower())
    for vid, settings in entries:  # before any variant is built: its other settings may only suit its task
        task = dict(settings).get("task", base.task)
        if task != base.task:
            raise ConfigError(f"axes[{vid}].task", task, f"an experiment has one task (the base's: {base.task}); "
                              "run another task as another experiment")
    variants = []
    for r in range(repeats):
        for vid, settings in entries:
            rid = vid if repeats == 1 else f"{vid}@seed{seed + r}"
            variants.append(make_variant(base_raw, rid, settings, seed + r))
    return Experiment(name=str(name), path=path, combine=combine, base=base, variants=tuple(variants),
                      base_raw=base_raw, base_seed=seed)


def load_experiment(path: str | Path) -> Experiment:
    return experiment_from_dict(load_mapping(path, "experiment"), str(path))
