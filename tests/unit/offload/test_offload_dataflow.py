"""The ml_dataflow profile's device layout (offload/dataflow.py): what als244/ml_dataflow's recording program
(bench/reproduce_results/transformer_record_throughput.c ``main`` at b5d6b6e3, the build of the shared H100 8B
sweeps) reserves, its chunk rule, and the placements it recorded (shared/reference/calibration/
dataflow-h100_8b_{short,medium}.csv: dev_acts, home levels)."""

from __future__ import annotations

import pytest

from greentrain.errors import InfeasibleError
from greentrain.offload.calibrate import cell_scenario
from greentrain.offload.config import OffloadCaps, offload_framework
from greentrain.offload.dataflow import dataflow_chunking, sticky_parts
from greentrain.offload.plan import plan_offload


def test_chunk_rule() -> None:
    """Smallest divisor of the sequence >= the minimum; shorter sequences packed into the minimum, or into the
    next multiple of the sequence above it."""
    assert dataflow_chunking(65536, 16384) == (16384, 4, 1)
    assert dataflow_chunking(24576, 16384) == (24576, 1, 1)
    assert dataflow_chunking(512, 16384) == (16384, 1, 32)
    assert dataflow_chunking(1000, 16384) == (17000, 1, 17)
    sc = cell_scenario("llama3-8b", "h100-sxm", 24576)  # not a multiple of 16,384: planned, one chunk per round
    assert plan_offload(sc, OffloadCaps.from_gib(device_gib=40, host_gib=100),
                        profile=offload_framework("ml_dataflow")).chunk_tokens == 24576


def test_sticky_buffers_of_8b() -> None:
    """8B at 16,384 tokens: 19.2 GiB before any layer (logits and head activations 8.5 GB, embedding and head
    with states 8.4 GB); at 24 GiB what is left holds two whole layers: 2 device slots, as recorded."""
    spec = cell_scenario("llama3-8b", "h100-sxm", 16384).model
    parts = sticky_parts(spec, 16384, 16384, 1, 1, 2.0)
    assert sum(parts.values()) / 2**30 == pytest.approx(19.18, abs=0.01)
    for seq in (512, 8192, 16384):
        plan = plan_offload(cell_scenario("llama3-8b", "h100-sxm", seq), OffloadCaps.from_gib(device_gib=24,
                                                                                              host_gib=75),
                            profile=offload_framework("ml_dataflow"))
        assert plan.slots()["device"] == 2  # recorded dev_acts at 24 GiB, every short sequence
        assert plan.device.total_bytes <= plan.caps.device_bytes


def test_single_block_when_no_more_fit() -> None:
    """8B at 32,768 tokens and 24 GiB: ml_dataflow ran (6,357 tokens/s at 80 GiB of host) with one weight and
    one gradient block, 2 device slots, 57 attention and 5 full; the planner finds that placement, slower than
    at 30 GiB (7,149 recorded), and 131,072 tokens at 24 GiB does not fit (recorded: failed)."""
    sc = cell_scenario("llama3-8b", "h100-sxm", 32768)
    tight = plan_offload(sc, OffloadCaps.from_gib(device_gib=24, host_gib=80), profile=offload_framework("ml_dataflow"))
    assert tight.prefetch_depth == 0
    assert tight.slots() == {"device": 2, "input": 0, "attention": 57, "full": 5}
    assert tight.tokens_per_s == pytest.approx(6357, rel=0.10)
    roomy = plan_offload(sc, OffloadCaps.from_gib(device_gib=30, host_gib=80), profile=offload_framework("ml_dataflow"))
    assert roomy.prefetch_depth == 1 and roomy.tokens_per_s > 1.1 * tight.tokens_per_s
    with pytest.raises(InfeasibleError, match="minimum device"):
        plan_offload(cell_scenario("llama3-8b", "h100-sxm", 131072), OffloadCaps.from_gib(device_gib=24, host_gib=144),
                     profile=offload_framework("ml_dataflow"))
