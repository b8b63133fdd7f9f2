"""Strategies evaluated per second by `greentrain search`: vectorised (estimate/vector.py) against the scalar
estimator in a loop (estimate_run per strategy), in one run, as a ratio.

Scenario: GPT-3 175B on 1,024 A100-80GB (128 DGX nodes), global batch 1,536 x 2,048 tokens, 300 B tokens
(Brown et al. 2020 Table 2.1; Narayanan et al. 2021 Table 1 ran it on 1,024 A100). The whole space is searched
with the vectorised path (enumeration, memory pruning, step times, footprint, ranking and Pareto front: the
`search()` call the CLI makes), cold (first call: model ops built) and warm (median of --repeat, wall and CPU
time: on a loaded machine compare the CPU figures, alternating trees). The scalar
path evaluates a seeded random sample of the same space and its rate projects the whole space.

    .venv/bin/python benchmarks/bench_search.py [--sample N] [--repeat R] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

from greentrain.errors import InfeasibleError
from greentrain.estimate.run import estimate_run
from greentrain.scenario import scenario_from_dict
from greentrain.search.engine import search
from greentrain.search.space import SearchSpace, table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    sc = scenario_from_dict({"model": "gpt3-175b", "cluster": {"chip": "a100-80gb", "num_chips": 1024},
                             "workload": {"global_batch_size": 1536, "seq_len": 2048, "train_tokens": 300e9},
                             "site": {"region": "us-east-1"}})
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for flash in (True, False):  # naive attention adds selective recomputation to the space
        space = SearchSpace(flash_attention=flash)
        t0 = time.perf_counter()
        cold = search([sc], top_k=10, space=space)
        cold_s = time.perf_counter() - t0
        warm, cpu = [], []
        for _ in range(a.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            res = search([sc], top_k=10, space=space)
            warm.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        warm_s, cpu_s = statistics.median(warm), statistics.median(cpu)
        n = res.num_candidates
        print(f"{'flash' if flash else 'naive'} attention space: {n:,} strategies, {res.num_feasible:,} feasible, "
              f"Pareto front {len(res.pareto)}; best {cold.ranked[0].strategy.describe()}")
        print(f"  vectorised whole space: cold {cold_s:.3f} s ({n / cold_s:,.0f} strategies/s), warm median of "
              f"{a.repeat} {warm_s:.3f} s ({n / warm_s:,.0f} strategies/s); CPU time median {cpu_s:.3f} s "
              f"({n / cpu_s:,.0f} strategies per CPU second: what other jobs on the cores change least)")
    rows = table(sc, space)
    sample = random.Random(a.seed).sample(range(len(rows)), min(a.sample, len(rows)))
    feasible = 0
    t0 = time.perf_counter()
    for i in sample:
        try:
            estimate_run(sc, rows.row(i))
            feasible += 1
        except InfeasibleError:
            pass
    eval_s = time.perf_counter() - t0
    rate = len(sample) / eval_s
    print(f"scalar: {len(sample):,} sampled strategies in {eval_s:.2f} s = {rate:,.0f} strategies/s "
          f"({feasible:,} feasible); projected whole space {n / rate:,.1f} s")
    print(f"ratio vectorised (warm, naive-attention space) / scalar: {n / warm_s / rate:,.0f}x")


if __name__ == "__main__":
    main()
