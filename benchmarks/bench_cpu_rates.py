"""CPU-time rates of the estimator, for paired comparisons on a shared machine: one `estimate_step` (the
default scenario at dp 8, tp 8, sequence parallel, ZeRO-1, micro-batch 1; best of 5 x 1,000 calls) and the
whole `search()` of GPT-3 175B on 1,024 A100 (strategies per CPU second, best of 5, flash and naive attention).
CPU time, not wall time: the development machines are shared. Compare two checkouts in alternation:

    PYTHONPATH=/path/to/other/src .venv/bin/python benchmarks/bench_cpu_rates.py
    .venv/bin/python benchmarks/bench_cpu_rates.py
"""

from __future__ import annotations

import time

from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import DEFAULT_SCENARIO, scenario_from_dict
from greentrain.search.engine import search
from greentrain.search.space import SearchSpace


def _estimate_us() -> float:
    sc = scenario_from_dict(DEFAULT_SCENARIO)
    s = Strategy(dp=8, tp=8, zero=1, sp=True, micro_batch_size=1)
    estimate_step(sc, s)
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        for _ in range(1000):
            estimate_step(sc, s)
        best = min(best, (time.process_time() - t) / 1000)
    return best * 1e6


def _search_rates() -> dict[str, float]:
    sc = scenario_from_dict({"model": "gpt3-175b", "cluster": {"chip": "a100-80gb", "num_chips": 1024},
                             "workload": {"global_batch_size": 1536, "seq_len": 2048, "train_tokens": 300e9},
                             "site": {"region": "us-east-1"}})
    out = {}
    for flash in (True, False):
        space = SearchSpace(flash_attention=flash)
        search([sc], top_k=10, space=space)
        best, n = float("inf"), 0
        for _ in range(5):
            t = time.process_time()
            n = search([sc], top_k=10, space=space).num_candidates
            best = min(best, time.process_time() - t)
        out["flash" if flash else "naive"] = n / best
    return out


def main() -> None:
    rates = _search_rates()
    print(f"estimate_step {_estimate_us():.1f} us; search {rates['flash'] / 1e3:,.0f}k strategies/CPU s (flash), "
          f"{rates['naive'] / 1e3:,.0f}k (naive)")


if __name__ == "__main__":
    main()
