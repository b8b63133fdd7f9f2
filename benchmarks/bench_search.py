"""Strategies evaluated per second by `greentrain search` (scalar estimator, estimate_run per strategy).

Scenario: GPT-3 175B on 1,024 A100-80GB (128 DGX nodes), global batch 1,536 x 2,048 tokens, 300 B tokens
(Brown et al. 2020 Table 2.1; Narayanan et al. 2021 Table 1 ran it on 1,024 A100). The whole space is
enumerated and counted; a seeded random sample is evaluated (the full space takes minutes with the scalar
path) and the rate gives the projected time of the whole space.

    .venv/bin/python benchmarks/bench_search.py [--sample N] [--seed S]
"""

from __future__ import annotations

import argparse
import random
import time

from greentrain.errors import InfeasibleError
from greentrain.estimate.run import estimate_run
from greentrain.scenario import scenario_from_dict
from greentrain.search.space import strategies


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    sc = scenario_from_dict({"model": "gpt3-175b", "cluster": {"chip": "a100-80gb", "num_chips": 1024},
                             "workload": {"global_batch_size": 1536, "seq_len": 2048, "train_tokens": 300e9}})
    t0 = time.perf_counter()
    space = strategies(sc)
    enum_s = time.perf_counter() - t0
    sample = random.Random(a.seed).sample(space, min(a.sample, len(space)))
    feasible = 0
    t0 = time.perf_counter()
    for s in sample:
        try:
            estimate_run(sc, s)
            feasible += 1
        except InfeasibleError:
            pass
    eval_s = time.perf_counter() - t0
    rate = len(sample) / eval_s
    print(f"space: {len(space):,} strategies, enumerated in {enum_s:.2f} s")
    print(f"scalar: {len(sample):,} sampled strategies in {eval_s:.2f} s = {rate:,.0f} strategies/s "
          f"({feasible:,} feasible)")
    print(f"projected whole space (scalar): {len(space) / rate:,.0f} s")


if __name__ == "__main__":
    main()
