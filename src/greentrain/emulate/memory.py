"""How much memory an emulated case needs, checked against this machine's before any rank starts (issue 24:
``emulate matmul --m 200000 --k 200000`` was an allocator error, a traceback, in the launcher)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

from greentrain import units
from greentrain.emulate.cases import Case, MatMulCase
from greentrain.errors import ConfigError

# fp32 copies of a case's global tensors one rank may hold at once: the full operands and reference result (every
# rank draws them from the seed and checks its shard against them), and its shards and gradients (at most as large)
_COPIES_PER_RANK = 2
_FP32_BYTES = 4


def case_bytes(case: Case) -> float:
    """An upper estimate of the host (or device) memory ``case`` needs over all its ranks."""
    def get(name: str) -> int:
        return int(getattr(case, name, 0) or 0)

    if isinstance(case, MatMulCase):
        elements = case.m * case.k + case.k * case.n + case.m * case.n
    else:  # FFN, MLP, mesh step: rows x widths, weights d_model x d_ff; pipeline: its layer sizes
        rows = (get("tokens") or get("batch") * max(get("seq"), 1)) * max(get("micro_batches"), 1)
        units = tuple(getattr(case, "units", ()))
        weights = 2 * get("d_model") * get("d_ff") + sum(a * b for a, b in itertools.pairwise(units))
        elements = rows * (2 * get("d_model") + get("d_ff") + sum(units)) + weights
    return float(min(elements * _FP32_BYTES * _COPIES_PER_RANK * case.world_size, 10**300))  # 9 x 400 digits


def available_bytes() -> float:
    """Memory the ranks can use on this host: MemAvailable of /proc/meminfo (Linux), else free pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_memory(cases: Sequence[Case], world: int) -> None:
    """Refuse, before any rank starts, a case whose tensors cannot fit in this machine's memory (an allocator
    error in the launcher was a traceback; 200,000 x 200,000 needs 1.3 TB)."""
    have = available_bytes()
    for case in cases:
        need = case_bytes(case)
        if need > have:
            need_gib, have_gib = units.bytes_to_gib(need), units.bytes_to_gib(have)
            raise ConfigError("case", case.label, f"needs about {need_gib:,.1f} GiB ({world} ranks, fp32 operands, "
                              f"reference and gradients); this machine has {have_gib:,.1f} GiB available: use "
                              "smaller shapes")
