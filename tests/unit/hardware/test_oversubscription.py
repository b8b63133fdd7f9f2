"""Fabric oversubscription (issue 23 item 8): the network's bandwidth between nodes divided by the fabric's
ratio, per cluster (default: the network's published figure, links.yaml), and kept through a scenario file."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.step import estimate_step
from greentrain.hardware.catalog import get_link
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict


def _sc(ratio: float):  # type: ignore[no-untyped-def]
    return scenario_from_dict({"model": "llama3-70b", "cluster": {"chip": "h100-sxm", "num_chips": 128,
                                                                  "oversubscription": ratio},
                               "workload": {"global_batch_size": 256, "seq_len": 4096, "num_steps": 1}})


def test_the_default_is_the_networks_published_figure() -> None:
    link = get_link("ib-ndr-400")
    assert link.oversubscription == 1.0 and link.oversubscribed() is link
    assert _sc(0).cluster.inter_node.bytes_per_s == link.bytes_per_s


def test_an_oversubscribed_fabric_slows_what_crosses_nodes_only() -> None:
    s = Strategy(dp=16, tp=8, zero=1, recompute="full", micro_batch_size=1)
    flat, over = (estimate_step(_sc(r), s, check_fit=False) for r in (1, 4))
    assert _sc(4).cluster.inter_node.bytes_per_s == pytest.approx(get_link("ib-ndr-400").bytes_per_s / 4)
    assert over.dp_comm_time_s > flat.dp_comm_time_s and over.tp_comm_time_s == flat.tp_comm_time_s
    assert _sc(4).to_dict()["cluster"]["oversubscription"] == 4.0
    again = scenario_from_dict(_sc(4).to_dict())
    assert again.cluster.inter_node.bytes_per_s == _sc(4).cluster.inter_node.bytes_per_s


def test_a_ratio_below_one_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"cluster.oversubscription.*must be in \[1, 64\]"):
        _sc(0.5)
