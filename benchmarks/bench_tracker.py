"""Training-step time with the Tracker fully on (hooks, cached FLOP counting, meters, sampler thread, JSONL)
against no tracker, as a ratio. The machine is shared and noisy, so the two are interleaved finely: each
round runs ``--steps`` steps without the tracker and ``--steps`` with it (the order alternates from round to
round, so a drift in load hits both sides alike), on one model and one optimizer. Each round starts a fresh
Tracker whose first step (the FLOP-counting one for that shape) runs outside the timing.

Printed per model: median step time off / on over all timed steps, the ratio of those medians, the median of
the per-round ratios, the ratio of the minima (the least disturbed step on each side), the fixed cost
per step (median on - median off), and the ratio of the median process CPU times per step (less sensitive
to other processes than wall time; with --threads 1 it has no OpenMP spin-waiting in it either).

    .venv/bin/python benchmarks/bench_tracker.py [--rounds 30] [--steps 4] [--threads N] [--models gpt,tiny]
        [--backward graph|full]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "measure"))
from tiny_gpt import GPT, train_step

from greentrain.measure.tracker import Tracker

CASES = {"gpt": ("gpt-4L-d256-s128-b8", dict(d=256, layers=4, heads=4, seq=128, batch=8)),
         "tiny": ("tiny-1L-d32-s16-b2", dict(d=32, layers=1, heads=2, seq=16, batch=2))}


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    name: str
    off_s: list[float]
    on_s: list[float]
    round_ratios: list[float]
    off_cpu_s: list[float]
    on_cpu_s: list[float]

    @property
    def median_off_s(self) -> float:
        return statistics.median(self.off_s)

    @property
    def median_on_s(self) -> float:
        return statistics.median(self.on_s)


Times = list[tuple[float, float]]  # (wall s, process CPU s) per step


def _steps(model: GPT, opt: torch.optim.Optimizer, idx: torch.Tensor, n: int, t: Tracker | None) -> Times:
    times = []
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        train_step(model, opt, idx)
        if t is not None:
            t.step()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times


BACKWARD = {"mode": "graph"}  # the Tracker's backward_hooks (--backward)


def _tracked(model: GPT, opt: torch.optim.Optimizer, idx: torch.Tensor, n: int, out: Path) -> Times:
    with Tracker(model, out_dir=out, print_summary=False, write_outputs=False,
                 backward_hooks=BACKWARD["mode"]) as t:
        _steps(model, opt, idx, 1, t)  # the FLOP-counting step of this shape, outside the timing
        return _steps(model, opt, idx, n, t)


def bench(key: str, rounds: int, steps: int, out: Path) -> Result:
    name, c = CASES[key]
    torch.manual_seed(0)
    model = GPT(d=c["d"], layers=c["layers"], heads=c["heads"], seq=c["seq"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 512, (c["batch"], c["seq"]))
    _steps(model, opt, idx, 3, None)  # warm-up
    off: Times = []
    on: Times = []
    ratios = []
    for r in range(rounds):
        if r % 2 == 0:
            o = _steps(model, opt, idx, steps, None)
            n = _tracked(model, opt, idx, steps, out / f"{key}-{r}")
        else:
            n = _tracked(model, opt, idx, steps, out / f"{key}-{r}")
            o = _steps(model, opt, idx, steps, None)
        off += o
        on += n
        ratios.append(statistics.median(w for w, _ in n) / statistics.median(w for w, _ in o))
    return Result(name=name, off_s=[w for w, _ in off], on_s=[w for w, _ in on], round_ratios=ratios,
                  off_cpu_s=[c for _, c in off], on_cpu_s=[c for _, c in on])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--steps", type=int, default=4, help="steps per side per round")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--models", default="gpt,tiny", help="comma-separated: gpt, tiny")
    p.add_argument("--backward", default="graph", choices=("graph", "full"), help="the Tracker's backward_hooks")
    args = p.parse_args()
    BACKWARD["mode"] = args.backward
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{os.getloadavg()[0]:.2f} (start), {args.rounds} rounds x {args.steps} steps per side, "
          f"backward hooks: {args.backward}")
    head = ("model", "off ms", "on ms", "ratio of medians", "median round ratio", "ratio of minima", "cost us/step",
            "CPU-time ratio")
    print(f"{head[0]:<20} {head[1]:>9} {head[2]:>9} {head[3]:>17} {head[4]:>19} {head[5]:>16} {head[6]:>13} "
          f"{head[7]:>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.models.split(","):
            r = bench(key.strip(), args.rounds, args.steps, Path(tmp))
            print(f"{r.name:<20} {r.median_off_s * 1e3:>9.3f} {r.median_on_s * 1e3:>9.3f} "
                  f"{r.median_on_s / r.median_off_s:>17.4f} {statistics.median(r.round_ratios):>19.4f} "
                  f"{min(r.on_s) / min(r.off_s):>16.4f} {(r.median_on_s - r.median_off_s) * 1e6:>13.0f} "
                  f"{statistics.median(r.on_cpu_s) / statistics.median(r.off_cpu_s):>15.4f}")
    print(f"load average {os.getloadavg()[0]:.2f} (end)")


if __name__ == "__main__":
    main()
