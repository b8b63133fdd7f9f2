"""Rank 0's view of a torchrun job: the per-rank measurements folded into one.

Sums: tokens, FLOPs, energy (each rank measured its own GPU; RAPL only on local rank 0, so no socket is
counted twice). Maxima: step time and duration (the slowest rank sets the pace), memory per device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from greentrain.measure.summary import Measurement


def aggregate(per_rank: Sequence[Measurement]) -> Measurement:
    if not per_rank:
        raise ValueError("aggregate() needs at least one measurement")
    first = per_rank[0]

    def total(name: str) -> float:
        return float(sum(getattr(m, name) for m in per_rank))

    def most(name: str) -> float:
        return float(max(getattr(m, name) for m in per_rank))

    duration_s = most("duration_s")
    steps_s = most("step_time_s") * max(first.num_steps - 1, 1)
    it_energy_j = total("it_energy_j")
    statuses = sorted({m.status for m in per_rank})
    return replace(
        first, status=statuses[0] if len(statuses) == 1 else "mixed: " + ", ".join(statuses),
        world_size=len(per_rank), duration_s=duration_s, step_time_s=most("step_time_s"),
        first_step_time_s=most("first_step_time_s"), forward_s=most("forward_s"), backward_s=most("backward_s"),
        tokens=total("tokens"), tokens_per_s=total("tokens_per_s"), samples_per_s=total("samples_per_s"),
        flop=total("flop"), flop_per_step=total("flop_per_step"), flop_per_s=total("flop_per_s"),
        memory_bytes=most("memory_bytes"), peak_rss_bytes=most("peak_rss_bytes"),
        peak_cuda_bytes=most("peak_cuda_bytes"), gpu_energy_j=total("gpu_energy_j"),
        cpu_energy_j=total("cpu_energy_j"), ram_energy_j=total("ram_energy_j"), it_energy_j=it_energy_j,
        energy_j=total("energy_j"), energy_j_per_step=total("energy_j_per_step"),
        power_w=it_energy_j / duration_s if duration_s > 0 else 0.0,
        meters=tuple({(m.name, m.measured, m.source): m for r in per_rank for m in r.meters}.values()),
        notes=(*first.notes, f"aggregated over {len(per_rank)} ranks; steady step span {steps_s:.3g} s"))
