"""Megatron-LM tensor-parallel MLP (Shoeybi et al. 2019, §3, Fig. 3a), forward and backward over tp ranks:

    y = relu(x @ w1[:, h_i] + b1[h_i]) @ w2[h_i, :]      column-parallel w1, row-parallel w2, no communication
    y = all_reduce(y_i) + b2                              operator g (forward)
    dx = all_reduce(dz_i @ w1[:, h_i]^T)                  operator f (backward)
Loss 0.5·sum((y - t)²)/numel. Two all-reduces of (tokens, d_model) per step, as the paper counts.
"""

from __future__ import annotations

import torch

from greentrain.emulate.cases import MlpCase
from greentrain.emulate.common import Checker, generator, random_tensor, timed
from greentrain.emulate.mesh import MeshContext
from greentrain.emulate.recorder import Recorder


def _inputs(case: MlpCase) -> dict[str, torch.Tensor]:
    gen = generator(case.seed)
    m, h = case.d_model, case.d_ff
    return {"x": random_tensor(gen, case.tokens, m), "t": random_tensor(gen, case.tokens, m),
            "w1": random_tensor(gen, m, h, scale=m**-0.5), "b1": random_tensor(gen, h, scale=0.1),
            "w2": random_tensor(gen, h, m, scale=h**-0.5), "b2": random_tensor(gen, m, scale=0.1)}


def _step(ctx: MeshContext, rec: Recorder, p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    z = rec.matmul(p["x"], p["w1"]) + p["b1"]  # (tokens, h/tp)
    a = torch.relu(z)
    y = rec.all_reduce(rec.matmul(a, p["w2"]), ctx.world) + p["b2"]  # g
    dy = (y - p["t"]) / y.numel()
    dz = rec.matmul(dy, p["w2"].T) * (z > 0)
    return {"y": y, "dw2": rec.matmul(a.T, dy), "db2": dy.sum(0), "dw1": rec.matmul(p["x"].T, dz),
            "db1": dz.sum(0), "dx": rec.all_reduce(rec.matmul(dz, p["w1"].T), ctx.world)}  # f backward


def _reference(full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Single-process float32 autograd of the same layer."""
    p = {k: v.clone().requires_grad_(k != "t") for k, v in full.items()}
    y = torch.relu(p["x"] @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    loss = 0.5 * ((y - p["t"]) ** 2).sum() / y.numel()
    loss.backward()
    grads = {f"d{k}": v.grad for k, v in p.items() if v.grad is not None}
    return {"y": y.detach(), **grads}


def run(case: MlpCase, ctx: MeshContext, rec: Recorder) -> tuple[float, Checker]:
    full = _inputs(case)
    width = case.d_ff // case.tp
    cols = slice(ctx.rank * width, (ctx.rank + 1) * width)
    local = {"x": full["x"], "t": full["t"], "w1": full["w1"][:, cols], "b1": full["b1"][cols],
             "w2": full["w2"][cols, :], "b2": full["b2"]}
    local = {k: rec.give(v) for k, v in local.items()}
    out: dict[str, torch.Tensor] = {}

    def step() -> torch.Tensor:
        out.update(_step(ctx, rec, local))
        return out["y"]

    _, time_s = timed(ctx.device, step)
    ref = _reference(full)
    shard = {"dw1": (slice(None), cols), "db1": (cols,), "dw2": (cols, slice(None))}
    checker = Checker()
    for name, value in out.items():
        checker.compare(value, ref[name][shard.get(name, (slice(None),))])
    return time_s, checker
