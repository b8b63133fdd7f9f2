"""The offload numbers of docs/offload.md, on CPU (issue 14):

    .venv/bin/python benchmarks/bench_offload.py grid        # the 768-cell heatmap grid, CPU seconds
    .venv/bin/python benchmarks/bench_offload.py crosscheck  # planner vs event engine, 3 seeds (about 1 s)
    .venv/bin/python benchmarks/bench_offload.py peaks       # executor accounted peak vs planner, 2 seeds
    .venv/bin/python benchmarks/bench_offload.py host        # the executor's host-side work, per CPU thread
    .venv/bin/python benchmarks/bench_offload.py h200        # the planner on Session 8's H200 offload run
    .venv/bin/python benchmarks/bench_offload.py fresh       # a copy into fresh (first-touched) host memory
    .venv/bin/python benchmarks/bench_offload.py levels      # accounted peak per save level and per sequences

``crosscheck`` draws the random plans of tests/unit/offload/test_offload_simulate.py (seeds 0, 5, 7) and prints,
per class (a layer link-bound or not) and per profile, how many plans come within 1 % of the engine and the worst
error (engine / planner - 1). ``peaks`` runs the executor (tiny llama, 2 micro-batches) on the planner's own
plans at random caps (seeds 1, 2) and prints the accounted device peak over the planner's device bytes and any
cap crossed. ``host`` times, on one CPU thread, what greentrain's executor (offload/train.py) does on the host in
a step: ``torch.optim.AdamW(foreach=False)`` and ``clip_grad_norm_(foreach=False)`` on the masters, the gradient
accumulation ``add_`` of a later micro-batch, and for comparison the fused CPU AdamW (``fused=True``); over one
Llama 3.2 1B layer and one 128,256 x 2,048 table, weighted as the untied 1B (16 layers, 2 tables), best of 3
after a warm-up step, in bf16 and fp32. The planner's ``cpu`` constants (offload/data/offload.yaml) are these
per-thread figures; it scales them by the host threads (the executor's elementwise CPU ops run on torch's
intra-op threads).
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from functools import cache

from greentrain import units
from greentrain.errors import InfeasibleError
from greentrain.offload.calibrate import cell_scenario
from greentrain.offload.config import OffloadCaps, OffloadPolicy, offload_framework
from greentrain.offload.grid import offload_grid
from greentrain.offload.plan import plan_offload
from greentrain.offload.simulate import simulate_plan
from greentrain.scenario import Scenario

CELLS = [("llama3.2-1b", 1024), ("llama3.2-1b", 4096), ("llama3.2-1b", 16384), ("llama3.2-1b", 32768),
         ("llama3-8b", 8192), ("llama3-8b", 32768)]


def grid() -> None:
    args = (["llama3.2-1b", "llama3-8b"], ["h100-sxm"], [4096, 8192, 16384, 32768], list(range(16, 80, 8)),
            [32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 200])
    for profile in (offload_framework("ml_dataflow"), offload_framework("pytorch")):
        offload_grid(*args[:2], [512], [20], [80], profile)  # warm the caches
        t0 = time.process_time()
        cells = offload_grid(*args, profile)
        print(f"{profile.name}: {len(cells)} cells in {time.process_time() - t0:.3f} s CPU, "
              f"{sum(c.fits for c in cells)} fit")


@cache
def _sc(model: str, seq: int, chip: str) -> Scenario:
    return cell_scenario(model, chip, seq)


def crosscheck(seeds: tuple[int, ...] = (0, 5, 7), plans_per_seed: int = 200) -> None:
    profiles = {"ml_dataflow": offload_framework("ml_dataflow"), "pytorch": offload_framework("pytorch"),
                "pytorch-bf16": offload_framework("pytorch", "bf16")}
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


def _host_rates(dtype: object, kind: str, shapes: list[tuple[int, ...]], reps: int = 3) -> float:
    """Seconds of one ``kind`` pass over tensors of ``shapes`` on one thread (best of ``reps``)."""
    import torch

    assert isinstance(dtype, torch.dtype)
    gen = torch.Generator().manual_seed(0)
    ps = [torch.randn(s, generator=gen).to(dtype) for s in shapes]
    for p in ps:
        p.grad = (torch.randn(p.shape, generator=gen) * 1e-3).to(dtype)
    src = [p.grad.clone() for p in ps]  # type: ignore[union-attr]
    opt = torch.optim.AdamW(ps, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0,
                            **({"fused": True} if kind == "adamw_fused" else {"foreach": False}))

    def fn() -> None:
        if kind.startswith("adamw"):
            opt.step()
        elif kind == "clip":
            torch.nn.utils.clip_grad_norm_(ps, 1.0, foreach=False)
        else:
            for p, s in zip(ps, src, strict=True):
                p.grad.add_(s)  # type: ignore[union-attr]
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def host() -> None:
    import torch

    torch.set_num_threads(1)
    d, kv, f, vocab = 2048, 512, 8192, 128256  # Llama 3.2 1B
    layer = [(d, d), (kv, d), (kv, d), (d, d), (f, d), (f, d), (d, f), (d,), (d,)]
    n_layer, n_table = sum(math.prod(s) for s in layer), vocab * d
    params = 16 * n_layer + 2 * n_table
    for dtype in (torch.bfloat16, torch.float32):
        for kind in ("adamw", "clip", "accumulate", "adamw_fused"):
            t = 16 * _host_rates(dtype, kind, layer) + 2 * _host_rates(dtype, kind, [(vocab, d)], reps=2)
            print(f"{str(dtype).removeprefix('torch.'):8s} {kind:12s} {params / t / 1e6:7.1f} M params/s per thread "
                  f"({t:.2f} s for the untied 1B's {params / 1e9:.3f} B parameters on one thread)", flush=True)


def _level_peak(seq: int, nseq: int, level: str) -> float:
    """Accounted device peak over the plan: tiny llama, every slot at ``level``, none on the device, 2 micro-batches
    of ``nseq`` sequences."""
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
    sc = scenario_from_dict({"model": TINY_LLAMA, "cluster": {"chip": "h100-sxm", "num_chips": 1},
                             "workload": {"seq_len": seq, "global_batch_size": nseq, "precision": "fp32"},
                             "strategy": {"micro_batch_size": nseq}})
    levels = {"device": 0, "input": 0, "attention": 0, "full": 0} | {level: spec.num_layers}
    plan = plan_offload(sc, OffloadCaps(device_bytes=64 * 2**20, host_bytes=2**30),
                        OffloadPolicy(loss_chunk_tokens=256, activation_levels=levels, resident_layers=0), eff=eff)
    tr = StreamingTrainer(stack_of(build_llama(spec, seed=1)), plan, lr=1e-3, accountant=DeviceBytes(1e12),
                          loss_chunk_tokens=256)
    return tr.step(synthetic_batch(spec.vocab_size, 2, nseq, seq, seed=0)).device_peak_bytes / plan.device.total_bytes


def levels() -> None:
    for seq in (256, 1024):
        print(f"{seq} tokens, one sequence: " + ", ".join(
            f"{lv} {_level_peak(seq, 1, lv):.3f}" for lv in ("input", "attention", "full")))
    print("input, 256 tokens, 1-3 sequences per micro-batch: " + ", ".join(
        f"{n}: {_level_peak(256, n, 'input'):.3f}" for n in (1, 2, 3)))
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.model.load import load_model
    from greentrain.offload.llama import TINY_LLAMA, build_llama, stack_of, synthetic_batch
    from greentrain.offload.testing import DeviceBytes
    from greentrain.offload.train import StreamingTrainer
    from greentrain.scenario import scenario_from_dict

    spec = load_model(TINY_LLAMA)  # _level_peak set torch to one thread
    eff = dataclasses.replace(efficiency_for("h100-sxm", "ddp"), reserved_bytes=0.0)
    rng, over = random.Random(3), 0
    ratios: list[float] = []
    while len(ratios) < 40:  # the planner's own plans at 2-3 sequences per micro-batch, random caps
        n, seq = rng.choice([2, 3]), rng.choice([64, 128, 256])
        caps = OffloadCaps(device_bytes=rng.uniform(0.5, 12) * 2**20, host_bytes=2**30)
        sc = scenario_from_dict({"model": TINY_LLAMA, "cluster": {"chip": "h100-sxm", "num_chips": 1},
                                 "workload": {"seq_len": seq, "global_batch_size": n, "precision": "fp32"},
                                 "strategy": {"micro_batch_size": n}})
        try:
            plan = plan_offload(sc, caps, OffloadPolicy(loss_chunk_tokens=256, prefetch_depth=rng.choice([1, 2])),
                                eff=eff)
        except InfeasibleError:
            continue
        tr = StreamingTrainer(stack_of(build_llama(spec, seed=1)), plan, lr=1e-3, accountant=DeviceBytes(1e12),
                              loss_chunk_tokens=256)
        peak = tr.step(synthetic_batch(spec.vocab_size, 2, n, seq, seed=0)).device_peak_bytes
        ratios.append(peak / plan.device.total_bytes)
        over += peak > caps.device_bytes
    print(f"planner's plans at 2-3 sequences: {len(ratios)}, peak / plan {min(ratios):.3f}-{max(ratios):.3f}, "
          f"{sum(abs(r - 1) <= 0.15 for r in ratios)} within 15 %, {over} over the cap")


def fresh() -> None:
    """GB/s of a copy into freshly allocated host memory (its pages touched for the first time: what the executor's
    ``p.grad.to("cpu")`` of a later micro-batch writes into) and into memory already touched, one thread."""
    import torch

    torch.set_num_threads(1)
    for rows in (8192, 128256):  # a Llama 3.2 1B MLP matrix (32 MiB) and a table (501 MiB), bf16
        src = torch.randn(rows, 2048).to(torch.bfloat16)
        dst = src.clone()
        for name, fn in (("fresh", src.clone), ("touched", lambda src=src, dst=dst: dst.copy_(src))):
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t0)
            print(f"{rows} x 2048 bf16, copy into {name} memory: {src.numel() * 2 / best / 1e9:.2f} GB/s")


# BENCHMARKS.md Session 8 (2026-11-26): `greentrain offload train --model 1 --device cuda --chip h200 --host-gib 48
# --device-gib 120 --seq-len 8192 --steps 3` on a lent H200 with 16 CPU cores; its plan kept 16 layers resident
H200_RUN = {"tokens_per_s": 3998.0, "device_peak_gib": 21.64, "host_gib": 11.16}


def h200(threads: int = 16) -> None:
    """What the planner predicts for that run now: the placement it ran (16 resident layers, every activation on
    the device) and the planner's own choice, 2 micro-batches per step, the host AdamW on ``threads`` threads."""
    from greentrain.offload.config import offload_framework
    from greentrain.offload.launch import make_plan

    caps = OffloadCaps.from_gib(device_gib=120, host_gib=48)
    own = make_plan("llama3.2-1b", caps, 8192, 2, "h200", "cuda", host_threads=threads)[1]
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.model.load import load_model
    from greentrain.scenario import scenario_from_dict

    model = dataclasses.replace(load_model("llama3.2-1b"), tied_embeddings=False)  # as offload/llama.py builds it
    sc = scenario_from_dict({"model": model.to_dict(), "cluster": {"chip": "h200", "num_chips": 1},
                             "workload": {"seq_len": 8192, "global_batch_size": 2, "precision": "bf16"}})
    ran = plan_offload(sc, caps, OffloadPolicy(resident_layers=16, rounds_per_step=2, host_threads=threads),
                       offload_framework("pytorch", "bf16"), eff=efficiency_for("h200", "ddp"))
    for name, plan in (("as run (16 resident)", ran), ("planner's choice", own)):
        rounds_s = plan.step_time_s - plan.optimizer_time_s
        print(f"{name}: {plan.tokens_per_s:,.0f} tokens/s (measured {H200_RUN['tokens_per_s']:,.0f}: "
              f"{plan.tokens_per_s / H200_RUN['tokens_per_s'] - 1:+.0%}), step {plan.step_time_s:.3f} s = "
              f"{plan.num_rounds} micro-batches {rounds_s:.3f} s (host gradient copies {plan.host_copy_time_s:.3f} s) "
              f"+ optimizer {plan.optimizer_time_s:.3f} s; bound {plan.bound}; device "
              f"{units.bytes_to_gib(plan.device.total_bytes):.2f} GiB (measured {H200_RUN['device_peak_gib']}), "
              f"host {units.bytes_to_gib(plan.host.total_bytes):.2f} GiB (measured {H200_RUN['host_gib']})")


if __name__ == "__main__":
    commands = {"grid": grid, "crosscheck": crosscheck, "peaks": peaks, "host": host, "h200": h200, "fresh": fresh,
                "levels": levels}
    commands[sys.argv[1] if len(sys.argv) > 1 else "grid"]()
