"""All-gather and reduce-scatter across nodes run as one NCCL ring (estimate/comm.py): the bytes spread over the
node's NICs as a two-level split would; of its g - 1 steps the nodes - 1 whose hop crosses nodes pay the network's
latency, the others their NVLink hop or the network's per-step overhead, the longer (NCCL tuning.cc). On EFA that
overhead is a network step's time (fitted on the playbook), so every step pays it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.estimate.comm import Collective, hierarchical_time, ring_time_s
from greentrain.hardware.catalog import get_link

NVLINK, EFA, IB = get_link("nvlink4"), get_link("efa-400"), get_link("ib-ndr-400")


@pytest.mark.parametrize("kind", [Collective.ALL_GATHER, Collective.REDUCE_SCATTER])
def test_ring_across_efa_nodes_pays_a_network_step_per_step(kind: Collective) -> None:
    tiny = 1.0  # one byte: the latency alone
    assert hierarchical_time(kind, 16, 8, tiny, NVLINK, EFA) == pytest.approx(15 * EFA.latency_s, rel=1e-6)
    assert hierarchical_time(kind, 32, 8, tiny, NVLINK, EFA) == pytest.approx(31 * EFA.latency_s, rel=1e-6)
    # inside one node: NVLink steps only
    assert hierarchical_time(kind, 8, 8, tiny, NVLINK, EFA) == pytest.approx(7 * NVLINK.latency_s, rel=1e-3)
    # the bandwidth term is the two-level one: the NICs of a node share the bytes crossing nodes
    big = 2.0**30
    bw = (ring_time_s(kind, 8, big / 2, NVLINK) - 7 * NVLINK.latency_s
          + ring_time_s(kind, 2, big / 8, EFA) - EFA.latency_s)
    assert hierarchical_time(kind, 16, 8, big, NVLINK, EFA) == pytest.approx(bw + 15 * EFA.latency_s, rel=1e-9)


@pytest.mark.parametrize("kind", list(Collective))
def test_columns_equal_scalars(kind: Collective) -> None:
    """One formula: a column of groups, node layouts and payloads gives, row by row, the float call's number
    (groups of one and empty payloads cost nothing)."""
    g, k = np.array([1.0, 2, 8, 16, 32, 64, 4, 24]), np.array([8.0, 8, 8, 8, 8, 8, 1, 8])
    b = np.array([1e3, 1e3, 1e6, 1.6e7, 3e8, 1e9, 5e7, 0.0])
    cols = hierarchical_time(kind, g, k, b, NVLINK, EFA, 0.9, 0.8)
    assert isinstance(cols, np.ndarray) and cols.shape == g.shape
    for i in range(len(g)):
        one = hierarchical_time(kind, int(g[i]), int(k[i]), float(b[i]), NVLINK, EFA, 0.9, 0.8)
        assert isinstance(one, float)
        assert cols[i] == one
    assert cols[0] == 0.0 and cols[-1] == 0.0


def test_all_reduce_latency_takes_the_tree_across_many_nodes() -> None:
    """Across n nodes the all-reduce's network latency is min(ring 2 (n - 1), tree 2 log2 n) hops."""
    one_byte = hierarchical_time(Collective.ALL_REDUCE, 64 * 8, 8, 1.0, NVLINK, EFA)
    assert one_byte == pytest.approx(2 * 7 * NVLINK.latency_s + 2 * 6 * EFA.latency_s, rel=1e-3)
    two_nodes = hierarchical_time(Collective.ALL_REDUCE, 16, 8, 1.0, NVLINK, EFA)
    assert two_nodes == pytest.approx(2 * 7 * NVLINK.latency_s + 2 * EFA.latency_s, rel=1e-3)


@pytest.mark.parametrize("kind", [Collective.ALL_GATHER, Collective.REDUCE_SCATTER])
def test_ring_across_infiniband_nodes_pays_the_network_latency_only_at_node_hops(kind: Collective) -> None:
    """NCCL's ring latency (src/graph/tuning.cc): (nsteps - nInterSteps) x max(intraLat, netOverhead) +
    nInterSteps x interLat; 256 ranks, 32 a node: 248 NVLink steps and 7 network hops, not 255 network hops (the
    gradient group of MLPerf's Llama 3.1 8B on 512 GB200, whose whole step took 89 ms)."""
    assert IB.ring_step_overhead_s < NVLINK.latency_s < IB.latency_s
    tiny = 1.0
    assert hierarchical_time(kind, 256, 32, tiny, NVLINK, IB) == pytest.approx(
        248 * NVLINK.latency_s + 7 * IB.latency_s, rel=1e-6)
    assert hierarchical_time(kind, 16, 8, tiny, NVLINK, IB) == pytest.approx(
        14 * NVLINK.latency_s + IB.latency_s, rel=1e-6)
    slow = dataclasses.replace(IB, ring_step_overhead_s=10e-6)  # a network overhead above the NVLink hop floors it
    assert hierarchical_time(kind, 16, 8, tiny, NVLINK, slow) == pytest.approx(14 * 10e-6 + IB.latency_s, rel=1e-6)


def test_a_link_entry_reads_its_ring_step_overhead() -> None:
    """links.yaml's ring_step_overhead_us: 3 us when absent (NCCL's default), and a negative one named as bad input."""
    from greentrain.errors import ConfigError
    from greentrain.hardware.catalog import link_from_dict

    assert link_from_dict("n", {"bandwidth_gbit_per_s": 400}).ring_step_overhead_s == pytest.approx(3e-6)
    assert link_from_dict("n", {"bandwidth_gbit_per_s": 400, "ring_step_overhead_us": 20}).ring_step_overhead_s == \
        pytest.approx(2e-5)
    with pytest.raises(ConfigError, match=r"link\(n\)\.ring_step_overhead_us"):
        link_from_dict("n", {"bandwidth_gbit_per_s": 400, "ring_step_overhead_us": -1})
