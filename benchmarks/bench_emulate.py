"""Speed of `greentrain.emulate` on the nine cases of seed 003's own tests (seed-systems.md §3.8): 8 gloo ranks
on a 2x4 mesh, MatMul m,k,n = 4096, 2048, 4096 (unsharded; matched inner (1,4), (2,1), (2,4); unmatched
inner; outer; full) and the FFN b,s,m,h = 8, 128, 1024, 4096 (unsharded; GSPMD). Then the recorder's
overhead: the same cases with the recorder off (the same torch.distributed calls, no timing, no records),
alternating on/off ``--repeats`` times in one launch, the fastest of each compared. Then the seed's pipeline
MLP (4 stages, 8 micro-batches, units 256,512,1024,512,256, 4096 samples) under GPipe and 1F1B.

    .venv/bin/python benchmarks/bench_emulate.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import time

from greentrain.emulate.cases import FfnCase, MatMulCase, PipelineCase, Schedule
from greentrain.emulate.launcher import LaunchOptions, emulate, run_jobs
from greentrain.emulate.sharding import Mesh2D, TensorSharding

MESH = Mesh2D(x_size=2, y_size=4)
SEED_MATMULS = [("1x1,1x1", "1x1,1x1"), ("1x1,1x4", "1x4,1x1"), ("1x1,2x1", "2x1,1x1"), ("1x1,2x4", "2x4,1x1"),
                ("1x1,1x4", "2x1,1x1"), ("2x1,1x4", "2x1,1x1"), ("2x1,1x4", "2x1,1x4")]


def seed_cases() -> list:
    def ts(text: str) -> TensorSharding:
        return TensorSharding.parse(text, "sharding")

    cases: list = [MatMulCase(mesh=MESH, m=4096, k=2048, n=4096, a=ts(a), b=ts(b), c=ts("1x1,1x1"))
                   for a, b in SEED_MATMULS]
    cases += [FfnCase(mesh=MESH, batch=8, seq=128, d_model=1024, d_ff=4096, gspmd=g) for g in (False, True)]
    return cases


def end_to_end(options: LaunchOptions) -> None:
    cases = seed_cases()
    start = time.perf_counter()
    results = emulate(cases, options)
    wall = time.perf_counter() - start
    print(f"{'case':55s} {'policy':16s} {'op s':>8s} {'comm s':>8s} {'GFLOP':>8s} {'d2d MiB':>9s} {'rel err':>9s}")
    for r in results:
        t = r.total
        print(f"{r.label:55s} {r.policy:16s} {r.time_s:8.3f} {r.comm_time_s:8.3f} {t.flops / 1e9:8.1f} "
              f"{t.d2d_bytes / 2**20:9.1f} {r.max_rel_error:9.2e}")
    assert all(r.ok for r in results)
    print(f"nine seed cases end to end (start 8 ranks, inputs, ops, float32 checks, stop): {wall:.1f} s; "
          f"sum of op times {sum(r.time_s for r in results):.2f} s")


def overhead(options: LaunchOptions, repeats: int) -> None:
    cases = seed_cases()
    # on/off alternate, and which goes first alternates too, so that neither always follows the other
    jobs = [(c, record) for rep in range(repeats) for record in ((True, False) if rep % 2 == 0 else (False, True))
            for c in cases]
    results = run_jobs(jobs, options)
    n = len(cases)
    best = {True: [float("inf")] * n, False: [float("inf")] * n}
    for i, ((_, record), r) in enumerate(zip(jobs, results, strict=True)):
        best[record][i % n] = min(best[record][i % n], r.time_s)
    for case, on, off in zip(cases, best[True], best[False], strict=True):
        print(f"  {case.label:55s} recorded {on:7.3f} s  raw {off:7.3f} s  ratio {on / off:5.3f}")
    print(f"recorder overhead (sum of fastest op times, {repeats} repeats): recorded {sum(best[True]):.3f} s / "
          f"raw {sum(best[False]):.3f} s = {sum(best[True]) / sum(best[False]):.3f}x")


def pipeline(options: LaunchOptions) -> None:
    cases = [PipelineCase(units=(256, 512, 1024, 512, 256), micro_batches=8, batch=4096, schedule=s)
             for s in Schedule]
    start = time.perf_counter()
    results = emulate(cases, options)
    wall = time.perf_counter() - start
    for r in results:
        print(f"{r.label:30s} op {r.time_s:.3f} s  GFLOP {r.total.flops / 1e9:.2f}  d2d {r.total.d2d_messages} msgs "
              f"{r.total.d2d_bytes / 2**20:.1f} MiB  rel err {r.max_rel_error:.2e}")
    assert all(r.ok for r in results)
    print(f"pipeline, both schedules, end to end: {wall:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=1200.0)
    args = parser.parse_args()
    options = LaunchOptions(timeout_s=args.timeout_s)
    end_to_end(options)
    overhead(options, args.repeats)
    pipeline(options)


if __name__ == "__main__":
    main()
