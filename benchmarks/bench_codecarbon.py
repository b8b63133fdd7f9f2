"""Energy of one CPU training run measured by greentrain's Tracker and CodeCarbon 3.x side by side.

Both watch the same process during the same loop (a 512-2048-512 MLP, AdamW), with the same PUE (1.0):
CodeCarbon in its process mode (``tracking_mode="process"``, the mode greentrain follows), greentrain with
its default meters. Without RAPL both estimate the CPU from CPU time x CodeCarbon's TDP (or its 4 W per thread
fallback) and the RAM from CodeCarbon 3.x's DIMM model. Needs codecarbon (``pip install codecarbon``):

    python benchmarks/bench_codecarbon.py --seconds 20 --out /tmp/cc-bench
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

import greentrain
from greentrain.measure.codecarbon import read_emissions


def train(seconds: float) -> int:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(64, 512)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        steps += 1
    return steps


def main() -> None:
    from codecarbon import EmissionsTracker

    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=Path("cc-bench"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("codecarbon").setLevel(logging.WARNING)
    (args.out / "codecarbon").mkdir(exist_ok=True)
    cc = EmissionsTracker(project_name="bench", output_dir=str(args.out / "codecarbon"), tracking_mode="process",
                          pue=1.0, measure_power_secs=1, save_to_file=True, log_level="warning",
                          allow_multiple_runs=True)
    gt = greentrain.Tracker(pue=1.0, out_dir=args.out / "greentrain", print_summary=False)
    cc.start()
    gt.start()
    steps = train(args.seconds)
    m = gt.stop()
    cc.stop()
    assert m is not None
    row = read_emissions(args.out / "codecarbon" / "emissions.csv")[-1]  # this run: the last row
    mine = read_emissions(args.out / "greentrain" / "emissions.csv")[-1]
    out = {"steps": steps, "duration_s": m.duration_s, "cpu_model": m.cpu_model}
    for part in ("cpu_energy", "ram_energy", "energy_consumed", "cpu_power", "ram_power"):
        out[part] = {"greentrain": mine[part], "codecarbon": row[part], "ratio": mine[part] / row[part]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
