"""GB200 / GB300 NVL72 racks and the B300: catalog entries with their own figures, a node that is an NVLink domain."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.fp8 import recipe_for
from greentrain.estimate.step import estimate_step
from greentrain.hardware.catalog import get_chip
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict


@pytest.mark.parametrize(("chip", "mamf"), [("gb200", 1822 / 2500), ("b300", 1769 / 2250), ("gb300", 1822 / 2500)])
def test_each_chip_has_its_own_matmul_figure(chip: str, mamf: float) -> None:
    assert efficiency_for(chip).matmul_max == pytest.approx(mamf, abs=5e-4)
    assert efficiency_for(chip).matmul_max != efficiency_for("no-such-chip").matmul_max


def test_a_rack_scale_node_is_its_nvlink_domain() -> None:
    """NVIDIA's multi-rack GB200 jobs put 16 trays (64 GPUs) in one NVLink domain: 256 GPUs divide, and an
    expert-parallel all-to-all over 64 of them stays on NVLink (where 8-GPU B200 nodes send 7/8 over the network)."""
    assert get_chip("gb200").chips_per_node == get_chip("gb300").chips_per_node == 64
    assert get_chip("gb200").host_link == "nvlink-c2c"

    def ep_comm_s(chip: str) -> float:
        sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": chip, "num_chips": 64},
                                 "workload": {"global_batch_size": 256, "seq_len": 4096, "num_steps": 10}})
        return estimate_step(sc, Strategy(dp=64, ep=64, zero=1, micro_batch_size=1), check_fit=False,
                             eff=efficiency_for(chip, "nemo")).ep_comm_time_s

    assert ep_comm_s("gb200") < ep_comm_s("b200") / 4
    whole_racks = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "gb200", "num_chips": 144,
                                                                       "chips_per_node": 72}})
    assert whole_racks.cluster.chips_per_node == 72
    with pytest.raises(ConfigError, match="must be a multiple of chips_per_node=64"):
        scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "gb200", "num_chips": 72}})


@pytest.mark.parametrize("chip", ["gb200", "b300", "gb300"])
def test_blackwell_chips_take_mxfp8(chip: str) -> None:
    assert recipe_for("fp8", "mxfp8", "nemo", chip) == "mxfp8"


def test_rack_host_share_and_the_servers_fallback() -> None:
    """An NVL72 rack's host share comes from NVIDIA's rack budget (GB200: 18 trays of 4 x 1.2 kW GPUs, 1 kW CPU,
    0.9 kW static); a chip without a system row still takes the 8-GPU servers' median host/TDP ratio, which the
    racks do not move."""
    from greentrain.footprint.host import host_max_w_per_chip

    assert host_max_w_per_chip(get_chip("gb200")) == pytest.approx((18 * (4 * 1200 + 1000 + 900) - 72 * 1200) / 72)
    servers = [(3500 - 8 * 300) / 2400, (6500 - 8 * 400) / 3200, (10200 - 8 * 700) / 5600, (14300 - 8 * 1000) / 8000]
    median = sorted(servers)[1] / 2 + sorted(servers)[2] / 2
    assert host_max_w_per_chip(get_chip("b300")) == pytest.approx(median * 1000)
