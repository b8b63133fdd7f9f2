"""Candidates per second of `greentrain search --workers N` against one worker, on the same search, alternating.

Scenario: Llama 3 70B, global batch 1,024 x 8,192 tokens, 2 T tokens, on four chip types (H100 SXM, A100 80GB,
H200, B200), every power of two up to 1,024 chips, in four regions (`--max-chips 1024`): the shape of search
the issue asks to spread over cores (chip types x counts x regions). Each round runs one worker, then N,
checks that rankings, front, counts and points are identical, and prints wall time, candidates per second,
and the CPU seconds of this process and of its worker processes (fork start: the workers are its children).
The load average is printed before and after: on a machine other jobs use, the ratio is lower than on idle
cores. By default the workers do not send back the plot's points (as `greentrain search` without --plot);
``--points`` includes them (and compares them).

    .venv/bin/python benchmarks/bench_search_workers.py [--workers N] [--rounds R] [--points]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import time

import numpy as np

from greentrain.hardware.catalog import get_chip
from greentrain.scenario import build_cluster, scenario_from_dict, site_from_dict
from greentrain.search.engine import Constraints, SearchResult
from greentrain.search.workers import search_parallel

CHIPS = ("h100-sxm", "a100-80gb", "h200", "b200")
REGIONS = ("us-east-1", "eu-north-1", "us-west-2", "eu-west-1")


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(workers: int, **kw: object) -> tuple[SearchResult, float, float, float]:
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu_s()
    res = search_parallel(workers=workers, **kw)  # type: ignore[arg-type]
    return res, time.perf_counter() - t0, time.process_time() - c0, _children_cpu_s() - k0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--points", action="store_true", help="send every feasible point back, as --plot needs")
    a = p.parse_args()
    base = scenario_from_dict({"model": "llama3-70b", "cluster": {"chip": CHIPS[0], "num_chips": 64},
                               "workload": {"global_batch_size": 1024, "seq_len": 8192, "train_tokens": 2e12},
                               "site": {"region": REGIONS[0]}})
    scs = [base] + [dataclasses.replace(base, cluster=build_cluster(get_chip(c), 64, None)) for c in CHIPS[1:]]
    kw = {"scenarios": scs, "top_k": 10, "sites": [site_from_dict({"region": r}) for r in REGIONS],
          "constraints": Constraints(max_chips=1024)}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    walls: dict[int, list[float]] = {1: [], a.workers: []}
    for r in range(a.rounds):
        one, w1, c1, _ = _timed(1, **kw)
        many, wn, cn, kn = _timed(a.workers, points=a.points, **kw)
        same = (one.ranked == many.ranked and one.pareto == many.pareto and one.num_feasible == many.num_feasible
                and (not a.points or np.array_equal(one.points, many.points)) and one.notes == many.notes)
        walls[1].append(w1)
        walls[a.workers].append(wn)
        n = one.num_candidates
        print(f"round {r + 1}: {n:,} candidates ({one.num_feasible:,} feasible); 1 worker {w1:.2f} s "
              f"({n / w1:,.0f}/s, CPU {c1:.2f} s); {a.workers} workers {wn:.2f} s ({n / wn:,.0f}/s, CPU here "
              f"{cn:.2f} s + workers {kn:.2f} s); ratio {w1 / wn:.2f}x; identical: {same}")
    m1, mn = statistics.median(walls[1]), statistics.median(walls[a.workers])
    print(f"median wall 1 worker {m1:.2f} s, {a.workers} workers {mn:.2f} s: {m1 / mn:.2f}x candidates/s "
          f"(best {min(walls[1]) / min(walls[a.workers]):.2f}x); load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
