"""Training-step time with the Tracker fully on (hooks, cached FLOP counting, meters, JSONL) against no
tracker, as a ratio; interleaved rounds, medians (the machine is shared and noisy).

    .venv/bin/python benchmarks/bench_tracker.py [--rounds 7] [--steps 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "measure"))
from tiny_gpt import GPT, train_step

from greentrain.measure.tracker import Tracker

CASES = {"gpt-4L-d256-s128-b8": dict(d=256, layers=4, heads=4, seq=128, batch=8),
         "tiny-1L-d32-s16-b2": dict(d=32, layers=1, heads=2, seq=16, batch=2)}


def _steps(model: GPT, opt: torch.optim.Optimizer, idx: torch.Tensor, n: int, t: Tracker | None) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        train_step(model, opt, idx)
        if t is not None:
            t.step()
        times.append(time.perf_counter() - t0)
    return times


def bench(name: str, rounds: int, steps: int, out: Path) -> tuple[float, float, float]:
    c = CASES[name]
    torch.manual_seed(0)
    model = GPT(d=c["d"], layers=c["layers"], heads=c["heads"], seq=c["seq"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 512, (c["batch"], c["seq"]))
    _steps(model, opt, idx, 3, None)  # warm-up
    off, on, ratios = [], [], []
    for r in range(rounds):  # interleaved: off, on, off, on ...
        o = _steps(model, opt, idx, steps, None)
        with Tracker(model, out_dir=out / f"{name}-{r}", print_summary=False, write_outputs=False) as t:
            _steps(model, opt, idx, 1, t)  # the FLOP-counting step of this shape, outside the timing
            n = _steps(model, opt, idx, steps, t)
        off, on = off + o, on + n
        ratios.append(statistics.median(n) / statistics.median(o))
    return statistics.median(off), statistics.median(on), statistics.median(ratios)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'model':<22} {'no tracker ms':>14} {'tracker ms':>11} {'median ratio of rounds':>23}")
        for name in CASES:
            a, b, ratio = bench(name, args.rounds, args.steps, Path(tmp))
            print(f"{name:<22} {a * 1e3:>14.2f} {b * 1e3:>11.2f} {ratio:>23.3f}")


if __name__ == "__main__":
    main()
