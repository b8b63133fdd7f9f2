"""A pipeline-parallel MLP: stage i (rank i) is a dense layer with ReLU, units[i] -> units[i+1]
(seed 003 `pipeline_parallelism/mlp.py`, seed-systems.md §3.7), trained one step over R micro-batches.

Per micro-batch r (seed's maths): z = x @ w + b, a = relu(z); the last stage's loss is sum((a - t)²)/a.size,
da = 2 (a - t)/a.size; backward dz = da ⊙ (z > 0), dw = xᵀ dz, db = Σ_rows dz, dx = dz wᵀ.
Unlike the seed (SGD after every micro-batch, which makes the result depend on the schedule), gradients are
averaged over the R micro-batches and one SGD step w -= lr·dw follows, the synchronous semantics of GPipe
(Huang et al. 2019, §2.2) and 1F1B (PipeDream-Flush, Narayanan et al. 2021, §2): both schedules then give the
same numbers as one process training on the whole batch, for any R >= 1.

Schedules (ordered actions per stage; sends never block, receives do):
    gpipe  F0 .. F(R-1), B0 .. B(R-1)
    1f1b   min(S-1-i, R) warm-up forwards, then alternate one forward and one backward, then the rest
Explicit send/recv rather than torch.distributed.pipelining: every activation and gradient transfer goes
through the recorder (pipelining's stages batch their own p2p calls out of its sight).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from greentrain.emulate.cases import PipelineCase, Schedule
from greentrain.emulate.common import Checker, generator, random_tensor, timed
from greentrain.emulate.recorder import Recorder

Action = tuple[str, int]  # ("F" | "B", micro-batch)


def schedule(kind: Schedule, stage: int, stages: int, micro_batches: int) -> list[Action]:
    r = micro_batches
    if kind is Schedule.GPIPE:
        return [("F", j) for j in range(r)] + [("B", j) for j in range(r)]
    warm = min(stages - 1 - stage, r)
    actions: list[Action] = [("F", j) for j in range(warm)]
    for j in range(r - warm):
        actions += [("F", warm + j), ("B", j)]
    return actions + [("B", j) for j in range(r - warm, r)]


def _model(case: PipelineCase) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor, torch.Tensor]:
    gen = generator(case.seed)
    u = case.units
    ws = [random_tensor(gen, u[i], u[i + 1], scale=u[i] ** -0.5) for i in range(case.stages)]
    bs = [random_tensor(gen, u[i + 1], scale=0.1) for i in range(case.stages)]
    return ws, bs, random_tensor(gen, case.batch, u[0]), random_tensor(gen, case.batch, u[-1]).relu()


class _Stage:
    """One rank's layer, its activation cache and its gradient accumulators."""

    def __init__(self, case: PipelineCase, rank: int, rec: Recorder, data: tuple[torch.Tensor, torch.Tensor],
                 w: torch.Tensor, b: torch.Tensor) -> None:
        self.case, self.i, self.rec = case, rank, rec
        self.last = rank == case.stages - 1
        self.mb = case.batch // case.micro_batches
        rows = [slice(j * self.mb, (j + 1) * self.mb) for j in range(case.micro_batches)]
        self.inputs = [rec.give(data[0][s]) for s in rows] if rank == 0 else []
        self.targets = [rec.give(data[1][s]) for s in rows] if self.last else []
        self.w, self.b = rec.give(w), rec.give(b)
        self.dw, self.db = torch.zeros_like(self.w), torch.zeros_like(self.b)
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self.dx: list[torch.Tensor] = []
        self.loss = torch.zeros((), device=rec.device)

    def forward(self, j: int) -> None:
        u = self.case.units
        x = self.inputs[j] if self.i == 0 else self.rec.recv((self.mb, u[self.i]), self.i - 1)
        z = self.rec.matmul(x, self.w) + self.b
        a = torch.relu(z)
        self.cache[j] = (x, z, a)
        if self.last:
            self.loss += ((a - self.targets[j]) ** 2).sum() / a.numel() / self.case.micro_batches
        else:
            self.rec.isend(a, self.i + 1)

    def backward(self, j: int) -> None:
        x, z, a = self.cache.pop(j)
        if self.last:  # mean over micro-batches of the seed's per-micro-batch loss
            da = 2.0 * (a - self.targets[j]) / a.numel() / self.case.micro_batches
        else:
            da = self.rec.recv(tuple(a.shape), self.i + 1)
        dz = da * (z > 0)
        self.dw += self.rec.matmul(x.T, dz)
        self.db += dz.sum(0)
        dx = self.rec.matmul(dz, self.w.T)
        if self.i > 0:
            self.rec.isend(dx, self.i - 1)
        else:
            self.dx.append(dx)

    def step(self) -> torch.Tensor:
        for kind, j in schedule(self.case.schedule, self.i, self.case.stages, self.case.micro_batches):
            (self.forward if kind == "F" else self.backward)(j)
        self.rec.flush()
        self.w = self.w - self.case.learning_rate * self.dw  # SGD, once per step
        self.b = self.b - self.case.learning_rate * self.db
        return self.w


@dataclass(frozen=True, slots=True, kw_only=True)
class _Reference:
    loss: torch.Tensor
    dx: torch.Tensor
    dw: list[torch.Tensor]
    db: list[torch.Tensor]


def _grad(t: torch.Tensor) -> torch.Tensor:
    assert t.grad is not None
    return t.grad


def _reference(case: PipelineCase, ws: list[torch.Tensor], bs: list[torch.Tensor], x: torch.Tensor,
               t: torch.Tensor) -> _Reference:
    """One process, whole batch, float32 autograd: loss = mean((a - t)²)."""
    wr = [w.clone().requires_grad_(True) for w in ws]
    br = [b.clone().requires_grad_(True) for b in bs]
    a = xr = x.clone().requires_grad_(True)
    for w, b in zip(wr, br, strict=True):
        a = torch.relu(a @ w + b)
    loss = ((a - t) ** 2).mean()
    loss.backward()
    return _Reference(loss=loss.detach(), dx=_grad(xr), dw=[_grad(w) for w in wr], db=[_grad(b) for b in br])


def run(case: PipelineCase, rank: int, rec: Recorder) -> tuple[float, Checker]:
    ws, bs, x, t = _model(case)
    stage = _Stage(case, rank, rec, (x, t), ws[rank], bs[rank])
    _, time_s = timed(rec.device, stage.step)
    ref = _reference(case, ws, bs, x, t)
    checker = Checker()
    checker.compare(stage.dw, ref.dw[rank])
    checker.compare(stage.db, ref.db[rank])
    checker.compare(stage.w, ws[rank] - case.learning_rate * ref.dw[rank])
    if rank == 0:
        checker.compare(torch.cat(stage.dx, 0), ref.dx)
    if stage.last:
        checker.compare(stage.loss, ref.loss)
    return time_s, checker
