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


def run(case: FfnCase, ctx: MeshContext, rec: Recorder) -> tuple[float, Checker]:
    full = _inputs(case)
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
    # reference: the plain float32 layer, computed for the rows and columns this rank holds
    b_rows, m_cols = o_slices[0], o_slices[2]
    hidden = torch.nn.functional.linear(full["x1"][b_rows], full["w1"].T, full["b1"]).relu()
    ref = torch.nn.functional.linear(hidden, full["w2"][:, m_cols].T, full["b2"][m_cols])
    checker = Checker()
    checker.compare(out, ref)
    return time_s, checker
