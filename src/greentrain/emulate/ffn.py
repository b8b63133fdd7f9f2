"""The feed-forward layer o = relu(x @ w1 + b1) @ w2 + b2, x (batch, seq, d_model), unsharded or GSPMD-sharded
on an X x Y mesh (seed 003 `tensor_parallelism/ffn.py`, seed-systems.md §3.6; GSPMD, Xu et al. 2021, §3.3):

    x1 = (X, _, Y)   w1 = (X, Y)   b1 = (Y)   w2 = (Y, X)   b2 = (Y)   o = (X, _, Y)
    1. all-gather x1 along d_model over the Y group       -> (b/X, s, m)
    2. all-gather w1 along dim 0 over the X group          -> (m, h/Y)
    3. h = relu(x @ w1 + b1)                               -> (b/X, s, h/Y)
    4. all-gather w2 along dim 1 over the X group          -> (h/Y, m)
    5. partial o = h @ w2                                  -> (b/X, s, m), a partial sum over Y
    6. reduce-scatter (sum) along d_model over the Y group -> (b/X, s, m/Y), then + b2
FLOPs: 2·b·s·m·h per matmul, bias FLOPs ignored (as in the seed).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from greentrain.emulate.cases import FfnCase
from greentrain.emulate.common import Checker, generator, random_tensor, timed
from greentrain.emulate.mesh import MeshContext
from greentrain.emulate.recorder import Recorder
from greentrain.emulate.sharding import TensorSharding


def gspmd_shardings(case: FfnCase) -> dict[str, TensorSharding]:
    x, y = f"{case.mesh.x_size}x1", f"1x{case.mesh.y_size}"
    return {"x1": TensorSharding.of(x, "1x1", y), "w1": TensorSharding.of(x, y), "b1": TensorSharding.of(y),
            "w2": TensorSharding.of(y, x), "b2": TensorSharding.of(y), "o": TensorSharding.of(x, "1x1", y)}


def _inputs(case: FfnCase) -> dict[str, torch.Tensor]:
    gen = generator(case.seed)
    m, h = case.d_model, case.d_ff
    return {"x1": random_tensor(gen, case.batch, case.seq, m),
            "w1": random_tensor(gen, m, h, scale=m**-0.5), "b1": random_tensor(gen, h, scale=0.1),
            "w2": random_tensor(gen, h, m, scale=h**-0.5), "b2": random_tensor(gen, m, scale=0.1)}


def _gspmd(case: FfnCase, ctx: MeshContext, rec: Recorder, local: dict[str, torch.Tensor]) -> torch.Tensor:
    sh = gspmd_shardings(case)
    x = torch.cat(rec.all_gather(local["x1"], ctx.group(sh["x1"].dims[2])), 2)
    w1 = torch.cat(rec.all_gather(local["w1"], ctx.group(sh["w1"].dims[0])), 0)
    hidden = torch.relu(rec.matmul(x, w1) + local["b1"])
    w2 = torch.cat(rec.all_gather(local["w2"], ctx.group(sh["w2"].dims[1])), 1)
    partial = rec.matmul(hidden, w2)
    return rec.reduce_scatter(partial, ctx.group(sh["o"].dims[2]), dim=2) + local["b2"]


def _unsharded(rec: Recorder, t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rec.matmul(torch.relu(rec.matmul(t["x1"], t["w1"]) + t["b1"]), t["w2"]) + t["b2"]


# Drawn by the launching process before it forks CPU ranks (``prepare``): the inputs, and for the unsharded
# layer a shared-memory buffer for its reference, which rank 0 alone computes (every rank computed the same
# whole layer, 8 x 17 GFLOP at the seed's sizes).
_PREPARED: list[tuple[tuple[int, int, int, int, int], dict[str, torch.Tensor], torch.Tensor | None]] = []


def _key(case: FfnCase) -> tuple[int, int, int, int, int]:
    return (case.seed, case.batch, case.seq, case.d_model, case.d_ff)


def prepare(case: FfnCase) -> None:
    """In the launching process, before it forks CPU ranks: the inputs drawn once (the ranks inherit them;
    the same numbers), and the unsharded layer's reference buffer in shared memory."""
    forget_prepared()
    shared = None if case.gspmd else torch.empty(case.batch, case.seq, case.d_model).share_memory_()
    _PREPARED.append((_key(case), _inputs(case), shared))


def forget_prepared() -> None:
    _PREPARED.clear()


def _reference(case: FfnCase, full: dict[str, torch.Tensor], b_rows: slice, m_cols: slice, rank: int,
               shared: torch.Tensor | None) -> torch.Tensor:
    """The plain float32 layer for the rows and columns this rank holds; the whole layer (unsharded) is
    computed by rank 0 into ``shared`` when the launcher prepared it (the same numbers every rank computed)."""
    def layer() -> torch.Tensor:
        hidden = torch.nn.functional.linear(full["x1"][b_rows], full["w1"].T, full["b1"]).relu()
        return torch.nn.functional.linear(hidden, full["w2"][:, m_cols].T, full["b2"][m_cols])

    if shared is None or case.gspmd:
        return layer()
    if rank == 0:
        shared.copy_(layer())
    dist.barrier()
    return shared


def run(case: FfnCase, ctx: MeshContext, rec: Recorder) -> tuple[float, Checker]:
    prepared = _PREPARED[0] if _PREPARED and _PREPARED[0][0] == _key(case) else None
    full, shared = (prepared[1], prepared[2]) if prepared is not None else (_inputs(case), None)
    shape = {k: tuple(v.shape) for k, v in full.items()}
    if case.gspmd:
        sh = gspmd_shardings(case)
        local = {k: rec.give(v[sh[k].local_slices(ctx.mesh, shape[k], ctx.rank)]) for k, v in full.items()}
        out, time_s = timed(ctx.device, lambda: _gspmd(case, ctx, rec, local))
        o_slices = sh["o"].local_slices(ctx.mesh, (case.batch, case.seq, case.d_model), ctx.rank)
    else:
        local = {k: rec.give(v) for k, v in full.items()}
        out, time_s = timed(ctx.device, lambda: _unsharded(rec, local))
        o_slices = (slice(None), slice(None), slice(None))
    checker = Checker()
    checker.compare(out, _reference(case, full, o_slices[0], o_slices[2], ctx.rank, shared))
    return time_s, checker
