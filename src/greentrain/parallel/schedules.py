"""PipelineSchedule: one record per pipeline schedule, and the registry every predictor reads.

A schedule's record says everything the rest of greentrain asks of it, each formula with its source:
- its model-chunk rule (``interleaved``: vpp > 1 model chunks per device, else exactly one; Strategy checks it)
  and its micro-batch rule (``micro_batch_multiple_of_pp``; check_divisibility, the vectorised search and the
  event order check it);
- whether the vectorised search enumerates it (``searched``: a StrategyTable row runs the searched schedule its
  vpp implies, so at most one searched schedule per chunk rule);
- ``held``: micro-batches of activations a pipeline stage holds in flight (the memory rule, estimate/compose.py;
  at most the peak of forwards minus backwards in ``order``);
- ``bubble``: the pipeline bubble in micro-batch times (estimate/compose.py's step time);
- ``order``: each device's forward and backward passes in order (sim/cluster.py runs them event by event).
Ops are ``(is_backward, micro_batch, chunk)``; virtual stage ``v = chunk * pp + device`` (Megatron-LM's
interleaved assignment: device d holds chunks d, d + pp, d + 2 pp, ...).

A new schedule is one PipelineSchedule given to ``register`` (docs/extending.md, "A pipeline schedule").
``emulate`` runs torch.distributed pipelines of its own (emulate/pipeline.py) for the schedules named in
emulate/cases.Schedule, which must be registered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.num import Num, minimum, where

Op = tuple[bool, int, int]  # (is_backward, micro_batch, chunk)
Order = list[list[Op]]  # per device, its ops in order


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineSchedule:
    name: str  # the Strategy.schedule value, YAML key and --schedule choice
    help: str
    interleaved: bool  # True: needs vpp > 1 model chunks per device; False: runs one (vpp must be 1)
    micro_batch_multiple_of_pp: bool  # needs a multiple of pp micro-batches per step
    searched: bool  # the vectorised search enumerates it (the schedule a table row's vpp implies)
    # (rank, pp, vpp, micro-batches) -> micro-batches of activations pipeline rank ``rank`` holds (float | ndarray)
    held: Callable[[Num, Num, Num, Num], Num]
    bubble: Callable[[Num, Num], Num]  # (pp, vpp) -> the pipeline bubble in micro-batch times
    order: Callable[[int, int, int], Order]  # (pp, vpp, micro-batches) -> each device's ops
    source: str

    def micro_batches_fit(self, num_micro: Num, pp: Num) -> Num:
        """Whether ``num_micro`` micro-batches per step suit this schedule on ``pp`` stages."""
        return num_micro % pp == 0 if self.micro_batch_multiple_of_pp else True


def flush_bubble(pp: Num, vpp: Num) -> Num:
    """A flushed pipeline idles (pp - 1) micro-batch times per step, (pp - 1) / vpp with vpp model chunks per
    device (Narayanan et al. 2021 §2.2: 1F1B and interleaved; GPipe the same, Huang et al. 2019 §2.3)."""
    return (pp - 1) / vpp


def one_f_one_b_held(rank: Num, pp: Num, vpp: Num, num_micro: Num) -> Num:
    """1F1B: pipeline rank r holds min(pp - r, micro-batches) (Narayanan et al. 2021 §2.2)."""
    return where(pp == 1, 1.0, minimum(pp - rank, num_micro) * 1.0)


def interleaved_held(rank: Num, pp: Num, vpp: Num, num_micro: Num) -> Num:
    """Interleaved 1F1B: pipeline rank r runs (pp - r - 1) * 2 + (vpp - 1) * pp warm-up forwards of one model
    chunk each, then one more forward before its first backward, all micro-batches' chunks at most
    (interleaved_order; NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py
    forward_backward_pipelining_with_interleaving, num_warmup_microbatches: 2024's code runs every forward
    first when micro-batches == pp, today's when the warm-up reaches them all, microbatch_group_size_per_vp_stage
    defaulting to pp): that many chunks, 1 / vpp of the stage's layers each. On the first rank that is
    Korthikanti et al. 2022 §4.2.3's pp * (1 + (pp - 1) / (pp * vpp)) micro-batches of the stage; each later
    rank holds two chunks fewer (not that count times (pp - r) / pp)."""
    chunks = minimum((pp - rank - 1) * 2 + (vpp - 1) * pp + 1, num_micro * vpp)
    return where(pp == 1, 1.0, chunks / vpp)


def gpipe_held(rank: Num, pp: Num, vpp: Num, num_micro: Num) -> Num:
    """GPipe: every forward before any backward, so every micro-batch (Huang et al. 2019 §2.2)."""
    return num_micro * 1.0


def gpipe_order(pp: int, vpp: int, m: int) -> Order:
    """GPipe (Huang et al. 2019): every forward, then every backward (last micro-batch first)."""
    return [[(False, i, 0) for i in range(m)] + [(True, i, 0) for i in reversed(range(m))] for _ in range(pp)]


def one_f_one_b_order(pp: int, vpp: int, m: int) -> Order:
    """1F1B (PipeDream-Flush; Narayanan et al. 2021 §2.2, Fig. 4 top): device d runs min(pp - d - 1, m)
    warm-up forwards, then alternates one forward and one backward, then drains the remaining backwards."""
    out = []
    for d in range(pp):
        warm = min(pp - d - 1, m)
        ops: list[Op] = [(False, i, 0) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            ops += [(False, f, 0), (True, b, 0)]
            f, b = f + 1, b + 1
        ops += [(True, i, 0) for i in range(b, m)]
        out.append(ops)
    return out


def _interleaved_op(k: int, pp: int, vpp: int, backward: bool) -> Op:
    """The k-th forward (or backward) op of a device (Megatron-LM's get_model_chunk_id)."""
    group = k // (pp * vpp)
    chunk = (k // pp) % vpp
    if backward:
        chunk = vpp - 1 - chunk
    return (backward, group * pp + k % pp, chunk)


def interleaved_order(pp: int, vpp: int, m: int) -> Order:
    """Interleaved 1F1B (Narayanan et al. 2021 §2.2, Fig. 4 bottom; Megatron-LM
    ``forward_backward_pipelining_with_interleaving``): micro-batches go through the chunks in groups of pp;
    warm-up (pp - d - 1) * 2 + (vpp - 1) * pp forwards, then 1F1B; backward chunks run in reverse order."""
    total = m * vpp
    out = []
    for d in range(pp):
        warm = min((pp - d - 1) * 2 + (vpp - 1) * pp, total)
        ops = [_interleaved_op(k, pp, vpp, False) for k in range(warm)]
        f, b = warm, 0
        while f < total:
            ops += [_interleaved_op(f, pp, vpp, False), _interleaved_op(b, pp, vpp, True)]
            f, b = f + 1, b + 1
        ops += [_interleaved_op(k, pp, vpp, True) for k in range(b, total)]
        out.append(ops)
    return out


PIPELINE_SCHEDULES: dict[str, PipelineSchedule] = {}  # by name, in the order registered (schedule_code)
_RECORDS: list[PipelineSchedule] = []  # by code: one estimate reads them a few times, kept beside the registry
_CODES: dict[str, int] = {}
_IMPLIED: dict[bool, PipelineSchedule] = {}  # interleaved? -> the searched schedule (every Strategy asks)


def register(record: PipelineSchedule) -> PipelineSchedule:
    """Add ``record`` to the registry: a new name, and at most one searched schedule per chunk rule (a table
    row's vpp names the schedule it runs)."""
    if record.name in PIPELINE_SCHEDULES:
        raise ValueError(f"pipeline schedule {record.name!r} is already registered")
    if record.searched and any(r.searched and r.interleaved == record.interleaved
                               for r in PIPELINE_SCHEDULES.values()):
        raise ValueError(f"pipeline schedule {record.name!r}: another searched schedule has the same chunk rule")
    PIPELINE_SCHEDULES[record.name] = record
    _CODES[record.name] = len(_RECORDS)
    _RECORDS.append(record)
    _IMPLIED.clear()
    return record


def unregister(name: str) -> None:
    """Remove schedule ``name`` (a test's fake one); the codes of those registered after it move down."""
    del PIPELINE_SCHEDULES[name]
    _RECORDS[:] = PIPELINE_SCHEDULES.values()
    _CODES.clear()
    _CODES.update((r.name, i) for i, r in enumerate(_RECORDS))
    _IMPLIED.clear()


ONE_F_ONE_B = register(PipelineSchedule(
    name="1f1b", help="one forward, one backward (PipeDream-Flush)", interleaved=False,
    micro_batch_multiple_of_pp=False, searched=True, held=one_f_one_b_held, bubble=flush_bubble,
    order=one_f_one_b_order, source="Narayanan et al. 2021 §2.2 (PipeDream-Flush)"))
INTERLEAVED = register(PipelineSchedule(
    name="interleaved", help="1F1B over vpp model chunks per device", interleaved=True,
    micro_batch_multiple_of_pp=True, searched=True, held=interleaved_held, bubble=flush_bubble,
    order=interleaved_order, source="Narayanan et al. 2021 §2.2.2; Megatron-LM schedules.py"))
GPIPE = register(PipelineSchedule(
    name="gpipe", help="every forward, then every backward", interleaved=False, micro_batch_multiple_of_pp=False,
    searched=False, held=gpipe_held, bubble=flush_bubble, order=gpipe_order, source="Huang et al. 2019"))


def get_schedule(name: str, field: str = "strategy.schedule") -> PipelineSchedule:
    """The record of ``name``; a ConfigError naming ``field`` when none is registered."""
    record = PIPELINE_SCHEDULES.get(name)
    if record is None:
        raise ConfigError(field, name, f"must be one of {', '.join(PIPELINE_SCHEDULES)}")
    return record


def implied_schedule(vpp: int) -> PipelineSchedule:
    """The searched schedule that ``vpp`` model chunks per device imply (1f1b, or interleaved when vpp > 1)."""
    chunked = vpp > 1
    record = _IMPLIED.get(chunked)
    if record is None:
        record = _IMPLIED[chunked] = next(r for r in PIPELINE_SCHEDULES.values()
                                          if r.searched and r.interleaved == chunked)
    return record


def schedule_code(name: str) -> int:
    """``name``'s position in the registry: a StrategyTable row's schedule as a number."""
    return _CODES[name]


def implied_codes(vpp: Num) -> Num:
    """schedule_code of the schedule each vpp implies (a table row's schedule)."""
    return where(vpp > 1, schedule_code(implied_schedule(2).name), schedule_code(implied_schedule(1).name))


def by_schedule(code: Num, rule: str, *args: Num) -> Num:
    """The schedule ``code`` names applies its ``rule`` (held, bubble, micro_batches_fit) to ``args``; for a
    column of codes, each row's schedule does (each evaluated once over every row, then picked)."""
    if not isinstance(code, np.ndarray):
        return getattr(_RECORDS[code], rule)(*args)
    present = np.flatnonzero(np.bincount(code.ravel())) if code.size else np.zeros(1, dtype=np.int64)  # in use
    out = getattr(_RECORDS[present[-1]], rule)(*args)
    for c in present[:-1]:
        out = np.where(code == c, getattr(_RECORDS[c], rule)(*args), out)
    return out


def check_schedule(schedule: str, vpp: int, schedule_field: str, vpp_field: str) -> None:
    """An explicit schedule must be registered and agree with vpp: an interleaved schedule runs vpp > 1 model
    chunks per device (Narayanan et al. 2021 §2.2.2), any other exactly one. The field names are the caller's
    (``strategy.vpp`` in YAML, ``--vpp`` on the command line, ``pins.vpp`` in a search)."""
    record = get_schedule(schedule, schedule_field)
    if vpp > 1 and not record.interleaved:
        chunked = ", ".join(r.name for r in PIPELINE_SCHEDULES.values() if r.interleaved)
        raise ConfigError(schedule_field, schedule, f"conflicts with {vpp_field}={vpp}: vpp > 1 runs an "
                          f"interleaved schedule (give schedule {chunked}, or vpp 1)")
    if vpp == 1 and record.interleaved:
        raise ConfigError(schedule_field, schedule, f"needs {vpp_field} > 1 model chunks per device")


def build_order(name: str, pp: int, vpp: int, m: int) -> Order:
    """Each device's ops under schedule ``name`` with ``m`` micro-batches (its rules checked)."""
    require(pp >= 1 and vpp >= 1 and m >= 1, "schedule", (pp, vpp, m), "pp, vpp and micro-batches must be >= 1")
    record = get_schedule(name, "schedule")
    check_schedule(name, vpp, "schedule", "vpp")
    require(bool(record.micro_batches_fit(m, pp)), "num_micro_batches", m,
            f"the {name} schedule needs a multiple of pp={pp}")
    return record.order(pp, vpp, m)
