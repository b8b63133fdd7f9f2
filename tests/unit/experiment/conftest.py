"""A tiny experiment file for the run tests (random-init T5, synthetic-news, CPU)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

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
