"""What the per-kernel fixed costs weigh (estimate/compute.py kernels_s: every kernel of the op list at max(roofline,
the chip's floor) + its launch gap): one model and framework on A100, H100 and B200, eager against torch.compile
and Megatron's fused kernels, bf16 against fp8. Deterministic (no timing): the estimator's own step times.

    .venv/bin/python benchmarks/bench_kernel_overheads.py [--model llama3.2-1b] [--seq-len 2048] [--micro-batch 1]

"fixed" is the step's share spent in kernel floors and launch gaps (the step with them over the step without,
- 1); "eager chains" adds the eager element-wise chains' extra bytes and kernels (against fused kernels).
"""

from __future__ import annotations

import argparse
import dataclasses

from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload

CHIPS = ("a100-80gb", "h100-sxm", "b200")
FRAMEWORKS = (("torchtitan", "bf16"), ("torchtitan-compile", "bf16"), ("megatron", "bf16"), ("nemo", "fp8"))


def step_s(a: argparse.Namespace, chip: str, precision: str, eff: Efficiency) -> float:
    sc = Scenario(model=load_model(a.model), cluster=build_cluster(get_chip(chip), 8),
                  workload=Workload(global_batch_size=8 * a.micro_batch, seq_len=a.seq_len, train_tokens=1e9,
                                    precision=precision), site=Site())
    s = Strategy(dp=8, zero=3 if eff.framework.startswith("torchtitan") else 1, micro_batch_size=a.micro_batch,
                 recompute="none")
    return estimate_step(sc, s, eff=eff, check_fit=False).step_time_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama3.2-1b")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=1)
    a = p.parse_args()
    print(f"{a.model}, 8 GPUs, data parallel, micro-batch {a.micro_batch} x {a.seq_len} tokens, no recomputation")
    print("| framework | precision | chip | step (ms) | fixed | fixed + eager chains | eager / compiled |")
    print("|---|---|---|---|---|---|---|")
    for fw, precision in FRAMEWORKS:
        for chip in CHIPS:
            if precision == "fp8" and chip == "a100-80gb":
                continue  # no fp8 tensor cores
            eff = efficiency_for(chip, fw)
            t = step_s(a, chip, precision, eff)
            bare = dataclasses.replace(eff, kernel_floor_s=0.0, kernel_gap_s=0.0)
            fused = dataclasses.replace(bare, eager_ops=())
            ratio = t / step_s(a, chip, precision, efficiency_for(chip, "torchtitan-compile")) \
                if fw == "torchtitan" else None
            fixed, chains = t / step_s(a, chip, precision, bare) - 1, t / step_s(a, chip, precision, fused) - 1
            print(f"| {fw} | {precision} | {chip} | {1e3 * t:.1f} | {100 * fixed:.1f} % | {100 * chains:.1f} % | "
                  f"{'' if ratio is None else f'{ratio:.3f}'} |")


if __name__ == "__main__":
    main()
