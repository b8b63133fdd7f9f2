"""One sample of an A/B comparison of the search and the estimator between two source trees, in CPU time
(time.process_time: what other jobs on the cores change least), printed as one JSON line.

The whole search (search/engine.py, vectorised) of GPT-3 175B on 1,024 A100-80GB, both attention spaces, as
strategies per CPU second (best and median of --repeat warm calls); estimate_step (tp 8, pp 8, vpp 3, dp 16)
per call (best and median of --batches batches of 100). Alternate the trees, several times, and compare pair by
pair (BENCHMARKS.md "Session 11: search speed"):

    git worktree add /tmp/base <commit>
    for i in 1 2 3 4 5; do for t in /tmp/base .; do
        PYTHONPATH=$t/src .venv/bin/python benchmarks/bench_search_ab.py; done; done
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import greentrain
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict
from greentrain.search.engine import search
from greentrain.search.space import SearchSpace


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--cold", action="store_true",
                   help="clear the search's mesh cache before each timed call (what one `greentrain search` of one "
                        "scenario pays; warm calls of the same scenario reuse its meshes, as a search over several "
                        "regions does)")
    a = p.parse_args()
    from greentrain.search import space as space_module
    clear = getattr(getattr(space_module, "_mesh_list", None), "cache_clear", lambda: None)
    sc = scenario_from_dict({"model": "gpt3-175b", "cluster": {"chip": "a100-80gb", "num_chips": 1024},
                             "workload": {"global_batch_size": 1536, "seq_len": 2048, "train_tokens": 300e9},
                             "site": {"region": "us-east-1"}})
    clock = time.process_time
    out: dict[str, object] = {"tree": str(Path(greentrain.__file__).parents[2]),
                              "load": round(os.getloadavg()[0], 1), "cold": a.cold}
    for flash in (True, False):
        space = SearchSpace(flash_attention=flash)
        search([sc], top_k=10, space=space)  # cold: the model's ops are built once
        times = []
        for _ in range(a.repeat):
            if a.cold:
                clear()
            t0 = clock()
            res = search([sc], top_k=10, space=space)
            times.append(clock() - t0)
        name = "flash" if flash else "naive"
        out[f"{name}_strategies"] = res.num_candidates
        out[f"{name}_per_cpu_s_best"] = res.num_candidates / min(times)
        out[f"{name}_per_cpu_s_median"] = res.num_candidates / statistics.median(times)
        out[f"{name}_best"] = f"{res.ranked[0].strategy.describe()} {res.ranked[0].run_time_s!r}"
    s = Strategy(dp=16, tp=8, pp=8, vpp=3, sp=True, zero=1, recompute="selective", micro_batch_size=1)
    estimate_step(sc, s)
    per_call = []
    for _ in range(a.batches):
        t0 = clock()
        for _ in range(100):
            estimate_step(sc, s)
        per_call.append((clock() - t0) / 100)
    out["estimate_us_best"] = min(per_call) * 1e6
    out["estimate_us_median"] = statistics.median(per_call) * 1e6
    print(json.dumps(out))


if __name__ == "__main__":
    main()
