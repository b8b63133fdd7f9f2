"""All-gather and reduce-scatter across nodes run as one NCCL ring (estimate/comm.py): the bytes spread over the
node's NICs as a two-level split would, but each of the g - 1 steps waits for a network hop."""

from __future__ import annotations

import numpy as np
import pytest

from greentrain.estimate.comm import Collective, collective_time, hierarchical_time, hierarchical_time_array
from greentrain.hardware.catalog import get_link

NVLINK, EFA = get_link("nvlink4"), get_link("efa-400")


@pytest.mark.parametrize("kind", [Collective.ALL_GATHER, Collective.REDUCE_SCATTER])
def test_ring_across_nodes_pays_a_network_hop_per_step(kind: Collective) -> None:
    tiny = 1.0  # one byte: the latency alone
    assert hierarchical_time(kind, 16, 8, tiny, NVLINK, EFA) == pytest.approx(15 * EFA.latency_s, rel=1e-6)
    assert hierarchical_time(kind, 32, 8, tiny, NVLINK, EFA) == pytest.approx(31 * EFA.latency_s, rel=1e-6)
    # inside one node: NVLink steps only
    assert hierarchical_time(kind, 8, 8, tiny, NVLINK, EFA) == pytest.approx(7 * NVLINK.latency_s, rel=1e-3)
    # the bandwidth term is the two-level one: the NICs of a node share the bytes crossing nodes
    big = 2.0**30
    bw = (collective_time(kind, 8, big / 2, NVLINK).time_s - 7 * NVLINK.latency_s
          + collective_time(kind, 2, big / 8, EFA).time_s - EFA.latency_s)
    assert hierarchical_time(kind, 16, 8, big, NVLINK, EFA) == pytest.approx(bw + 15 * EFA.latency_s, rel=1e-9)


@pytest.mark.parametrize("kind", [Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_REDUCE])
def test_columns_equal_scalars(kind: Collective) -> None:
    g, k = np.array([2.0, 8, 16, 32, 64, 4]), np.array([8.0, 8, 8, 8, 8, 1])
    b = np.array([1e3, 1e6, 1.6e7, 3e8, 1e9, 5e7])
    cols = hierarchical_time_array(kind, g, k, b, NVLINK, EFA, 0.9, 0.8)
    for i in range(len(g)):
        one = hierarchical_time(kind, int(g[i]), int(k[i]), float(b[i]), NVLINK, EFA, 0.9, 0.8)
        assert cols[i] == pytest.approx(one, rel=1e-12)
