"""StrategyTable: many strategies in columns (numpy arrays), the form the vectorised estimator works on.

It is the same description as parallel/strategy.Strategy, one row per strategy: ``row(i)`` gives the
Strategy back and ``from_strategies`` builds a table from Strategy objects; both answer the same derived names
(parallel/derived.py). Every row uses the searched schedule its vpp implies (parallel/schedules.py: 1F1B, or
interleaved when vpp > 1) and the template strategy's flash_attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from greentrain.parallel import derived
from greentrain.parallel.fields import TABLE_BOOL_FIELDS, TABLE_INT_FIELDS
from greentrain.parallel.schedules import implied_codes
from greentrain.parallel.strategy import RECOMPUTE, Strategy

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
INT_FIELDS = TABLE_INT_FIELDS  # parallel/fields.py: Strategy's fields that are table columns
BOOL_FIELDS = TABLE_BOOL_FIELDS


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyTable:
    dp: IntArray
    tp: IntArray
    pp: IntArray
    vpp: IntArray
    cp: IntArray
    ep: IntArray
    etp: IntArray  # 0: as tp
    sp: BoolArray  # as given; sequence parallelism takes effect only where tp > 1
    zero: IntArray
    recompute: IntArray  # index into parallel.strategy.RECOMPUTE (none, selective, full)
    micro_batch_size: IntArray
    offload_optimizer: BoolArray
    offload_activations: IntArray  # layers whose saved activations wait in host memory (0: none)
    flash_attention: bool = True

    def __post_init__(self) -> None:
        n = len(self.dp)
        for f in INT_FIELDS + BOOL_FIELDS:
            a = getattr(self, f)
            if a.shape != (n,):
                raise ValueError(f"StrategyTable.{f} has shape {a.shape}, expected ({n},)")

    def __len__(self) -> int:
        return len(self.dp)

    # Strategy's derived names per row, each written once (parallel/derived.py)
    num_chips = property(derived.num_chips)
    stage_ranks = property(derived.stage_ranks)
    expert_tp = property(derived.expert_tp)
    grad_group = property(derived.grad_group)
    sequence_parallel = property(derived.sequence_parallel)

    @property
    def schedule_code(self) -> IntArray:
        """Each row's pipeline schedule (parallel/schedules.schedule_code): the searched one its vpp implies."""
        return np.asarray(implied_codes(self.vpp), dtype=np.int64)

    def take(self, index: npt.ArrayLike) -> StrategyTable:
        """The rows at ``index`` (integer positions or a boolean mask)."""
        idx = np.asarray(index)
        cols = {f: getattr(self, f)[idx] for f in INT_FIELDS + BOOL_FIELDS}
        return StrategyTable(flash_attention=self.flash_attention, **cols)

    def row(self, i: int) -> Strategy:
        return Strategy(dp=int(self.dp[i]), tp=int(self.tp[i]), pp=int(self.pp[i]), vpp=int(self.vpp[i]),
                        cp=int(self.cp[i]), ep=int(self.ep[i]), etp=int(self.etp[i]), sp=bool(self.sp[i]),
                        zero=int(self.zero[i]),
                        recompute=RECOMPUTE[int(self.recompute[i])],
                        micro_batch_size=int(self.micro_batch_size[i]),
                        offload_optimizer=bool(self.offload_optimizer[i]),
                        offload_activations=int(self.offload_activations[i]), flash_attention=self.flash_attention)

    @classmethod
    def from_strategies(cls, strategies: Sequence[Strategy]) -> StrategyTable:
        """Columns of ``strategies``; they must share flash_attention and use 1F1B or interleaving."""
        flash = {s.flash_attention for s in strategies}
        if len(flash) > 1:
            raise ValueError("StrategyTable: strategies mix flash_attention on and off")
        for s in strategies:
            if not s.pipeline_schedule.searched:
                raise ValueError(f"StrategyTable: the {s.schedule} schedule is not part of the vectorised space")
        if any(s.stage_layers for s in strategies):
            raise ValueError("StrategyTable: pinned stage layouts are not part of the vectorised space")
        cols: dict[str, np.ndarray] = {}
        for f in INT_FIELDS:
            vals = [RECOMPUTE.index(s.recompute) if f == "recompute" else getattr(s, f) for s in strategies]
            cols[f] = np.asarray(vals, dtype=np.int64)
        for f in BOOL_FIELDS:
            cols[f] = np.asarray([getattr(s, f) for s in strategies], dtype=bool)
        return cls(flash_attention=flash.pop() if flash else True, **cols)

    @classmethod
    def empty(cls, flash_attention: bool = True) -> StrategyTable:
        cols = {f: np.zeros(0, dtype=bool if f in BOOL_FIELDS else np.int64) for f in INT_FIELDS + BOOL_FIELDS}
        return cls(flash_attention=flash_attention, **cols)
