"""Rank 0's view of a torchrun job: the per-rank measurements folded into one.

Sums: FLOPs, energy (each rank measured its own GPU; RAPL only on local rank 0, so no socket is counted
twice), tokens divided by ``model_parallel_size`` (the ranks of one tensor/pipeline/context-parallel group
all see the same batch: summing them would count its tokens once per rank). Maxima: step time and
duration (the slowest rank sets the pace), memory per device. Per module: FLOPs and energy summed over the
ranks (under DTensor each rank counts its local shard), times and memory the slowest / largest rank's.
Each rank's own figures are kept in ``Measurement.ranks``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.footprint.site import Site
from greentrain.measure.records import last_run, read_jsonl
from greentrain.measure.summary import Measurement, ModuleStats, RankStats, summarize, with_footprint

_RANK_FILE = re.compile(r"greentrain\.rank(\d+)\.jsonl$")


def _modules(per_rank: Sequence[Measurement]) -> tuple[ModuleStats, ...]:
    """Rank 0's module list with FLOPs and energy summed over the ranks, times and memory maxed."""
    out = []
    for x in per_rank[0].modules:
        same = [m for r in per_rank for m in r.modules if m.name == x.name]
        out.append(replace(x, forward_s=max(m.forward_s for m in same), backward_s=max(m.backward_s for m in same),
                           forward_flop=sum(m.forward_flop for m in same),
                           backward_flop=sum(m.backward_flop for m in same),
                           memory_bytes=max(m.memory_bytes for m in same), energy_j=sum(m.energy_j for m in same)))
    return tuple(out)


def rank_stats(rank: int, m: Measurement) -> RankStats:
    return RankStats(rank=rank, step_time_s=m.step_time_s, flop=m.flop, tokens=m.tokens,
                     it_energy_j=m.it_energy_j, memory_bytes=m.memory_bytes)


def aggregate(per_rank: Sequence[Measurement], model_parallel_size: int = 1) -> Measurement:
    """One Measurement of the job from each rank's (index = rank)."""
    if not per_rank:
        raise ValueError("aggregate() needs at least one measurement")
    require(model_parallel_size >= 1 and len(per_rank) % model_parallel_size == 0, "model_parallel_size",
            model_parallel_size, f"must be >= 1 and divide the number of ranks ({len(per_rank)})")
    first = per_rank[0]

    def total(name: str) -> float:
        return float(sum(getattr(m, name) for m in per_rank))

    def most(name: str) -> float:
        return float(max(getattr(m, name) for m in per_rank))

    duration_s = most("duration_s")
    it_energy_j = total("it_energy_j")
    statuses = sorted({m.status for m in per_rank})
    mp = float(model_parallel_size)
    utils = [m.gpu_utilization_percent for m in per_rank if m.gpu_utilization_percent is not None]
    return replace(
        first, status=statuses[0] if len(statuses) == 1 else "mixed: " + ", ".join(statuses),
        world_size=len(per_rank), duration_s=duration_s, step_time_s=most("step_time_s"),
        first_step_time_s=most("first_step_time_s"), forward_s=most("forward_s"), backward_s=most("backward_s"),
        tokens=total("tokens") / mp, tokens_per_s=total("tokens_per_s") / mp,
        samples_per_s=total("samples_per_s") / mp,
        flop=total("flop"), flop_per_step=total("flop_per_step"), flop_per_s=total("flop_per_s"),
        memory_bytes=most("memory_bytes"), peak_rss_bytes=most("peak_rss_bytes"),
        peak_cuda_bytes=most("peak_cuda_bytes"), peak_cuda_reserved_bytes=most("peak_cuda_reserved_bytes"),
        gpu_energy_j=total("gpu_energy_j"),
        cpu_energy_j=total("cpu_energy_j"), ram_energy_j=total("ram_energy_j"), it_energy_j=it_energy_j,
        energy_j=total("energy_j"), energy_j_per_step=total("energy_j_per_step"),
        power_w=it_energy_j / duration_s if duration_s > 0 else 0.0,
        gpu_utilization_percent=sum(utils) / len(utils) if utils else None,  # each rank its own GPU
        meters=tuple({(m.name, m.measured, m.source): m for r in per_rank for m in r.meters}.values()),
        modules=_modules(per_rank), ranks=tuple(rank_stats(i, m) for i, m in enumerate(per_rank)),
        notes=(*first.notes, f"aggregated over {len(per_rank)} ranks"))


def rank_files(out_dir: Path) -> list[Path]:
    """A Tracker's record files in ``out_dir``: ``greentrain.rank{r}.jsonl`` for r = 0..n-1 (all of them), or
    the single-process ``greentrain.jsonl``."""
    require(out_dir.is_dir(), "out_dir", str(out_dir), "must be an existing directory")
    found = {int(m.group(1)): p for p in out_dir.iterdir() if (m := _RANK_FILE.match(p.name))}
    if not found:
        single = out_dir / "greentrain.jsonl"
        if single.is_file():
            return [single]
        raise ConfigError("out_dir", str(out_dir), "holds no greentrain.jsonl or greentrain.rank<r>.jsonl")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    require(not missing, "out_dir", str(out_dir), f"lacks the record of rank(s) {missing}")
    return [found[r] for r in range(len(found))]


def _same_run(records: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Rank 0's last run decides how many ranks are read: files of a larger earlier job are left out."""
    start = records[0][0] if records and records[0] and records[0][0].get("type") == "start" else {}
    world = int(start.get("world_size", len(records)))
    require(len(records) >= world, "out_dir", f"{len(records)} rank files",
            f"rank 0's last run had {world} ranks")
    return records[:world]


def merge_rank_files(out_dir: Path, site: Site | None, pue: float | None = None) -> Measurement:
    """The job's Measurement from the per-rank records a Tracker left in ``out_dir`` (after a crash, a
    SIGKILL or a rank's error, when rank 0 could not gather them)."""
    records = [last_run(read_jsonl(p)) for p in rank_files(out_dir)]
    records = _same_run(records)
    per_rank = [summarize(r, None, pue=pue) for r in records]
    starts = [r for r in records[0] if r.get("type") == "start"]
    mp = int(starts[-1].get("model_parallel_size", 1)) if starts else 1
    job = aggregate(per_rank, mp) if len(per_rank) > 1 else per_rank[0]
    return with_footprint(job, site)
