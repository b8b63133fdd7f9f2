"""One training step of a tp x pp x dp mesh, as one rank runs it (emulate/cases.MeshStepCase).

Ranks in Megatron-LM's order (Narayanan et al. 2021, §3: tp fastest, then pp, then dp):
    rank = (d * pp + p) * tp + t
Stage p is one Megatron MLP (Shoeybi et al. 2019, §3, Fig. 3a) over its tp ranks, as emulate/mlp.py:
    y = all_reduce_tp(relu(x @ w1[:, h_t] + b1[h_t]) @ w2[h_t, :]) + b2           forward (operator g)
    dx = all_reduce_tp(dz @ w1[:, h_t]^T)                                        backward (operator f)
Stage p sends y to stage p + 1 and receives dx back (rank +- tp), micro-batch by micro-batch in the 1F1B order
of emulate/pipeline.schedule; replica d takes micro-batches d*R .. d*R + R - 1 of the global batch; after the
last backward the gradients are summed over the dp ranks of the same (p, t) (all-reduce). Loss
0.5 * sum((y - target)^2) / numel over the whole global batch, so that the dp sum is the full-batch gradient.

The same code runs on real tensors under gloo/NCCL (checked against one process's float32 autograd) and on
meta tensors under PyTorch's fake process group (emulate/counting.py: shapes only, every collective counted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from greentrain.emulate.cases import MeshStepCase, Schedule
from greentrain.emulate.common import Checker, generator, random_tensor, timed
from greentrain.emulate.pipeline import schedule
from greentrain.emulate.recorder import Group, Recorder

GroupMaker = Callable[[tuple[int, ...]], Any]  # ranks -> a torch ProcessGroup containing them


def coords(case: MeshStepCase, rank: int) -> tuple[int, int, int]:
    """(d, p, t) of ``rank``."""
    return rank // (case.tp * case.pp), (rank // case.tp) % case.pp, rank % case.tp


def tp_ranks(case: MeshStepCase, d: int, p: int) -> tuple[int, ...]:
    return tuple((d * case.pp + p) * case.tp + t for t in range(case.tp))


def dp_ranks(case: MeshStepCase, p: int, t: int) -> tuple[int, ...]:
    return tuple((d * case.pp + p) * case.tp + t for d in range(case.dp))


def all_group_ranks(case: MeshStepCase) -> list[tuple[int, ...]]:
    """Every tp group, then every dp group, in one order: real ranks create all of them in that order."""
    return [tp_ranks(case, d, p) for d in range(case.dp) for p in range(case.pp)] + \
        [dp_ranks(case, p, t) for p in range(case.pp) for t in range(case.tp)]


def group(ranks: tuple[int, ...], rank: int, make: GroupMaker) -> Group:
    return Group(ranks=ranks, index=ranks.index(rank), pg=make(ranks) if len(ranks) > 1 else None)


def _full(case: MeshStepCase, device: torch.device) -> dict[str, torch.Tensor]:
    """Global batch and every stage's weights (meta: shapes only)."""
    rows, m, h, pp = case.dp * case.micro_batches * case.tokens, case.d_model, case.d_ff, case.pp
    if device.type == "meta":
        def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return torch.empty(*shape, device=device)
    else:
        gen = generator(case.seed)

        def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return random_tensor(gen, *shape, scale=scale)
    out = {"x": draw(rows, m), "t": draw(rows, m)}
    for p in range(pp):
        out |= {f"w1.{p}": draw(m, h, scale=m**-0.5), f"b1.{p}": draw(h, scale=0.1),
                f"w2.{p}": draw(h, m, scale=h**-0.5), f"b2.{p}": draw(m, scale=0.1)}
    return out


class _Rank:
    """One rank's stage shard, its activation cache and gradient accumulators."""

    def __init__(self, case: MeshStepCase, rank: int, rec: Recorder, full: dict[str, torch.Tensor],
                 tp: Group) -> None:
        self.case, self.rank, self.rec, self.tp = case, rank, rec, tp
        d, self.p, t = coords(case, rank)
        self.last = self.p == case.pp - 1
        w = case.d_ff // case.tp
        self.cols = slice(t * w, (t + 1) * w)
        p = self.p
        self.w = {"w1": rec.give(full[f"w1.{p}"][:, self.cols]), "b1": rec.give(full[f"b1.{p}"][self.cols]),
                  "w2": rec.give(full[f"w2.{p}"][self.cols, :]), "b2": rec.give(full[f"b2.{p}"])}
        self.grad = {k: torch.zeros_like(v) for k, v in self.w.items()}
        self.rows = [slice((d * case.micro_batches + j) * case.tokens, (d * case.micro_batches + j + 1) * case.tokens)
                     for j in range(case.micro_batches)]
        self.inputs = [rec.give(full["x"][r]) for r in self.rows] if p == 0 else []
        self.targets = [rec.give(full["t"][r]) for r in self.rows] if self.last else []
        self.scale = 1.0 / full["t"].numel()
        self.meta = rec.device.type == "meta"
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self.outputs: list[torch.Tensor] = []

    def _ew(self, like: torch.Tensor, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
        """An elementwise op (bias, ReLU, its mask, the loss gradient, a sum into a gradient): on meta tensors
        only its shape, which is its input's: PyTorch runs meta elementwise ops through Python references
        (about 1 ms each), and these ops are neither counted nor communicated."""
        return torch.empty(like.shape, dtype=like.dtype, device=like.device) if self.meta else fn()

    def forward(self, j: int) -> None:
        c, rec, w = self.case, self.rec, self.w
        x = self.inputs[j] if self.p == 0 else rec.recv((c.tokens, c.d_model), self.rank - c.tp)
        h = rec.matmul(x, w["w1"])  # (tokens, d_model) @ (d_model, d_ff/tp)
        z = self._ew(h, lambda: h + w["b1"])
        a = self._ew(z, lambda: torch.relu(z))
        part = rec.all_reduce(rec.matmul(a, w["w2"]), self.tp)  # (tokens, d_ff/tp) @ (d_ff/tp, d_model): g
        y = self._ew(part, lambda: part + w["b2"])
        dy = self._ew(y, lambda: (y - self.targets[j]) * self.scale) if self.last else y
        self.cache[j] = (x, z, a, dy)
        if self.last:
            self.outputs.append(y)
        else:
            rec.isend(y, self.rank + c.tp)

    def backward(self, j: int) -> None:
        c, rec, w, g = self.case, self.rec, self.w, self.grad
        x, z, a, dy = self.cache.pop(j)
        if not self.last:
            dy = rec.recv((c.tokens, c.d_model), self.rank + c.tp)
        dw2 = rec.matmul(a.T, dy)  # (d_ff/tp, tokens) @ (tokens, d_model)
        g["w2"] = self._ew(g["w2"], lambda: g["w2"] + dw2)
        g["b2"] = self._ew(g["b2"], lambda: g["b2"] + dy.sum(0))
        da = rec.matmul(dy, w["w2"].T)  # (tokens, d_model) @ (d_model, d_ff/tp)
        dz = self._ew(da, lambda: da * (z > 0))
        dw1 = rec.matmul(x.T, dz)  # (d_model, tokens) @ (tokens, d_ff/tp)
        g["w1"] = self._ew(g["w1"], lambda: g["w1"] + dw1)
        g["b1"] = self._ew(g["b1"], lambda: g["b1"] + dz.sum(0))
        dx = rec.all_reduce(rec.matmul(dz, w["w1"].T), self.tp)  # f backward: (tokens, d_ff/tp) @ (d_ff/tp, d_model)
        if self.p > 0:
            rec.isend(dx, self.rank - c.tp)

    def step(self, dp: Group) -> torch.Tensor:
        for kind, j in schedule(Schedule.ONE_F_ONE_B, self.p, self.case.pp, self.case.micro_batches):
            (self.forward if kind == "F" else self.backward)(j)
        self.rec.flush()
        self.grad = {k: self.rec.all_reduce(v, dp) for k, v in self.grad.items()}  # data-parallel sum
        return self.grad["w1"]


def _reference(case: MeshStepCase, full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One process, whole global batch, float32 autograd through the pp stages."""
    p = {k: v.clone().requires_grad_(k not in ("x", "t")) for k, v in full.items()}
    y = p["x"]
    for s in range(case.pp):
        y = torch.relu(y @ p[f"w1.{s}"] + p[f"b1.{s}"]) @ p[f"w2.{s}"] + p[f"b2.{s}"]
    loss = 0.5 * ((y - p["t"]) ** 2).sum() / y.numel()
    loss.backward()
    out = {k: v.grad for k, v in p.items() if v.grad is not None}
    return {"y": y.detach(), **out}


def run(case: MeshStepCase, rank: int, rec: Recorder, make: GroupMaker, *, check: bool = True) -> tuple[float,
                                                                                                        Checker]:
    """This rank's step; with ``check``, its gradients (and the last stage's outputs) against the reference.
    ``make`` builds the process group of the given ranks (real ranks: every rank must have created all
    groups of all_group_ranks in that order before)."""
    d, p, t = coords(case, rank)
    tp, dp = group(tp_ranks(case, d, p), rank, make), group(dp_ranks(case, p, t), rank, make)
    full = _full(case, rec.device if rec.device.type == "meta" else torch.device("cpu"))
    me = _Rank(case, rank, rec, full, tp)
    checker = Checker()
    if not check:
        me.step(dp)
        return 0.0, checker
    _, time_s = timed(rec.device, lambda: me.step(dp))
    ref = _reference(case, full)
    shard = {"w1": (slice(None), me.cols), "b1": (me.cols,), "w2": (me.cols, slice(None)), "b2": (slice(None),)}
    for k, v in me.grad.items():
        checker.compare(v, ref[f"{k}.{p}"][shard[k]])
    for j, y in enumerate(me.outputs):
        checker.compare(y, ref["y"][me.rows[j]])
    return time_s, checker


def run_on_world(case: MeshStepCase, rank: int, rec: Recorder) -> tuple[float, Checker]:
    """On real ranks (the launcher's world): every rank creates every group, in one order, then runs."""
    import torch.distributed as dist

    pgs = {ranks: dist.new_group(list(ranks)) for ranks in all_group_ranks(case) if len(ranks) > 1}
    return run(case, rank, rec, pgs.__getitem__)
