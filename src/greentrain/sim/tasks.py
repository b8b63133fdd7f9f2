"""A model's forward and backward pass as a bag of tensor-parallel tasks (seed 000's decompose_matrix).

Every matmul-like op of ``greentrain.model.ops`` (weight matmuls and the attention core) is cut into tiles:
- a weight matmul (m x k) @ (k x n) splits the larger of k and n in halves, level by level, to ``tp_depth``
  levels, never below ``min_tp_size`` (a dimension under 2 x min_tp_size is not split: seed 000, "matrix
  less than this size will not be parallelized"). Splitting n gives column tiles (Megatron-LM's
  column-parallel linear, Shoeybi et al. 2019 §3); splitting k gives row tiles whose outputs are partial
  sums;
- an attention core (``count`` = batch x heads independent products) splits its head batch in halves.

Task FLOPs (Korthikanti et al. 2022, arXiv 2205.05198 §4, as in model/ops.py): a tile (c, m, k, n) costs
2cmkn forward; its backward is ONE task of 4cmkn (input gradient dY W^T and weight gradient X^T dY, done on
the same device because both need dY). Task bytes at ``bytes_per_elt``:
  forward  ingress c(mk + kn) [X slice, W tile]          egress c(mn)      [Y tile or partial sum]
  backward ingress c(mn + kn + mk) [dY tile, W tile, X]  egress c(mk + kn) [dX partial, dW tile]
Element-wise ops have zero model FLOPs (memory bound) and are not tasks. Tasks within a round are
independent (seed 000's bag of tasks; layer order is the queue order, not a dependency). The sum of the
task FLOPs is 3 x the model's forward FLOPs: every FLOP of the training step exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greentrain.errors import ConfigError
from greentrain.model.ops import ModelOps, Op, OpKind

MAX_TASKS = 50_000_000
MAX_TP_DEPTH = 24

Tile = tuple[float, float, float, float]  # count, m, k, n


def _halves(x: float) -> tuple[float, float]:
    lo = float(int(x) // 2)
    return lo, x - lo


def tile_matmul(m: float, k: float, n: float, count: float, tp_depth: int, min_tp_size: int) -> list[Tile]:
    """Split (m x k) @ (k x n) by halving the larger of k, n per level (see the module docstring)."""
    tiles: list[Tile] = [(count, m, k, n)]
    for _ in range(tp_depth):
        nxt: list[Tile] = []
        for c, mm, kk, nn in tiles:
            big = max(kk, nn)
            if big < 2 * min_tp_size:
                nxt.append((c, mm, kk, nn))
            elif nn >= kk:
                nxt += [(c, mm, kk, h) for h in _halves(nn)]
            else:
                nxt += [(c, mm, h, nn) for h in _halves(kk)]
        if len(nxt) == len(tiles):
            break
        tiles = nxt
    return tiles


def tile_attention(op: Op, tp_depth: int) -> list[Tile]:
    """Split the head batch (``count`` products) of an attention core in halves per level."""
    tiles: list[Tile] = [(op.count, op.m, op.k, op.n)]
    for _ in range(tp_depth):
        nxt: list[Tile] = []
        for c, m, k, n in tiles:
            nxt += [(h, m, k, n) for h in _halves(c)] if c >= 2 and c == int(c) else [(c, m, k, n)]
        if len(nxt) == len(tiles):
            break
        tiles = nxt
    return tiles


def op_tiles(op: Op, tp_depth: int, min_tp_size: int) -> list[Tile]:
    if op.kind is OpKind.ATTENTION:
        return tile_attention(op, tp_depth)
    return tile_matmul(op.m, op.k, op.n, op.count, tp_depth, min_tp_size)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TaskSet:
    """Tasks of one round, in queue order (forward layer by layer, then backward in reverse)."""

    flop: np.ndarray  # float64 [num_tasks]
    in_bytes: np.ndarray
    out_bytes: np.ndarray
    op_id: np.ndarray  # int32 index into op_names
    layer: np.ndarray  # int32 layer number (-1: head)
    backward: np.ndarray  # bool
    op_names: tuple[str, ...]
    model_flop: float = field(default=0.0)  # 3 x the model's forward FLOPs

    @property
    def num_tasks(self) -> int:
        return int(self.flop.shape[0])

    def label(self, i: int) -> str:
        layer = int(self.layer[i])
        where = f"L{layer}." if layer >= 0 else ""
        return f"{'bwd' if self.backward[i] else 'fwd'} {where}{self.op_names[int(self.op_id[i])]}"


def _rows(tiles: list[Tile], e: float, backward: bool) -> np.ndarray:
    t = np.asarray(tiles, dtype=np.float64).reshape(-1, 4)
    c, m, k, n = t[:, 0], t[:, 1], t[:, 2], t[:, 3]
    if backward:
        return np.stack([4 * c * m * k * n, c * (m * n + k * n + m * k) * e, c * (m * k + k * n) * e], axis=1)
    return np.stack([2 * c * m * k * n, c * (m * k + k * n) * e, c * m * n * e], axis=1)


def _block(ops: list[tuple[int, Op]], tp_depth: int, min_tp: int, e: float,
           backward: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows (flop, in, out) and op ids of one layer's (or the head's) tasks, in execution order."""
    rows, ids = [], []
    for oid, op in (reversed(ops) if backward else ops):
        tiles = op_tiles(op, tp_depth, min_tp)
        rows.append(_rows(tiles, e, backward))
        ids.append(np.full(len(tiles), oid, dtype=np.int32))
    if not rows:
        return np.zeros((0, 3)), np.zeros(0, dtype=np.int32)
    return np.concatenate(rows), np.concatenate(ids)


def _check_tileable(ops: ModelOps, tp_depth: int, min_tp_size: int, model_name: str) -> None:
    if min_tp_size < 1:
        raise ConfigError("min_tp_size", min_tp_size, "must be >= 1")
    if not 0 <= tp_depth <= MAX_TP_DEPTH:
        raise ConfigError("tp_depth", tp_depth, f"must be in [0, {MAX_TP_DEPTH}]")
    weights = [op for op in ops.all_ops() if op.kind is OpKind.MATMUL]
    largest = max((max(op.k, op.n) for op in weights), default=0.0)
    if tp_depth >= 1 and largest < 2 * min_tp_size:
        raise ConfigError("min_tp_size", min_tp_size,
                          f"model {model_name} cannot be tiled: its largest weight dimension is {largest:g}, "
                          f"under 2 x min_tp_size, so no matrix splits at tp_depth={tp_depth}")


def build_tasks(ops: ModelOps, *, tp_depth: int, min_tp_size: int, bytes_per_elt: float,
                model_name: str = "model") -> TaskSet:
    """All tasks of one training round of ``ops`` (one micro-batch: forward, then backward)."""
    _check_tileable(ops, tp_depth, min_tp_size, model_name)
    names: list[str] = []
    groups = []
    for g in ops.layers:
        costed = [o for o in g.ops if o.kind is not OpKind.ELEMENTWISE]
        gops = [(len(names) + i, op) for i, op in enumerate(costed)]
        names += [f"{g.name}.{op.name}" for _, op in gops]
        groups.append((g.count, gops))
    head = [(len(names) + i, op) for i, op in
            enumerate(o for o in (*ops.embedding, *ops.head) if o.kind is not OpKind.ELEMENTWISE)]
    names += [op.name for _, op in head]
    per_layer = 0
    for count, gops in groups:
        per_layer += count * sum(len(op_tiles(op, tp_depth, min_tp_size)) for _, op in gops)
    if 2 * per_layer > MAX_TASKS:
        raise ConfigError("tp_depth", tp_depth, f"gives {2 * per_layer:,} tasks per round, more than "
                          f"{MAX_TASKS:,}; lower tp_depth or raise min_tp_size")
    Part = tuple[np.ndarray, np.ndarray, np.ndarray, bool]
    fwd_parts: list[Part] = []
    bwd_parts: list[Part] = []
    layer0 = 0
    for count, gops in groups:
        for backward, parts in ((False, fwd_parts), (True, bwd_parts)):
            rows, ids = _block(gops, tp_depth, min_tp_size, bytes_per_elt, backward)
            layers = np.repeat(np.arange(layer0, layer0 + count, dtype=np.int32), len(ids))
            parts.append((np.tile(rows, (count, 1)), np.tile(ids, count), layers, backward))
        layer0 += count
    for backward, parts in ((False, fwd_parts), (True, bwd_parts)):
        rows, ids = _block(head, tp_depth, min_tp_size, bytes_per_elt, backward)
        parts.append((rows, ids, np.full(len(ids), -1, dtype=np.int32), backward))
    bwd_parts.reverse()
    for i, (rows, ids, layers, b) in enumerate(bwd_parts):  # layers run last to first in backward
        count = int(layers[-1] - layers[0]) + 1 if len(layers) and layers[0] >= 0 else 1
        if count > 1:
            order = np.arange(len(ids)).reshape(count, -1)[::-1].ravel()
            bwd_parts[i] = (rows[order], ids[order], layers[order], b)
    parts = fwd_parts + bwd_parts
    rows = np.concatenate([p[0] for p in parts])
    return TaskSet(flop=rows[:, 0].copy(), in_bytes=rows[:, 1].copy(), out_bytes=rows[:, 2].copy(),
                   op_id=np.concatenate([p[1] for p in parts]), layer=np.concatenate([p[2] for p in parts]),
                   backward=np.concatenate([np.full(len(p[1]), p[3], dtype=bool) for p in parts]),
                   op_names=tuple(names), model_flop=3.0 * ops.forward_flop())
