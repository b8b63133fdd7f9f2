"""A scenario written as YAML reads back as the same scenario (YAML in and out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import DEFAULT_SCENARIO, load_scenario, scenario_from_dict


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


# ---- a file's missing parts take the CLI's defaults (DEFAULT_SCENARIO, defined once) -----------------------

def test_empty_file_is_the_default_scenario(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_scenario(empty) == scenario_from_dict(DEFAULT_SCENARIO)
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"num_chips": 8}})
    assert sc.site.region == "us-east-1" and sc.site.grid_g_co2e_per_kwh > 0  # not 0 g/kWh
    assert sc.cluster.chip.name == "h100-sxm" and sc.cluster.num_chips == 8
    assert sc.workload == scenario_from_dict({}).workload


def test_partial_site_keeps_the_default_region() -> None:
    sc = scenario_from_dict({"site": {"pue": 1.2}})
    default = scenario_from_dict({})
    assert sc.site.region == "us-east-1" and sc.site.pue == 1.2
    assert sc.site.grid_g_co2e_per_kwh == default.site.grid_g_co2e_per_kwh


def test_partial_workload_takes_defaults() -> None:
    w = scenario_from_dict({"workload": {"seq_len": 1024}}).workload
    assert (w.global_batch_size, w.seq_len, w.train_tokens) == (512, 1024, 1e12)
    w = scenario_from_dict({"workload": {"num_steps": 10}}).workload
    assert (w.num_steps, w.train_tokens, w.steps()) == (10, 0.0, 10)  # no default token budget beside it


@pytest.mark.parametrize(("data", "needle"), [
    ({"model": "gpt3-175b", "workload": {"global_batch_size": 0}}, "workload.global_batch_size=0: must be >= 1"),
    ({"workload": {"train_tokens": 1e9, "num_steps": 10}},
     "workload.num_steps=10: conflicts with workload.train_tokens"),
    ({"workload": {"num_epochs": 2, "dataset_tokens": 1e9, "train_tokens": 1e9}}, "conflicts with"),
    ({"workload": {"train_tokens": float("inf")}}, "finite"),
    ({"model": 5}, "model=5: must be a preset name"),
    ({"model": [1, 2]}, "model=[1, 2]: must be a preset name"),
    ({"model": ""}, "model='': must be a preset name"),
    ({"workload": {"target_seq_len": 512}}, "workload.target_seq_len=512: applies only to an encoder-decoder"),
    ({"model": "gpt3-175b", "workload": {"seq_len": 4096}}, "workload.seq_len=4096: must be <= 2048"),
    ({"model": "opt-175b", "workload": {"seq_len": 2049}}, "must be <= 2048"),  # 2050 rows, 2 unused
    ({"model": "bart-large", "workload": {"seq_len": 1024, "target_seq_len": 2048}},
     "workload.target_seq_len=2048: must be <= 1024"),
    ({"strategy": {"pp": 4, "vpp": 2, "schedule": "gpipe"}},
     "strategy.schedule='gpipe': conflicts with strategy.vpp=2"),
    ({"strategy": {"pp": 4, "schedule": "interleaved"}}, "needs strategy.vpp > 1"),
])
def test_bad_scenario_is_one_config_error(data: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        scenario_from_dict(data)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_sequences_that_fit() -> None:
    assert scenario_from_dict({"model": "opt-175b", "workload": {"seq_len": 2048}}).workload.seq_len == 2048
    sc = scenario_from_dict({"model": "t5-large", "workload": {"seq_len": 4096, "target_seq_len": 512}})
    assert sc.workload.tokens_per_step == 512 * 512  # relative positions: no table, no limit
    assert scenario_from_dict({"workload": {"seq_len": 131072}}).workload.seq_len == 131072  # rotary


def test_file_errors_name_the_scenario(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"scenario=.*is a directory"):
        load_scenario(tmp_path)
    dup = tmp_path / "dup.yaml"
    dup.write_text("model: llama3-8b\nworkload:\n  seq_len: 1024\n  seq_len: 2048\n")
    with pytest.raises(ConfigError, match="line 4: duplicate key 'seq_len'"):
        load_scenario(dup)


def test_an_explicit_schedule_that_conflicts_with_vpp_is_refused_not_rewritten() -> None:
    """Issue 16 item 13: Strategy(vpp=2, schedule="gpipe") used to become "interleaved" silently."""
    with pytest.raises(ConfigError, match=r"strategy\.schedule='gpipe': conflicts with strategy\.vpp=2"):
        Strategy(pp=2, vpp=2, schedule="gpipe")
    assert Strategy(pp=2, vpp=2).schedule == "interleaved" and Strategy(pp=2).schedule == "1f1b"
