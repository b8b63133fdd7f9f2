"""A scenario written as YAML reads back as the same scenario (YAML in and out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import load_scenario, scenario_from_dict


def test_yaml_round_trip(tmp_path: Path) -> None:
    sc = scenario_from_dict({
        "model": "mixtral-8x7b",
        "cluster": {"chip": "h100-sxm", "num_chips": 16},
        "strategy": {"dp": 8, "tp": 2, "ep": 8, "sp": True, "zero": 1, "recompute": "full"},
        "workload": {"global_batch_size": 64, "seq_len": 4096, "train_tokens": 1e9},
        "site": {"grid_g_co2e_per_kwh": 300, "pue": 1.2, "electricity_usd_per_kwh": 0.1},
    })
    path = tmp_path / "s.yaml"
    path.write_text(sc.to_yaml())
    back = load_scenario(path)
    assert back.model == sc.model and back.workload == sc.workload and back.strategy == sc.strategy
    assert back.cluster.chip == sc.cluster.chip and back.cluster.num_chips == 16
    assert back.site.grid_g_co2e_per_kwh == pytest.approx(300) and back.site.pue == 1.2
    assert estimate_step(back).step_time_s == estimate_step(sc).step_time_s


def test_section_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        scenario_from_dict({"model": "llama3-8b", "workload": 5})


def test_strategy_rejects_unknown_key() -> None:
    with pytest.raises(ConfigError, match="did you mean"):
        Strategy.from_dict({"micro_batch": 2})
