"""Under torchrun, a node's host (CPU, RAM) is metered once: by local rank 0, over the torchrun agent's process
tree (every local rank); the other ranks meter their GPU alone. Per-rank RAM estimates counted CodeCarbon's
10 W floor once per rank (a 2-rank CPU variant: 537 of its 616 J were RAM, 2026-11-26)."""

from __future__ import annotations

import os

import pytest

from greentrain.measure.meters import CpuEstimateMeter, RamEstimateMeter, default_meters
from greentrain.measure.tracker import Tracker


def _tracker(monkeypatch: pytest.MonkeyPatch, local_world: str) -> Tracker:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world)
    t = Tracker(None, print_summary=False, cpu_tdp_w=100.0)  # an estimate: no RAPL needed
    t.world_size = int(local_world)
    return t


def test_local_rank_0_meters_the_node_host_over_the_agents_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    leader = [m for m in _tracker(monkeypatch, "2")._make_meters(0) if m.name != "gpu"]
    assert sorted(m.name for m in leader) == ["cpu", "ram"]
    assert {m._root for m in leader if isinstance(m, RamEstimateMeter)} == {os.getppid()}
    assert all(m._root == os.getppid() for m in leader if isinstance(m, CpuEstimateMeter))
    others = _tracker(monkeypatch, "2")._make_meters(1)
    assert [m.name for m in others if m.name != "gpu"] == []  # the GPU alone, where there is one


def test_one_process_per_node_keeps_its_own_host_meters(monkeypatch: pytest.MonkeyPatch) -> None:
    meters = [m for m in _tracker(monkeypatch, "1")._make_meters(0) if m.name != "gpu"]
    assert sorted(m.name for m in meters) == ["cpu", "ram"]
    assert all(m._root == os.getpid() for m in meters if isinstance(m, RamEstimateMeter))


def test_host_false_is_the_gpu_alone() -> None:
    assert [m.name for m in default_meters(os.getpid(), cpu_tdp_w=50.0, gpu=False, host=False)] == []
