"""Speed of the analytical estimator: one estimate through the Python API (median of many, after the
model's ops are cached), and `greentrain plan --json` wall time including interpreter start (median of 7).

    .venv/bin/python benchmarks/bench_plan.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload


def api_median_s(n: int = 2000) -> float:
    sc = Scenario(model=load_model("gpt3-175b"), cluster=build_cluster(get_chip("a100-80gb"), 1024),
                  workload=Workload(global_batch_size=1536, seq_len=2048), site=Site())
    s = Strategy(dp=16, tp=8, pp=8, vpp=3, sp=True, zero=1, recompute="selective", micro_batch_size=1)
    estimate_step(sc, s)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        estimate_step(sc, s)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cli_median_s(n: int = 7) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "greentrain.cli.main", "plan", "--json"], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


if __name__ == "__main__":
    api = api_median_s()
    cli = cli_median_s()
    print(f"estimate_step (GPT-3 175B, 1024 x A100, tp8 pp8 vpp3 dp16): median {api * 1e6:.1f} us")
    print(f"greentrain plan --json (default scenario, strategy chosen by the planner): median {cli:.3f} s")
