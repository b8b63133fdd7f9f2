"""Megatron Core's data-parallel gradient buckets and parameter gather (estimate/step_terms.py): buckets of
max(40 M, 1 M x dp) parameters, the weight all-gather overlapped with the next forward (overlap_param_gather),
and the gradient group dp x cp laid out tp ranks apart (estimate/compose.py, parallel_costs.axis_layout)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.parallel_costs import axis_layout
from greentrain.estimate.step import estimate_micro_batch
from greentrain.estimate.step_terms import bucket_bytes, dp_sync_s, num_buckets
from greentrain.hardware.catalog import get_chip
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import build_cluster, scenario_from_dict

NEMO = efficiency_for("b200", "nemo")
PARAMS, GRADS = 8.0e9, 16.0e9  # bf16 gradients: 2 bytes per parameter


def test_megatron_buckets_grow_with_the_data_parallel_degree() -> None:
    assert NEMO.dp_bucket_params == 4e7 and NEMO.dp_bucket_params_per_rank == 1e6
    # below 40 ranks: 40 M parameters (80 MB of bf16 gradients); above: 1 M per rank
    assert bucket_bytes(GRADS, PARAMS, 16, 32, NEMO) == pytest.approx(4e7 * 2)
    assert bucket_bytes(GRADS, PARAMS, 128, 32, NEMO) == pytest.approx(1.28e8 * 2)
    assert num_buckets(GRADS, PARAMS, 16, 32, NEMO) == 200
    assert num_buckets(GRADS, PARAMS, 128, 32, NEMO) == 63
    # columns: the same rule per strategy
    dp = np.array([8.0, 40, 64, 512])
    cols = bucket_bytes(np.full(4, GRADS), np.full(4, PARAMS), dp, np.full(4, 32.0), NEMO)
    assert list(cols) == pytest.approx([8e7, 8e7, 1.28e8, 1.024e9])
    # byte-sized buckets (PyTorch DDP's 25 MiB) and per-layer buckets (FSDP) keep their rules
    ddp = efficiency_for("b200", "ddp")
    assert bucket_bytes(GRADS, PARAMS, 128, 32, ddp) == 25 * 2**20
    fsdp = efficiency_for("b200", "torchtitan")
    assert num_buckets(GRADS, PARAMS, 128, 32, fsdp) == 32
    # one per layer exactly, where grad_bytes / (grad_bytes / layers) rounds above the layer count
    assert num_buckets(85994792933.0002, PARAMS, 128, 31, fsdp) == 31


def _sync(eff: object, forward_s: float) -> float:
    cl = build_cluster(get_chip("b200"), 256, chips_per_node=8)
    return float(dp_sync_s(zero=1, dp_group=256, dp_per_node=8, grad_bytes=GRADS, weight_bytes=GRADS, layers=32,
                           backward_s=0.08, micro_batch_s=0.08 + forward_s, num_micro=1, cl=cl,
                           eff=eff, params=PARAMS, dp=256))  # type: ignore[arg-type]


def test_parameter_gather_hides_behind_the_next_forward() -> None:
    assert NEMO.dp_gather_overlap
    exposed = dataclasses.replace(NEMO, dp_gather_overlap=False)
    long_forward, no_forward = _sync(NEMO, 10.0), _sync(NEMO, 0.0)
    # a forward long enough hides all but the first bucket's gather (and the compute it slows)
    assert long_forward < no_forward < _sync(exposed, 0.0) + 1e-12
    assert _sync(exposed, 10.0) == pytest.approx(_sync(exposed, 0.0))  # without the overlap the forward is moot
    assert _sync(exposed, 0.0) > long_forward


def test_the_gradient_group_counts_its_context_parallel_ranks_on_the_node() -> None:
    """cp 2 x dp 4 on one 8-GPU node: the dp x cp gradient group is the node, so nothing crosses nodes (it was
    counted as 4 ranks a node: the cp ranks left out)."""
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "b200", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 8192, "num_steps": 1}})
    t = estimate_micro_batch(sc, Strategy(dp=4, cp=2, micro_batch_size=1, zero=1), eff=NEMO)
    assert not t.dp_crosses_nodes
    # on 32 nodes the dp x cp = 256 ranks share each node 8 at a time (tp 1), 4 at tp 2: the cp ranks with them
    cl = build_cluster(get_chip("b200"), 256, chips_per_node=8)
    assert axis_layout(Strategy(dp=128, cp=2, micro_batch_size=1), cl).dp == 8
    assert axis_layout(Strategy(dp=64, tp=2, cp=2, sp=True, micro_batch_size=1), cl).dp == 4
    assert axis_layout(Strategy(dp=256, micro_batch_size=1), cl).dp == 8
