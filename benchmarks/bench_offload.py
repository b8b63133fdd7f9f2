"""The offload numbers of docs/offload.md, on CPU (issue 14):

    .venv/bin/python benchmarks/bench_offload.py grid        # the 768-cell heatmap grid, CPU seconds
    .venv/bin/python benchmarks/bench_offload.py crosscheck  # planner vs event engine, 3 seeds (about 1 s)
    .venv/bin/python benchmarks/bench_offload.py peaks       # executor accounted peak vs planner, 2 seeds

``crosscheck`` draws the random plans of tests/unit/offload/test_offload_simulate.py (seeds 0, 5, 7) and prints,
per class (a layer link-bound or not) and per profile, how many plans come within 1 % of the engine and the worst
error (engine / planner - 1). ``peaks`` runs the executor (tiny llama, 2 micro-batches) on the planner's own
plans at random caps (seeds 1, 2) and prints the accounted device peak over the planner's device bytes and any
cap crossed.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from functools import cache

from greentrain.errors import InfeasibleError
from greentrain.offload.calibrate import cell_scenario
from greentrain.offload.config import OffloadCaps, OffloadPolicy, ml_dataflow_profile, pytorch_profile
from greentrain.offload.grid import offload_grid
from greentrain.offload.plan import plan_offload
from greentrain.offload.simulate import simulate_plan
from greentrain.scenario import Scenario

CELLS = [("llama3.2-1b", 1024), ("llama3.2-1b", 4096), ("llama3.2-1b", 16384), ("llama3.2-1b", 32768),
         ("llama3-8b", 8192), ("llama3-8b", 32768)]


def grid() -> None:
    args = (["llama3.2-1b", "llama3-8b"], ["h100-sxm"], [4096, 8192, 16384, 32768], list(range(16, 80, 8)),
            [32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 200])
    for profile in (ml_dataflow_profile(), pytorch_profile()):
        offload_grid(*args[:2], [512], [20], [80], profile)  # warm the caches
        t0 = time.process_time()
        cells = offload_grid(*args, profile)
        print(f"{profile.name}: {len(cells)} cells in {time.process_time() - t0:.3f} s CPU, "
              f"{sum(c.fits for c in cells)} fit")


@cache
def _sc(model: str, seq: int, chip: str) -> Scenario:
    return cell_scenario(model, chip, seq)


def crosscheck(seeds: tuple[int, ...] = (0, 5, 7), plans_per_seed: int = 200) -> None:
    profiles = {"ml_dataflow": ml_dataflow_profile(), "pytorch": pytorch_profile(),
                "pytorch-bf16": pytorch_profile(state="bf16")}
    errors: dict[bool, list[float]] = {True: [], False: []}
    by_profile: dict[str, list[float]] = {"pytorch": [], "ml_dataflow": []}
    single: list[float] = []
    for seed in seeds:
        rng = random.Random(seed)
        for _ in range(plans_per_seed):
            model, seq = rng.choice(CELLS)
            chip = rng.choice(["h100-sxm", "a100-80gb"])
            name = rng.choice(list(profiles))
            policy = OffloadPolicy(prefetch_depth=rng.choice([1, 2, 3]),
                                   resident_layers=rng.choice([None, None, rng.randint(0, 32)]),
                                   chips_per_host_link=rng.choice([1, 1, 2, 4]), downgrade=rng.random() < 0.5)
            sc = _sc(model, seq, chip)
            caps = OffloadCaps.from_gib(device_gib=rng.uniform(8, 78), host_gib=rng.uniform(20, 400))
            try:
                plan = plan_offload(sc, caps, policy, profiles[name])
            except InfeasibleError:
                continue
            sim = simulate_plan(sc, plan, profiles[name], policy)
            if plan.prefetch_depth == 0:  # ml_dataflow's single block: the engine's ring also carries the
                single.append(sim.step_time_s / plan.step_time_s - 1)  # backward inputs, ml_dataflow's does not
                continue
            errors[sim.link_bound_layers > 0].append(sim.step_time_s / plan.step_time_s - 1)
            by_profile[plan.framework].append(errors[sim.link_bound_layers > 0][-1])
    for label, errs in (("no layer link-bound", errors[False]), ("some layer link-bound", errors[True]),
                        ("all", errors[False] + errors[True]), ("of these pytorch", by_profile["pytorch"]),
                        ("of these ml_dataflow", by_profile["ml_dataflow"]), ("ml_dataflow single block", single)):
        if not errs:
            continue
        within = sum(abs(e) <= 0.01 for e in errs)
        med = sorted(abs(e) for e in errs)[len(errs) // 2]
        print(f"{label}: {len(errs)} plans, {within} within 1 % ({within / len(errs):.1%}), median |error| "
              f"{med:.2%}, worst {min(errs):+.2%} / {max(errs):+.2%}")


def peaks(seeds: tuple[int, ...] = (1, 2), plans_per_seed: int = 60) -> None:
    import torch

    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.model.load import load_model
    from greentrain.offload.llama import TINY_LLAMA, build_llama, stack_of, synthetic_batch
    from greentrain.offload.testing import DeviceBytes
    from greentrain.offload.train import StreamingTrainer
    from greentrain.scenario import scenario_from_dict

    torch.set_num_threads(1)
    spec = load_model(TINY_LLAMA)
    eff = dataclasses.replace(efficiency_for("h100-sxm", "ddp"), reserved_bytes=0.0)
    ratios, over = [], 0
    for seed in seeds:
        rng = random.Random(seed)
        n = 0
        while n < plans_per_seed:
            seq = rng.choice([32, 64, 128, 256, 512, 1024])
            caps = OffloadCaps(device_bytes=rng.uniform(0.5, 24) * 2**20, host_bytes=2**30)
            policy = OffloadPolicy(loss_chunk_tokens=256, prefetch_depth=rng.choice([1, 2, 3]),
                                   resident_layers=rng.choice([None, None, rng.randint(0, 4)]))
            sc = scenario_from_dict({"model": TINY_LLAMA, "cluster": {"chip": "h100-sxm", "num_chips": 1},
                                     "workload": {"seq_len": seq, "global_batch_size": 1, "precision": "fp32"}})
            try:
                plan = plan_offload(sc, caps, policy, eff=eff)
            except InfeasibleError:
                continue
            n += 1
            tr = StreamingTrainer(stack_of(build_llama(spec, seed=1)), plan, lr=1e-3, accountant=DeviceBytes(1e12),
                                  loss_chunk_tokens=256)
            stats = tr.step(synthetic_batch(spec.vocab_size, 2, 1, seq, seed=0))
            ratios.append(stats.device_peak_bytes / plan.device.total_bytes)
            over += stats.device_peak_bytes > caps.device_bytes
    print(f"{len(ratios)} plans: accounted peak / planner {min(ratios):.3f}-{max(ratios):.3f}, "
          f"{sum(abs(r - 1) <= 0.15 for r in ratios)} within 15 %, {over} over the cap")


if __name__ == "__main__":
    {"grid": grid, "crosscheck": crosscheck, "peaks": peaks}[sys.argv[1] if len(sys.argv) > 1 else "grid"]()
