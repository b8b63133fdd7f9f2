"""The names derived from a strategy's fields, written once over ``float | ndarray``: Strategy (numbers) and
StrategyTable (a column per strategy) both answer them through these functions, so the estimator reads the same
name of either (estimate/compose.StepStrategy)."""

from __future__ import annotations

from typing import Any, Protocol

from greentrain.num import Num, where


class Fields(Protocol):
    """The fields the derived names read (a Strategy's numbers or a StrategyTable's columns)."""

    @property
    def dp(self) -> Any: ...
    @property
    def tp(self) -> Any: ...
    @property
    def pp(self) -> Any: ...
    @property
    def cp(self) -> Any: ...
    @property
    def etp(self) -> Any: ...
    @property
    def sp(self) -> Any: ...


def num_chips(s: Fields) -> Num:
    """Chips of the run: every stage's dp x cp x tp ranks, pp stages."""
    return s.dp * s.tp * s.pp * s.cp


def stage_ranks(s: Fields) -> Num:
    """Ranks of one pipeline stage (dp x cp x tp, laid out inside the stage; experts are carved out of them)."""
    return s.dp * s.cp * s.tp


def grad_group(s: Fields) -> Num:
    """Ranks that hold the same weights and reduce their gradients together: data and context parallel
    (context-parallel ranks see different tokens of the same sequences; Megatron-LM reduces over dp x cp)."""
    return s.dp * s.cp


def expert_tp(s: Fields) -> Num:
    """Tensor-parallel degree of the experts: etp, or tp where etp is 0."""
    return where(s.etp > 0, s.etp, s.tp)


def sequence_parallel(s: Fields) -> Num:
    """Sequence parallelism in effect: asked for, and tp > 1 (Korthikanti et al. 2022 §4.2.2)."""
    return s.sp & (s.tp > 1)
