"""The analytical step estimate of estimate/step.py over a whole StrategyTable at once (numpy).

One source of truth: the per-layer costs (compute roofline, TP/CP/EP communication, parameters,
activations) come from stage.layer_group_costs / sum_layer_totals and stage.end_parts themselves, evaluated
over the columns of the distinct (tp, cp, ep, etp, sp) keys of each micro-batch size and summed under each
recomputation choice;
model and hardware FLOPs from step.step_flops; what depends on pp, vpp, dp, ZeRO and offloading (pipeline
split, bubble, PP sends, DP gradient reduction, optimizer step, memory) calls the functions estimate_step
calls (stage.split_stages, estimate/step_terms.py, estimate/memory.py) with columns instead of floats.
Each term is evaluated once per distinct value of what it depends on (the split per key, recomputation, pp
and vpp; the micro-batch time, bubble and DP communication per split, dp and ZeRO stage) and gathered.
tests/unit/search/test_vector.py checks this path against estimate_step on random strategies,
tests/unit/estimate/test_column_costs.py the stage functions over columns against one strategy at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from greentrain.estimate.compute import Sharding
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.memory import (
    grad_bytes_per_param,
    loss_bytes_per_logit,
    stage_memory_args,
    state_bytes_per_param,
    transient_bytes,
    weight_bytes_per_param,
    workload_master_bytes,
    workload_optimizer_bytes,
)
from greentrain.estimate.parallel_costs import ranks_per_node
from greentrain.estimate.stage import (
    EndCosts,
    LayerTotals,
    StageSplit,
    balance_units,
    end_parts,
    layer_group_costs,
    split_stages,
    sum_layer_totals,
)
from greentrain.estimate.step import step_flops
from greentrain.estimate.step_terms import dp_sync_s, grad_accum_s, micro_batch_s, optimizer_s, pp_send_s
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import RECOMPUTE
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import Scenario

FloatArray = npt.NDArray[np.float64]
KEY_FIELDS = ("tp", "cp", "ep", "etp", "micro_batch_size")
_REC_COLUMNS = ("fwd", "bwd", "rec", "tp", "cp", "ep", "params", "act", "trainable", "extra_flop")
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
    rank = np.cumsum(seen) - 1
    return rank[a], int(rank[-1]) + 1


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
    return _groups([getattr(t, f) for f in KEY_FIELDS] + [t.sequence_parallel.astype(np.int64)])


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

    def at(self, name: str, rows: npt.NDArray[np.int64] | None = None) -> Any:
        """Field ``name`` (a column, or a tuple of them) at table rows ``rows`` (None: every row)."""
        x, where = getattr(self.one, name), self.row if rows is None else self.row[rows]
        return tuple(np.asarray(v)[where] for v in x) if isinstance(x, tuple) else np.asarray(x)[where]


def _per_key(sc: Scenario, t: StrategyTable, eff: Efficiency) -> KeyCosts:
    """stage.layer_group_costs over the keys of each micro-batch size at once, summed under each
    recomputation, and stage.end_parts."""
    first, inverse = _key_codes(t)
    w, n_rec = sc.workload, len(RECOMPUTE)
    key = {f: getattr(t, f)[first] for f in KEY_FIELDS}
    sp = t.sequence_parallel[first]
    out = np.empty((len(_REC_COLUMNS) + len(_END_COLUMNS), len(first), n_rec))
    flash = bool(t.flash_attention) and eff.attention_fused
    for mbs in np.unique(key["micro_batch_size"]):
        j = np.flatnonzero(key["micro_batch_size"] == mbs)
        sh = Sharding(tp=key["tp"][j], cp=key["cp"][j], ep=key["ep"][j], etp=key["etp"][j], sp=sp[j])
        ops = model_ops(sc.model, int(mbs), w.seq_len, w.activation_bytes, w.target_seq_len, flash, w.finetune)
        groups = layer_group_costs(sc, sh, ops, eff, flash)
        model_flop, extras = step_flops(sc, ops, flash, eff.selective_recompute)
        for r, rec in enumerate(RECOMPUTE):
            lt = sum_layer_totals(groups, recompute=rec, flash=flash, tp=sh.tp, sp=sh.sp, mode=eff.selective_recompute)
            for c, v in enumerate((lt.fwd_s, lt.bwd_s, lt.recompute_s, lt.tp_s, lt.cp_s, lt.ep_s, lt.params,
                                   lt.activation_bytes, lt.trainable, extras[rec])):
                out[c, j, r] = v
        emb, h1, hn = end_parts(sc, sh, ops, eff)
        for c, v in enumerate((emb.fwd_s, emb.bwd_s, emb.params, emb.trainable, h1.fwd_s, h1.bwd_s, h1.params,
                               hn.params, h1.trainable, hn.trainable, model_flop), len(_REC_COLUMNS)):
            out[c, j, :] = np.asarray(v)[..., None]
    names = _REC_COLUMNS + _END_COLUMNS
    return KeyCosts(table={c: out[k].reshape(-1) for k, c in enumerate(names)}, code=inverse * n_rec + t.recompute)


def _memory(sc: Scenario, t: StrategyTable, rows: npt.NDArray[np.int64], f: dict[str, FloatArray], split: Splits,
            eff: Efficiency) -> FloatArray:
    """step._memory over columns (memory.state_bytes_per_param once, memory.transient_bytes per stage: the
    same terms device_memory adds): the largest total bytes per device of the first, a middle, the last
    stage, for the table's ``rows`` (``f`` holds their columns). The stages' parameters, micro-batches in
    flight and transient bytes are evaluated once per distinct (pipeline split, dp): what they depend on."""
    w = sc.workload
    pp = f["pp"]
    c = state_bytes_per_param(
        shard=f["dp"] * f["cp"], zero=t.zero[rows], offload=t.offload_optimizer[rows],
        wb=weight_bytes_per_param(w.precision),
        gb=grad_bytes_per_param(w.grad_dtype, w.precision), ob=workload_optimizer_bytes(w),
        unsharded_master_bytes=0.0 if eff.zero_shards_master else workload_master_bytes(w))
    first, inverse = _groups([split.row[rows], t.dp[rows]])
    g, at = {n: f[n][first] for n in ("pp", "vpp", "num_micro", "mbs", "cp", "tp")}, rows[first]
    tokens = g["mbs"] * w.seq_len / g["cp"]
    total = np.zeros(len(pp))
    params, trainable = split.at("stage_params", at), split.at("stage_trainable", at)
    activations = split.at("stage_activation_bytes", at)
    for stage, present in ((0, pp >= 1), (1, pp > 2), (2, pp > 1)):  # GPipe is not in the vectorised space
        a = stage_memory_args(stage, pp=g["pp"], vpp=g["vpp"], num_micro=g["num_micro"], gpipe=False,
                              params=params, trainable=trainable, activations=activations)
        acts, temp = transient_bytes(spec=sc.model, held=a["held"], stage_activation_bytes=a["stage_activation_bytes"],
                                     tokens=tokens, tp=g["tp"], sp=t.sequence_parallel[at], e=w.activation_bytes,
                                     embedding=a["embedding"], head=a["head"],
                                     loss_bytes=loss_bytes_per_logit(eff.loss_kernel, w.activation_bytes))
        state = a["params"][inverse] * c.weights + a["trainable"][inverse] * (c.gradients + c.optimizer)
        stage_total = (state + acts[inverse] + temp[inverse]) * (1.0 + eff.fragmentation) + eff.reserved_bytes
        total = np.where(present, np.maximum(total, stage_total), total)
    return total


def _split(sc: Scenario, t: StrategyTable, k: KeyCosts, eff: Efficiency) -> Splits:
    """stage.split_stages over columns, once per distinct (key, recompute, pp, vpp)."""
    first, inverse = _groups([k.code, t.pp, t.vpp])
    f = {"pp": t.pp[first].astype(np.float64), "vpp": t.vpp[first].astype(np.float64)}
    return Splits(one=_split_rows(sc, k.at(first), f, eff), row=inverse)


def _split_rows(sc: Scenario, k: dict[str, FloatArray], f: dict[str, FloatArray], eff: Efficiency) -> StageSplit:
    """stage.split_stages over columns: the pipeline placement of every row."""
    lt = LayerTotals(fwd_s=k["fwd"], bwd_s=k["bwd"], recompute_s=k["rec"], tp_s=k["tp"], cp_s=k["cp"],
                     ep_s=k["ep"], params=k["params"], activation_bytes=k["act"], trainable=k["trainable"])
    emb = EndCosts(fwd_s=k["emb_fwd"], bwd_s=k["emb_bwd"], params=k["emb_params"], trainable=k["emb_trainable"])
    many = f["pp"] > 1
    head = EndCosts(fwd_s=k["head_fwd"], bwd_s=k["head_bwd"],
                    params=np.where(many, k["head_params_n"], k["head_params_1"]),
                    trainable=np.where(many, k["head_trainable_n"], k["head_trainable_1"]))
    return split_stages(lt, emb, head, layers=float(sc.model.total_layers), pp=f["pp"], vpp=f["vpp"],
                        balance=eff.pipeline_balance, balance_units=balance_units(sc))


def _dp_exposed(sc: Scenario, zero: FloatArray, f: dict[str, FloatArray], eff: Efficiency) -> FloatArray:
    """step.dp_exposed_s (step_terms.dp_sync_s over columns)."""
    w, cl = sc.workload, sc.cluster
    params, wb = f["params"], weight_bytes_per_param(w.precision)
    out: FloatArray = dp_sync_s(
        zero=zero, dp_group=f["dp"] * f["cp"],
        dp_per_node=ranks_per_node(f["tp"] * f["cp"], f["dp"], cl.node_size),
        grad_bytes=f["trainable"] * grad_bytes_per_param(w.grad_dtype, w.precision),
        weight_bytes=params * wb, updated_weight_bytes=f["trainable"] * wb, layers=f["layers"],
        backward_s=f["bwd"] + f["rec"], micro_batch_s=f["fwd"] + f["bwd"] + f["rec"], num_micro=f["num_micro"],
        cl=cl, eff=eff)
    return out


def _optimizer(sc: Scenario, zero: FloatArray, offload: npt.NDArray[np.bool_], f: dict[str, FloatArray],
               eff: Efficiency) -> FloatArray:
    """step._optimizer_s (step_terms.optimizer_s over columns)."""
    w = sc.workload
    out: FloatArray = optimizer_s(
        params=f["trainable"], zero=zero, shard=f["dp"] * f["cp"], offload=offload,
        wb=weight_bytes_per_param(w.precision), gb=grad_bytes_per_param(w.grad_dtype, w.precision),
        ob=workload_optimizer_bytes(w), cl=sc.cluster, eff=eff)
    return out


def _pp_mb(sc: Scenario, f: dict[str, FloatArray], eff: Efficiency) -> FloatArray:
    """2 x vpp x step_terms.pp_send_s of one micro-batch's activation."""
    w, m = sc.workload, sc.model
    payload = f["mbs"] * w.seq_len / f["cp"] * m.hidden_size * w.activation_bytes
    out: FloatArray = 2 * f["vpp"] * pp_send_s(pp=f["pp"], tp=f["tp"], inner=f["tp"] * f["cp"] * f["dp"],
                                               payload_bytes=payload, cl=sc.cluster, eff=eff)
    return out


def _pipeline_times(sc: Scenario, t: StrategyTable, split: Splits, f: dict[str, FloatArray],
                    rows: npt.NDArray[np.int64], eff: Efficiency) -> tuple[FloatArray, FloatArray, FloatArray]:
    """step's micro-batch time (step_terms.micro_batch_s: compute and exposed TP/CP/EP/PP communication), bubble
    and exposed DP communication of the table's ``rows`` (``f``: their columns), once per distinct (pipeline
    split, dp, ZeRO stage): what they depend on."""
    cl = sc.cluster
    first, inverse = _groups([split.row[rows], t.dp[rows], t.zero[rows]])
    g = {n: a[first] for n, a in f.items()}
    at = rows[first]
    g.update({n: split.at(field, at) for n, field in (("fwd", "fwd_s"), ("bwd", "bwd_s"), ("rec", "recompute_s"),
                                                       ("params", "params"), ("layers", "layers"),
                                                       ("trainable", "trainable"))})
    comm_mb = split.at("tp_s", at) + split.at("cp_s", at) + split.at("ep_s", at) + _pp_mb(sc, g, eff)
    accum = grad_accum_s(g["trainable"], cl.chip.memory_bytes_per_s, eff)
    t_mb = micro_batch_s(g["fwd"] + g["bwd"] + g["rec"] + accum + comm_mb, g["layers"], eff,
                         tp=g["tp"], pp=g["pp"], cl=cl)
    bubble = (g["pp"] - 1) / g["vpp"] * t_mb
    dp_s = _dp_exposed(sc, t.zero[at].astype(np.float64), g, eff)
    return t_mb[inverse], bubble[inverse], dp_s[inverse]


def estimate_steps(sc: Scenario, table: StrategyTable, *, check_fit: bool = True, capacity_bytes: float | None = None,
                   eff: Efficiency | None = None) -> StepArrays:
    """estimate_step for every row of ``table`` (which must divide the model: search/space.py builds such
    tables). Rows that break the interleaved schedule's micro-batch rule, or (``check_fit``) need more than
    ``capacity_bytes`` (default: the chip's memory) per device, are left out of the result."""
    w, cl = sc.workload, sc.cluster
    eff = eff or efficiency_for(cl.chip.name)
    if len(table) == 0:
        return _empty()
    k = _per_key(sc, table, eff)
    split = _split(sc, table, k, eff)
    num_micro = w.global_batch_size // (table.dp * table.micro_batch_size)
    rows = np.flatnonzero((table.vpp == 1) | (num_micro % table.pp == 0))  # the interleaving rule
    f: dict[str, FloatArray] = {n: getattr(table, n)[rows].astype(np.float64) for n in ("dp", "tp", "pp", "vpp", "cp")}
    f["mbs"] = table.micro_batch_size[rows].astype(np.float64)
    f["num_micro"] = num_micro[rows].astype(np.float64)
    mem = _memory(sc, table, rows, f, split, eff)
    if check_fit:
        fits = mem <= (cl.chip.memory_bytes if capacity_bytes is None else capacity_bytes)
        rows, mem, f = rows[fits], mem[fits], {n: a[fits] for n, a in f.items()}
    index = rows
    zero, offload = table.zero[index].astype(np.float64), table.offload_optimizer[index]
    t_mb, bubble, dp_s = _pipeline_times(sc, table, split, f, index, eff)
    opt = _optimizer(sc, zero, offload, {"trainable": split.at("trainable", index), "dp": f["dp"], "cp": f["cp"]},
                     eff)
    step = f["num_micro"] * t_mb + bubble + dp_s + opt + eff.step_overhead_s
    peak_total = step * cl.num_chips * cl.chip.peak_flop_per_s(w.precision)
    model_flop = k.col("model_flop", index)
    hw_flop = model_flop + k.col("extra_flop", index) * w.global_batch_size
    return StepArrays(index=index, step_time_s=step, memory_bytes=mem, utilization=1.0 - bubble / step,
                      mfu=model_flop / peak_total, hfu=hw_flop / peak_total,
                      tokens_per_s=w.tokens_per_step / step, bubble_time_s=bubble, dp_comm_time_s=dp_s)


def _empty() -> StepArrays:
    z = np.zeros(0)
    return StepArrays(index=np.zeros(0, dtype=np.int64), step_time_s=z, memory_bytes=z, utilization=z, mfu=z, hfu=z,
                      tokens_per_s=z, bubble_time_s=z, dp_comm_time_s=z)

