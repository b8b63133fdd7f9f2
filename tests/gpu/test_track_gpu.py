"""The Tracker's CUDA paths (CUDA-event timing, allocator peak, NVML energy, FLOPs of the fused attention
kernels). Skipped without CUDA; on CPU-only machines these lines are the only check that they import."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "measure"))
from tiny_gpt import GPT, linear_weight_params, train_step

from greentrain.measure.hooks import ModuleHooks
from greentrain.measure.records import read_jsonl
from greentrain.measure.tracker import Tracker

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

B, S, D, L = 4, 64, 128, 2


def _model() -> tuple[GPT, torch.optim.Optimizer, torch.Tensor]:
    torch.manual_seed(0)
    model = GPT(vocab=512, d=D, layers=L, heads=4, seq=S).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=1e-3), torch.randint(0, 512, (B, S), device="cuda")


def test_cuda_flops_are_6nd_plus_attention() -> None:
    model, opt, idx = _model()
    hooks = ModuleHooks(model)
    assert hooks.cuda
    train_step(model, opt, idx)
    step = hooks.finish_step()
    hooks.remove()
    # Kaplan et al. 2020 eq. 2.1 plus attention (Narayanan et al. 2021 §5.1): the fused CUDA kernels use the
    # same convention as the CPU one (backward = 2x forward), within 1 %
    expected = 6 * linear_weight_params(model) * B * S + 12 * L * B * S * S * D
    assert step["flop"] == pytest.approx(expected, rel=0.01)
    assert step["peak_cuda_bytes"] > 0


def test_tracker_on_cuda_times_memory_energy(tmp_path: Path) -> None:
    model, opt, idx = _model()
    with Tracker(model, grid_g_per_kwh=100.0, out_dir=tmp_path, print_summary=False, interval_s=0.1) as t:
        for _ in range(5):
            train_step(model, opt, idx)
            t.step()
        time.sleep(1.0)  # NVML's energy counter moves in steps: an H100 read 0 J over these 70 ms of steps
    m = t.measurement
    assert m is not None and m.status == "ok" and m.num_steps == 5
    assert m.peak_cuda_bytes > 0 and m.memory_bytes == m.peak_cuda_bytes
    assert 0 < m.forward_s + m.backward_s <= 1.05 * m.step_time_s + 1e-3  # CUDA-event spans inside the step
    # the module figures cover the steps after the first; the phase times step_time_s's window, which also drops
    # a slow step 2 (summary.warmup_steps): compare the modules with their own window's phase times
    steps = [r for r in read_jsonl(tmp_path / "greentrain.jsonl") if r["type"] == "step"][1:]
    phases = statistics.fmean(float(r["forward_s"]) + float(r["backward_s"]) for r in steps)
    covered = sum(x.forward_s + x.backward_s for x in m.modules)
    assert 0.5 * phases <= covered <= 1.05 * phases
    gpu = [x for x in m.meters if x.name == "gpu"]
    if gpu:  # nvidia-ml-py installed and the GPU has an energy counter (Volta or newer)
        assert gpu[0].measured and m.gpu_energy_j > 0


def test_the_tracker_leaves_the_cuda_peak_to_the_training(tmp_path: Path) -> None:
    """The Tracker reads torch.cuda.max_memory_allocated and never resets it: a Trainer's or the user's own
    reading after the run still sees the run's peak (on an H200 the reset cut a 47 GB peak to 15 GB)."""
    model, opt, idx = _model()
    big = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # 256 MiB, freed before the steps
    del big
    with Tracker(model, out_dir=tmp_path, print_summary=False, meters=False) as t:
        for _ in range(3):
            train_step(model, opt, idx)
            t.step()
    assert torch.cuda.max_memory_allocated() >= 256 * 2**20
    assert t.measurement is not None and t.measurement.peak_cuda_bytes >= 256 * 2**20
