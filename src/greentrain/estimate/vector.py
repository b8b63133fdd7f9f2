"""The analytical step estimate of estimate/step.py over a whole StrategyTable at once (numpy).

One source of truth: nothing here composes a term. The per-layer costs (compute roofline, TP/CP/EP
communication, parameters, activations) come from stage.layer_group_costs / sum_layer_totals and
stage.end_parts, evaluated over the columns of the distinct (tp, cp, ep, etp, sp) keys of each micro-batch
size and summed under each recomputation choice; the pipeline split from stage.split_stages; model and
hardware FLOPs from compose.step_flops; the step's time, rates and memory from estimate/compose.py, the functions
estimate_step calls, with a StrategyTable's columns instead of a Strategy's numbers. What this module adds is
where each is evaluated: once per distinct value of what it depends on (the split per key, recomputation, pp
and vpp; the micro-batch time, bubble and DP communication per split, dp and ZeRO stage; the stages'
transient memory per split and dp; the optimizer and the model state per row) and gathered.
tests/unit/search/test_vector.py checks this path against estimate_step on random strategies,
tests/unit/estimate/test_column_costs.py the stage functions over columns against one strategy at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from greentrain.estimate.compose import (
    MEMORY_STAGES,
    StepTiming,
    expert_share,
    memory_stage_present,
    model_efficiency,
    num_micro_batches,
    pipeline_timing,
    stage_memory,
    stage_transients,
    state_bytes,
    step_flops,
    step_optimizer_s,
    step_rates,
    step_timing,
)
from greentrain.estimate.compute import Sharding
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.stage import (
    EndCosts,
    LayerTotals,
    StageSplit,
    balance_units,
    end_parts,
    layer_group_costs,
    offload_activations,
    pipeline_head,
    split_stages,
    sum_layer_totals,
)
from greentrain.estimate.state_dtypes import workload_finetune
from greentrain.model.ops import model_ops
from greentrain.num import FloatArray, take
from greentrain.parallel.fields import LAYER_KEY_FIELDS
from greentrain.parallel.schedules import by_schedule
from greentrain.parallel.strategy import RECOMPUTE
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import Scenario

_REC_COLUMNS = ("fwd", "bwd", "rec", "tp", "cp", "ep", "params", "act", "trainable", "extra_flop", "experts",
                "expert_trainable", "remat")
_END_COLUMNS = ("emb_fwd", "emb_bwd", "emb_params", "emb_trainable", "head_fwd", "head_bwd", "head_params_1",
                "head_params_n", "head_trainable_1", "head_trainable_n", "model_flop")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepArrays:
    """estimate_step's figures for the rows ``index`` of a table (the feasible ones, when fit is checked)."""

    index: npt.NDArray[np.int64]  # rows of the evaluated table
    step_time_s: FloatArray
    memory_bytes: FloatArray  # per device, total
    utilization: FloatArray
    mfu: FloatArray
    hfu: FloatArray
    tokens_per_s: FloatArray
    bubble_time_s: FloatArray
    dp_comm_time_s: FloatArray


def _dense_codes(a: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], int]:
    """Codes 0 .. n-1 of the n distinct values of an integer column, in increasing order of value (np.unique's
    inverse, without sorting when the values span a small range)."""
    if not len(a):
        return np.zeros(0, dtype=np.int64), 0
    lo, hi = int(a.min()), int(a.max())
    if lo == hi:
        return np.zeros(len(a), dtype=np.int64), 1
    if lo < 0 or hi > 1 << 22:
        values, inverse = np.unique(a, return_inverse=True)
        return inverse.reshape(-1), len(values)
    seen = np.zeros(hi + 1, dtype=bool)
    seen[a] = True
    values = np.flatnonzero(seen)  # the distinct values, increasing: a value's code is its place among them
    rank = np.empty(hi + 1, dtype=np.int64)  # read only at the values (a cumsum over the range costs 5x more)
    rank[values] = np.arange(len(values))
    return rank[a], len(values)


def _groups(columns: list[npt.NDArray[np.int64]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct rows of integer columns: a row of each (any will do), and every row's group."""
    code, n = np.zeros(len(columns[0]), dtype=np.int64), 1
    for a in columns:
        inv, distinct = _dense_codes(a)
        if distinct > 1:
            if n * distinct >= 1 << 62:  # renumber the groups so far before the code overflows
                code, n = _dense_codes(code)
            code *= distinct
            code += inv
            n *= distinct
    inverse, distinct = _dense_codes(code)
    first = np.zeros(distinct, dtype=np.int64)
    first[inverse] = np.arange(len(code))
    return first, inverse


def _key_codes(t: StrategyTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Distinct (tp, cp, ep, etp, micro-batch, sp) keys: a row of each, and every row's key."""
    return _groups([getattr(t, f) for f in LAYER_KEY_FIELDS] + [t.sequence_parallel.astype(np.int64)])


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyCosts:
    """The per-key costs: column c of ``table`` holds, at key x len(RECOMPUTE) + recompute, the _REC_COLUMNS
    and _END_COLUMNS of that key and recomputation; ``code`` is every row's index into it."""

    table: dict[str, FloatArray]
    code: npt.NDArray[np.int64]

    def at(self, rows: npt.NDArray[np.int64]) -> dict[str, FloatArray]:
        """The columns at table rows ``rows``."""
        where = self.code[rows]
        return {c: a[where] for c, a in self.table.items()}

    def col(self, name: str, rows: npt.NDArray[np.int64]) -> FloatArray:
        return self.table[name][self.code[rows]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Splits:
    """stage.split_stages once per distinct (key, recompute, pp, vpp), and each table row's index into it."""

    one: StageSplit
    row: npt.NDArray[np.int64]

    def at(self, rows: npt.NDArray[np.int64]) -> StageSplit:
        """The split of the table's rows ``rows``: num.take of the fields the composition reads, each gathered
        when first read (pipeline_timing reads a third of them)."""
        return cast(StageSplit, _Gathered(self.one, self.row[rows]))


class _Gathered:
    """A record of columns read at the rows ``index``: a field (a tuple of columns element by element) is gathered
    when first read, as num.take gathers every field."""

    def __init__(self, record: Any, index: npt.NDArray[np.int64]) -> None:
        self._record, self._index = record, index

    def __getattr__(self, name: str) -> Any:  # only for names not yet read: every field once
        if name.startswith("_"):
            raise AttributeError(name)
        v = getattr(self._record, name)
        col = tuple(x[self._index] for x in v) if isinstance(v, tuple) else v[self._index]
        self.__dict__[name] = col
        return col


@dataclass(frozen=True, slots=True)
class _Pairs:
    """Distinct (ZeRO stage, offload) pairs, a column each."""

    zero: npt.NDArray[np.int64]
    offload_optimizer: npt.NDArray[np.bool_]


class _Rows:
    """The rows ``rows`` of a StrategyTable, read as a compose.StepStrategy: a column (the table's derived names,
    grad_group and sequence_parallel, included) is gathered when the composition first reads it, in ``shape``;
    with ``pairs``, the ZeRO stage and offloading are read from those instead (a grid: groups down, (ZeRO,
    offload) pairs across)."""

    def __init__(self, table: StrategyTable, rows: npt.NDArray[np.int64], shape: tuple[int, ...] = (-1,),
                 pairs: _Pairs | None = None) -> None:
        self._table, self._rows, self._shape, self._pairs = table, rows, shape, pairs

    def __getattr__(self, name: str) -> Any:  # only for names not yet read: every column once
        if name.startswith("_"):
            raise AttributeError(name)
        derived = getattr(type(self._table), name, None)
        if self._pairs is not None and name in ("zero", "offload_optimizer"):
            col = getattr(self._pairs, name)
        elif isinstance(derived, property):  # grad_group, stage_ranks, ...: from the rows' columns, not the table's
            col = derived.fget(self)  # type: ignore[misc]
        else:
            col = getattr(self._table, name)[self._rows].reshape(self._shape)
        self.__dict__[name] = col
        return col


def _per_key(sc: Scenario, t: StrategyTable, eff: Efficiency) -> KeyCosts:
    """stage.layer_group_costs over the keys of each micro-batch size at once, summed under each
    recomputation, and stage.end_parts."""
    first, inverse = _key_codes(t)
    w, n_rec = sc.workload, len(RECOMPUTE)
    key = {f: getattr(t, f)[first] for f in LAYER_KEY_FIELDS}
    sp = t.sequence_parallel[first]
    out = np.empty((len(_REC_COLUMNS) + len(_END_COLUMNS), len(first), n_rec))
    flash = bool(t.flash_attention) and eff.attention_fused
    for mbs in np.unique(key["micro_batch_size"]):
        j = np.flatnonzero(key["micro_batch_size"] == mbs)
        sh = Sharding(tp=key["tp"][j], cp=key["cp"][j], ep=key["ep"][j], etp=key["etp"][j], sp=sp[j])
        ops = model_ops(sc.model, int(mbs), w.seq_len, w.activation_bytes, w.target_seq_len, flash,
                        workload_finetune(w, eff))
        groups = layer_group_costs(sc, sh, ops, eff, flash)
        model_flop, extras = step_flops(sc, ops, flash, eff.selective_recompute)
        for r, rec in enumerate(RECOMPUTE):
            lt = sum_layer_totals(groups, recompute=rec, flash=flash, tp=sh.tp, sp=sh.sp, mode=eff.selective_recompute)
            for c, v in enumerate((lt.fwd_s, lt.bwd_s, lt.recompute_s, lt.tp_s, lt.cp_s, lt.ep_s, lt.params,
                                   lt.activation_bytes, lt.trainable, extras[rec], lt.expert_params,
                                   lt.expert_trainable, lt.remat_bytes)):
                out[c, j, r] = v
        emb, h1, hn = end_parts(sc, sh, ops, eff)
        for c, v in enumerate((emb.fwd_s, emb.bwd_s, emb.params, emb.trainable, h1.fwd_s, h1.bwd_s, h1.params,
                               hn.params, h1.trainable, hn.trainable, model_flop), len(_REC_COLUMNS)):
            out[c, j, :] = np.asarray(v)[..., None]
    names = _REC_COLUMNS + _END_COLUMNS
    return KeyCosts(table={c: out[k].reshape(-1) for k, c in enumerate(names)}, code=inverse * n_rec + t.recompute)


def _memory(sc: Scenario, t: StrategyTable, rows: npt.NDArray[np.int64], split: Splits,
            num_micro: npt.NDArray[np.int64], eff: Efficiency) -> tuple[FloatArray, FloatArray]:
    """step._memory over columns: the largest total bytes per device of the first, a middle, the last stage, and
    the largest host bytes (offloaded state and activations), for the table's ``rows``. A row's memory depends on
    its pipeline split and dp (the stages' parameters, micro-batches in flight and transient tensors) and on its
    ZeRO stage and offloading (the state's bytes per parameter): it is evaluated over the grid of the distinct
    values of each, broadcast, and read at each row."""
    groups, group_of = _groups([split.row[rows], t.dp[rows]])
    pair = t.zero[rows] * 2 + t.offload_optimizer[rows]  # ZeRO stage 0-3 and offloading as one code 0-7
    used = np.flatnonzero(np.bincount(pair, minlength=8))
    lookup = np.zeros(8, dtype=np.int64)
    lookup[used] = np.arange(len(used))
    pair_of, pairs = lookup[pair], _Pairs(zero=(used // 2)[None, :], offload_optimizer=(used % 2 == 1)[None, :])
    at = rows[groups]
    g = _Rows(t, at, (-1, 1), pairs=pairs)  # the transients read the ZeRO stage too (fsdp_gathered_bytes)
    # the state depends on the group's grad_group, and on whether it pipelines (Efficiency.pp_gathers_state)
    shards, shard_of = _groups([g.grad_group.reshape(-1), (g.pp.reshape(-1) > 1).astype(np.int64)])
    state = take(state_bytes(sc, _Rows(t, at[shards], (-1, 1), pairs=pairs), eff), shard_of)
    # a dense model has no routed experts: its expert terms are zero with any state (memory.device_memory)
    expert_state = state_bytes(sc, _Rows(t, at, (-1, 1), pairs=pairs), eff, experts=True) if sc.model.is_moe \
        else None
    st = split.at(at[:, None])
    total, host = np.zeros((len(groups), len(used))), np.zeros((len(groups), len(used)))
    for stage in MEMORY_STAGES:  # each stage on the groups whose pipeline has it (a middle stage from pp 3)
        present = np.broadcast_to(memory_stage_present(stage, g.pp), (len(groups), 1)).reshape(-1)
        sub: slice | npt.NDArray[np.intp] = slice(None)
        gs, sts, states = g, st, (state, expert_state)
        if not present.all():
            sub = np.flatnonzero(present)
            gs, sts = _Rows(t, at[sub], (-1, 1), pairs=pairs), split.at(at[sub][:, None])
            states = (take(state, sub), None if expert_state is None else take(expert_state, sub))
        parts = stage_transients(sc, gs, sts, eff, num_micro[at[sub]][:, None], stage)
        mem = stage_memory(parts, states[0], eff, states[1])
        total[sub] = np.maximum(total[sub], mem.total_bytes)
        host[sub] = np.maximum(host[sub], mem.host_bytes)
    at_rows = group_of * len(used) + pair_of
    return total.reshape(-1)[at_rows], host.reshape(-1)[at_rows]


def _split(sc: Scenario, t: StrategyTable, k: KeyCosts, eff: Efficiency) -> Splits:
    """stage.split_stages over columns, once per distinct (key, recompute, pp, vpp, activation offload)."""
    first, inverse = _groups([k.code, t.pp, t.vpp, t.offload_activations])
    c, pp = k.at(first), t.pp[first].astype(np.float64)
    lt = LayerTotals(fwd_s=c["fwd"], bwd_s=c["bwd"], recompute_s=c["rec"], tp_s=c["tp"], cp_s=c["cp"],
                     ep_s=c["ep"], params=c["params"], activation_bytes=c["act"], trainable=c["trainable"],
                     expert_params=c["experts"], expert_trainable=c["expert_trainable"], remat_bytes=c["remat"])
    emb = EndCosts(fwd_s=c["emb_fwd"], bwd_s=c["emb_bwd"], params=c["emb_params"], trainable=c["emb_trainable"])
    head_1 = EndCosts(fwd_s=c["head_fwd"], bwd_s=c["head_bwd"], params=c["head_params_1"],
                      trainable=c["head_trainable_1"])
    head_n = EndCosts(fwd_s=c["head_fwd"], bwd_s=c["head_bwd"], params=c["head_params_n"],
                      trainable=c["head_trainable_n"])
    one = split_stages(lt, emb, pipeline_head(pp, head_1, head_n), layers=float(sc.model.total_layers), pp=pp,
                       vpp=t.vpp[first].astype(np.float64), balance=eff.pipeline_balance,
                       balance_units=balance_units(sc))
    offloaded = t.offload_activations[first]
    if offloaded.any():  # single-stage rows only (search/space.py)
        one = offload_activations(one, lt, offloaded.astype(np.float64), sc, eff)
    return Splits(one=one, row=inverse)


def _timing(sc: Scenario, t: StrategyTable, split: Splits, num_micro: npt.NDArray[np.int64],
            rows: npt.NDArray[np.int64], eff: Efficiency) -> StepTiming:
    """compose's step time of the table's ``rows``: compose.pipeline_timing once per distinct (pipeline split, dp,
    ZeRO stage), what it depends on, gathered; the optimizer per row; compose.step_timing adds them up."""
    first, inverse = _groups([split.row[rows], t.dp[rows], t.zero[rows]])
    at = rows[first]
    p = take(pipeline_timing(sc, _Rows(t, at), split.at(at), eff, num_micro[at]), inverse)
    experts = expert_share(split.one)[0]  # routed experts: their optimizer state shards over the expert dp group
    return step_timing(p, step_optimizer_s(sc, _Rows(t, rows), split.one.trainable[split.row[rows]], eff,
                                           np.broadcast_to(experts, split.one.trainable.shape)[split.row[rows]]))


def estimate_steps(sc: Scenario, table: StrategyTable, *, check_fit: bool = True, capacity_bytes: float | None = None,
                   eff: Efficiency | None = None) -> StepArrays:
    """estimate_step for every row of ``table`` (which must divide the model: search/space.py builds such
    tables). Rows that break their schedule's micro-batch rule (parallel/schedules.py), or (``check_fit``) need
    more than ``capacity_bytes`` (default: the chip's memory) per device, are left out of the result."""
    w, cl = sc.workload, sc.cluster
    eff = model_efficiency(eff or efficiency_for(cl.chip.name), sc.model)
    if len(table) == 0:
        return _empty()
    k = _per_key(sc, table, eff)
    split = _split(sc, table, k, eff)
    num_micro = num_micro_batches(w, table)
    fits = by_schedule(table.schedule_code, "micro_batches_fit", num_micro, table.pp)  # its rule
    rows = np.flatnonzero(np.broadcast_to(fits, num_micro.shape))
    mem, host = _memory(sc, table, rows, split, num_micro, eff)
    if check_fit:
        fits = mem <= (cl.chip.memory_bytes if capacity_bytes is None else capacity_bytes)
        fits &= cl.host_memory_fits(host)  # the node's offloads within its host memory, where known
        rows, mem = rows[fits], mem[fits]
    t = _timing(sc, table, split, num_micro, rows, eff)
    r = step_rates(sc, t.step_s, t.bubble_s, k.col("model_flop", rows), k.col("extra_flop", rows))
    return StepArrays(index=rows, step_time_s=t.step_s, memory_bytes=mem, utilization=r.utilization, mfu=r.mfu,
                      hfu=r.hfu, tokens_per_s=r.tokens_per_s, bubble_time_s=t.bubble_s, dp_comm_time_s=t.dp_s)


def _empty() -> StepArrays:
    z = np.zeros(0)
    return StepArrays(index=np.zeros(0, dtype=np.int64), step_time_s=z, memory_bytes=z, utilization=z, mfu=z, hfu=z,
                      tokens_per_s=z, bubble_time_s=z, dp_comm_time_s=z)
