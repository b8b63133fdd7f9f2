"""A tiny experiment file for the run tests (random-init T5, synthetic-news, CPU)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from greentrain.experiment.results import PHASES, VariantResult, write_result
from greentrain.experiment.runner import variant_dir

TINY_T5 = {"d_model": 64, "d_kv": 16, "d_ff": 256, "num_layers": 2, "num_heads": 4}


def tiny_experiment(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "tiny",
        "data": {"train_size": 1024, "eval_size": 32, "test_size": 64},
        "model": {"arch": "t5", "config": dict(TINY_T5)},
        "train": {"max_steps": 80, "per_device_train_batch_size": 16, "learning_rate": 3.0e-3},
        "site": {"grid_g_co2e_per_kwh": 297.6, "pue": 1.2, "usd_per_hour": 22.032},
        "runtime": {"num_threads": 1},  # robust to a loaded CI machine (no OpenMP spinning)
    }
    data.update(copy.deepcopy(changes))
    return data


def write_experiment(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def make_experiment() -> Any:
    """``make_experiment(path=None, **changes)``: the tiny experiment mapping, written to ``path`` when given."""

    def make(path: Path | None = None, **changes: Any) -> Any:
        data = tiny_experiment(**changes)
        return write_experiment(path, data) if path is not None else data

    return make


def hand_made_folder(out: Path) -> None:
    variants = [("base", "h1"), ("fast", "h2"), ("later", "h3"), ("stale", "h4")]
    manifest = {"kind": "greentrain.experiment", "name": "hand", "file": "", "combine": "one-at-a-time",
                "site": {"grid_g_co2e_per_kwh": 300.0, "pue": 1.5, "usd_per_hour": 3.6},
                "variants": [{"variant_id": v, "config_hash": h, "max_steps": 10, "axis_values": []}
                             for v, h in variants]}
    out.mkdir(parents=True)
    (out / "experiment.json").write_text(json.dumps(manifest))
    for vid, energy_j, wall_s, rouge1 in (("base", 3.6e3, 100.0, 40.0), ("fast", 7.2e3, 50.0, 41.0)):
        share = {p: energy_j / 4 for p in PHASES}
        r = VariantResult(variant_id=vid, config_hash="h1" if vid == "base" else "h2", status="ok",
                          wall_s=wall_s, train_s=wall_s / 2, eval_s=wall_s / 4, predict_s=wall_s / 8,
                          other_s=wall_s / 8, energy_j=energy_j, cpu_energy_j=energy_j, pue=1.5,
                          facility_energy_j=1.5 * energy_j, grid_g_co2e_per_kwh=300.0,
                          emissions_kg_co2e=1.5 * energy_j / 3.6e6 * 0.3, cost_usd=3.6 * wall_s / 3600,
                          cost_basis="cloud", rouge1=rouge1, num_steps=10, flop=1e10, flop_per_step=1e9,
                          predicted_flop_per_step=1e9, **{f"{p}_energy_j": e for p, e in share.items()})
        folder = variant_dir(out, vid)
        folder.mkdir(parents=True)
        write_result(folder / "result.json", r)
    stale = variant_dir(out, "stale")
    stale.mkdir(parents=True)
    write_result(stale / "result.json", VariantResult(variant_id="stale", config_hash="old", status="ok"))


@pytest.fixture(scope="session")
def make_folder() -> Any:
    """``make_folder(out)``: a hand-made experiment output folder: base and fast ok (base $0.10 and 0.45 g, fast
    $0.05 and 0.9 g), later pending, stale finished under another hash (pending)."""
    return hand_made_folder
