"""The strategy space of a scenario: every (dp, tp, pp, vpp, cp, ep, sp, ZeRO, recompute, micro-batch, offload)
whose degrees multiply to the number of chips and divide what they split.

Divisibility uses parallel/strategy.check_divisibility (the estimator's own check), applied once per mesh
(dp, tp, pp, vpp, cp, ep, sp) before the memory-saving choices are multiplied in; micro-batch sizes are the
divisors of the per-replica batch, so the batch check holds by construction (a schedule's
micro-batch rule, parallel/schedules.py, is left to the estimator, which leaves those rows out).
With fused (flash) attention there are no attention scores to drop, so selective recomputation is the same
strategy as none (estimate/memory.py, estimate/stage.py) and is not enumerated twice.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from greentrain.config import MAX_BATCH_SEQUENCES, require
from greentrain.errors import InfeasibleError
from greentrain.hardware.cluster import MAX_CHIPS
from greentrain.model.spec import TransformerSpec
from greentrain.parallel.strategy import RECOMPUTE, Strategy, check_divisibility
from greentrain.parallel.table import StrategyTable
from greentrain.scenario import Scenario
from greentrain.workload import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Which choices to enumerate. Defaults: the full space (tp up to the node size)."""

    zero: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE
    offload: tuple[bool, ...] = (False, True)
    # layers whose saved activations wait in host memory, enumerated on single-stage meshes without
    # recomputation (offloading replaces it: Megatron Core refuses both at once); (): none, a quarter, a half and
    # three quarters of the model's layers (NeMo's GB200 / GB300 Llama 3 70B recipes offload 40 and 20 of 80)
    offload_activations: tuple[int, ...] = ()
    max_tp: int = 0  # 0: the node size (tensor parallelism inside a node, Narayanan et al. 2021 §3.3)
    max_micro_batch: int = 0  # 0: every divisor of the per-replica batch
    interleave: bool = True  # enumerate vpp > 1
    flash_attention: bool = True  # fused attention (False: Megatron-2022 naive attention, as Korthikanti et al.)
    # Degrees the user fixed (0 / None: searched): `plan --tp 8` searches everything else with tp = 8.
    dp: int = 0
    tp: int = 0
    pp: int = 0
    vpp: int = 0
    cp: int = 0
    ep: int = 0
    sp: bool | None = None
    micro_batch: int = 0
    etp: int | None = None  # expert tensor parallelism pinned (0: as tp); None: etp = tp and 1 searched (MoE)

    def __post_init__(self) -> None:
        require(bool(self.zero) and all(z in (0, 1, 2, 3) for z in self.zero), "search.zero", self.zero,
                "must be a non-empty subset of 0, 1, 2, 3")
        require(bool(self.recompute) and all(r in RECOMPUTE for r in self.recompute), "search.recompute",
                self.recompute, f"must be a non-empty subset of {', '.join(RECOMPUTE)}")
        require(bool(self.offload), "search.offload", self.offload, "must not be empty")
        require(all(isinstance(n, int) and n >= 0 for n in self.offload_activations), "search.offload_activations",
                self.offload_activations, "must be whole numbers of layers >= 0")
        # a cap or a pinned degree (0: none) past any cluster, a micro-batch past any global batch
        for name in ("max_tp", "dp", "tp", "pp", "vpp", "cp", "ep", "etp", "max_micro_batch", "micro_batch"):
            v, top = getattr(self, name), MAX_BATCH_SEQUENCES if "micro_batch" in name else MAX_CHIPS
            zero = {"max_tp": "the node size", "max_micro_batch": "no limit", "etp": "as tp"}.get(name, "searched")
            require(v is None or (isinstance(v, int) and 0 <= v <= top), f"search.{name}", v,
                    f"must be an integer in [0, {top:,}] (0: {zero})")


# The memory-lightest corner of the space: the question "does anything fit?" only needs these choices
# (ZeRO-3 shards weights, gradients and states; full recomputation keeps one input per layer; the smallest
# micro-batch; optimizer states in host memory).
LIGHTEST = SearchSpace(zero=(3,), recompute=("full",), offload=(True,), offload_activations=(0,), max_micro_batch=1,
                       interleave=False)


def activation_offloads(space: SearchSpace, layers: int) -> tuple[int, ...]:
    """The layer counts to offload on a single-stage mesh: the space's, or 0 and a quarter, a half and three
    quarters of ``layers`` (whole layers, at most layers - 1: Transformer Engine keeps one on the device)."""
    if space.offload_activations:
        return tuple(sorted({n for n in space.offload_activations if n < layers}))
    return tuple(sorted({0, *(min(layers - 1, max(1, layers * q // 4)) for q in (1, 2, 3) if layers > 1)}))


def divisors(n: int) -> list[int]:
    """The divisors of n in increasing order (trial division up to sqrt(n))."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _chunks_per_stage(layers: int, pp: int) -> int:
    """Layer slots per stage that the interleaved schedule may cut into vpp chunks (the search's vpp are their
    divisors): layers / pp when pp divides them, else (layers + 2) / pp with the embedding and the loss each
    counted as a layer (Megatron Core account_for_embedding/loss_in_pipeline_split: Llama 3 405B's 126
    layers on pp 16), else 1 (no interleaving)."""
    for n in (layers, layers + 2):
        if n % pp == 0:
            return n // pp
    return 1


def _etps(space: SearchSpace, tp: int, moe: bool) -> tuple[int, ...]:
    """Expert tensor-parallel degrees to enumerate: 0 (as tp) and 1 for MoE models with tp > 1; a pinned
    etp keeps only itself (etp = tp is the same layout as 0); a dense model has no experts to split."""
    options = (0, 1) if moe and tp > 1 else (0,)
    if space.etp is None or not moe:
        return options
    return tuple(e for e in options if e == space.etp or (e == 0 and space.etp == tp))


def meshes(sc: Scenario, space: SearchSpace, num_chips: int | None = None) -> Iterator[Strategy]:
    """Every (dp, tp, pp, vpp, cp, ep, sp) with micro-batch 1 that passes check_divisibility, lazily (the
    smallest-count search stops at the first)."""
    return _meshes(sc.model, sc.workload, num_chips or sc.cluster.num_chips, space.max_tp or sc.cluster.node_size,
                   space)


def _meshes(m: TransformerSpec, w: Workload, n: int, max_tp: int, space: SearchSpace) -> Iterator[Strategy]:
    def pick(pinned: int, options: list[int]) -> list[int]:
        return options if not pinned else [pinned] if pinned in options else []

    for tp in pick(space.tp, [t for t in divisors(n) if t <= max_tp or t == space.tp]):
        for pp in pick(space.pp, divisors(n // tp)):  # any pp up to the layer count (uneven stages)
            if pp > m.total_layers:
                continue
            for cp in pick(space.cp, divisors(n // (tp * pp))):
                dp = n // (tp * pp * cp)
                if w.global_batch_size % dp or (space.dp and dp != space.dp):
                    continue
                # experts over the stage's dp*cp*tp ranks: ep x etp of them per expert group; etp = tp
                # (Megatron Core's default) or 1 (tensor parallelism folded into expert parallelism)
                layouts = [(ep, etp) for etp in _etps(space, tp, m.is_moe)
                           for ep in pick(space.ep, [e for e in divisors(dp * cp * tp // (etp or tp))
                                                     if m.num_experts % e == 0] if m.is_moe else [1])]
                chunks = _chunks_per_stage(m.total_layers, pp)
                vpps = pick(space.vpp, divisors(chunks) if (pp > 1 and (space.interleave or space.vpp)) else [1])
                sps = [x for x in ((False, True) if tp > 1 else (False,)) if space.sp is None or x == space.sp]
                for (ep, etp), vpp, sp in itertools.product(layouts, vpps, sps):
                    s = Strategy(dp=dp, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, sp=sp,
                                 flash_attention=space.flash_attention)
                    try:
                        check_divisibility(s, m, num_chips=n, global_batch_size=w.global_batch_size,
                                           seq_len=w.seq_len)
                    except InfeasibleError:
                        continue
                    yield s


# a few scenarios searched again (regions, objectives); small: a sweep over chip counts keys each count once
@functools.lru_cache(maxsize=16)
def _mesh_list(model: TransformerSpec, workload: Workload, num_chips: int, max_tp: int,
               space: SearchSpace) -> tuple[Strategy, ...]:
    """``meshes`` of one model, workload, chip count and space, kept: a search over several regions, chips'
    prices or objectives enumerates the same meshes again (1,561 for GPT-3 175B on 1,024 chips, about 100 us
    each: validating a Strategy and its divisibility), and the Strategy objects are frozen."""
    return tuple(_meshes(model, workload, num_chips, max_tp, space))


def table(sc: Scenario, space: SearchSpace | None = None, num_chips: int | None = None) -> StrategyTable:
    """The whole space as columns: every mesh times ZeRO stage x recomputation x micro-batch x optimizer offload,
    and on single-stage meshes without recomputation the activation offloads (activation_offloads).
    ZeRO > 0 is left out where the data-parallel group (dp x cp) is one device (it would repeat ZeRO-0)."""
    space = space or SearchSpace()
    gbs = sc.workload.global_batch_size
    mesh_list = _mesh_list(sc.model, sc.workload, num_chips or sc.cluster.num_chips,
                           space.max_tp or sc.cluster.node_size, space)
    if not mesh_list:
        return StrategyTable.empty(space.flash_attention)
    blocks: dict[tuple[int, bool, bool], int] = {}  # each choice grid once: dp, ZeRO can shard, one stage
    grids: list[tuple[np.ndarray, ...]] = []
    block_of = np.empty(len(mesh_list), dtype=np.int64)
    acts = activation_offloads(space, sc.model.total_layers)
    for i, mesh in enumerate(mesh_list):
        key = (mesh.dp, mesh.dp * mesh.cp > 1, mesh.pp == 1)
        if key not in blocks:
            mbs = [b for b in divisors(gbs // mesh.dp) if (not space.max_micro_batch or b <= space.max_micro_batch)
                   and (not space.micro_batch or b == space.micro_batch)]
            zeros = space.zero if key[1] else (min(space.zero),)
            recs = [RECOMPUTE.index(r) for r in space.recompute
                    if not (space.flash_attention and r == "selective" and len(space.recompute) > 1)]
            grid = [g.ravel().astype(np.int64) for g in np.meshgrid(
                mbs, zeros, recs, [int(o) for o in space.offload], acts if key[2] else [0], indexing="ij")]
            keep = (grid[4] == 0) | (grid[2] == RECOMPUTE.index("none"))  # offloading instead of recomputing
            blocks[key] = len(grids)
            grids.append(tuple(g[keep] for g in grid))
        block_of[i] = blocks[key]
    # every mesh's rows are its block's grid, meshes in order: one gather per column instead of a concatenation
    # of every mesh's copy (the same rows, in the same order)
    sizes = np.asarray([len(g[0]) for g in grids], dtype=np.int64)
    mesh_rows = sizes[block_of]
    owner = np.repeat(np.arange(len(mesh_list)), mesh_rows)  # each row's mesh
    mesh_start = np.cumsum(mesh_rows) - mesh_rows
    block_start = np.cumsum(sizes) - sizes
    at = block_start[block_of][owner] + (np.arange(len(owner)) - mesh_start[owner])
    mb, zero, rec, off, act = (np.concatenate([g[j] for g in grids])[at] for j in range(5))

    def col(f: str, dtype: type = np.int64) -> np.ndarray:
        return np.asarray([getattr(m, f) for m in mesh_list], dtype=dtype)[owner]

    return StrategyTable(dp=col("dp"), tp=col("tp"), pp=col("pp"), vpp=col("vpp"), cp=col("cp"), ep=col("ep"),
                         etp=col("etp"), sp=col("sp", bool), zero=zero, recompute=rec,
                         micro_batch_size=mb, offload_optimizer=off.astype(bool), offload_activations=act,
                         flash_attention=space.flash_attention)


def strategies(sc: Scenario, space: SearchSpace | None = None, num_chips: int | None = None) -> list[Strategy]:
    """The whole space as Strategy objects (the rows of ``table``)."""
    t = table(sc, space, num_chips)
    return [t.row(i) for i in range(len(t))]
