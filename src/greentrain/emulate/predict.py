"""The statistics of an emulation case, predicted on paper (no torch), to set against what the ranks count.

Collectives are costed by greentrain.estimate.comm.ring_bytes_per_rank (payload = the full tensor); the naive
exchange of seed 003 gives each member g-1 messages: of its shard (all-gather), of the whole buffer
(all-reduce) or of 1/g of it (reduce-scatter). float32 throughout: 4 bytes per element.
"""

from __future__ import annotations

from greentrain.emulate.cases import (
    Case,
    FaultCase,
    FfnCase,
    MatMulCase,
    MatMulPolicy,
    MeshStepCase,
    MlpCase,
    PipelineCase,
)
from greentrain.emulate.results import Statistics
from greentrain.estimate.comm import Collective, ring_bytes_per_rank

F32 = 4  # bytes per float32 element


def collective(kind: Collective, group_size: int, payload_bytes: int) -> Statistics:
    """One rank's share of one collective over ``group_size`` ranks."""
    g = group_size
    if g <= 1:
        return Statistics()
    message = {Collective.ALL_GATHER: payload_bytes // g, Collective.ALL_REDUCE: payload_bytes,
               Collective.REDUCE_SCATTER: payload_bytes // g}[kind]
    return Statistics(d2d_messages=g - 1, d2d_bytes=(g - 1) * message,
                      ring_bytes=ring_bytes_per_rank(kind, g, payload_bytes))


def h2d(*numels: int) -> Statistics:
    return Statistics(h2d_messages=len(numels), h2d_bytes=F32 * sum(numels))


def _sum(parts: list[Statistics]) -> Statistics:
    out = Statistics()
    for p in parts:
        out = out + p
    return out


def _matmul_rank(c: MatMulCase) -> Statistics:
    """Every rank of a MatMul case does the same amount of work: one rank's statistics."""
    m, k, n = c.m, c.k, c.n
    a0, a1, b0, b1 = (c.a.dims[0].num_shards, c.a.dims[1].num_shards, c.b.dims[0].num_shards,
                      c.b.dims[1].num_shards)
    parts = [h2d((m // a0) * (k // a1), (k // b0) * (n // b1))]
    ag = Collective.ALL_GATHER
    policy = c.derived_policy
    if policy is MatMulPolicy.UNSHARDED:
        parts.append(Statistics(flops=2 * m * k * n))
    elif policy is MatMulPolicy.MATCHED_INNER:
        parts += [Statistics(flops=2 * m * (k // a1) * n), collective(Collective.ALL_REDUCE, a1, F32 * m * n)]
    elif policy is MatMulPolicy.UNMATCHED_INNER:
        parts += [collective(ag, a1, F32 * m * k), collective(ag, b0, F32 * k * n),
                  Statistics(flops=2 * m * k * n)]
    elif policy is MatMulPolicy.OUTER:
        parts += [collective(ag, a1, F32 * (m // a0) * k), collective(ag, b0, F32 * k * n),
                  Statistics(flops=2 * (m // a0) * k * n), collective(ag, a0, F32 * m * n)]
    else:  # FULL: the last all-gather spans the whole mesh
        world = c.mesh.num_devices
        parts += [collective(ag, a1, F32 * (m // a0) * k), collective(ag, b0, F32 * k * (n // b1)),
                  Statistics(flops=2 * (m // a0) * k * (n // b1)),
                  collective(ag, world, F32 * world * (m // a0) * (n // b1))]
    return _sum(parts)


def _ffn_rank(c: FfnCase) -> Statistics:
    b, s, m, h = c.batch, c.seq, c.d_model, c.d_ff
    if not c.gspmd:
        return h2d(b * s * m, m * h, h, h * m, m) + Statistics(flops=2 * (2 * b * s * m * h))
    x, y = c.mesh.x_size, c.mesh.y_size
    return _sum([h2d((b // x) * s * (m // y), (m // x) * (h // y), h // y, (h // y) * (m // x), m // y),
                 collective(Collective.ALL_GATHER, y, F32 * (b // x) * s * m),
                 collective(Collective.ALL_GATHER, x, F32 * m * (h // y)),
                 collective(Collective.ALL_GATHER, x, F32 * (h // y) * m),
                 collective(Collective.REDUCE_SCATTER, y, F32 * (b // x) * s * m),
                 Statistics(flops=2 * (2 * (b // x) * s * m * (h // y)))])


def _mlp_rank(c: MlpCase) -> Statistics:
    t, m, h = c.tokens, c.d_model, c.d_ff // c.tp
    # six matmuls of 2·t·m·h: x@w1, a@w2 forward; dy@w2ᵀ, aᵀ@dy, xᵀ@dz, dz@w1ᵀ backward (Megatron §3)
    return _sum([h2d(t * m, t * m, m * h, h, h * m, m), Statistics(flops=6 * 2 * t * m * h),
                 collective(Collective.ALL_REDUCE, c.tp, F32 * t * m),
                 collective(Collective.ALL_REDUCE, c.tp, F32 * t * m)])


def _pipeline_total(c: PipelineCase) -> Statistics:
    u, r, mb = c.units, c.micro_batches, c.batch // c.micro_batches
    parts = [h2d(*([mb * u[0]] * r)), h2d(*([mb * u[-1]] * r))]  # stage 0's inputs, the last stage's targets
    for i in range(c.stages):
        parts.append(h2d(u[i] * u[i + 1], u[i + 1]))  # w, b
        parts.append(Statistics(flops=r * 3 * 2 * mb * u[i] * u[i + 1]))  # z = x w, dw = xᵀ dz, dx = dz wᵀ
    for i in range(c.stages - 1):  # activations forward and gradients back over each boundary, per micro-batch
        size = F32 * mb * u[i + 1]
        parts.append(Statistics(d2d_messages=2 * r, d2d_bytes=2 * r * size,
                                ring_bytes=2 * r * ring_bytes_per_rank(Collective.SEND_RECV, 2, size)))
    return _sum(parts)


def _mesh_total(c: MeshStepCase) -> Statistics:
    """emulate/mesh3d.py over all ranks: per rank and micro-batch the MLP's six matmuls and two tp all-reduces,
    the four dp all-reduces of its gradient shards, its stage's weights and stage 0's inputs / the last
    stage's targets; across each stage boundary one activation forward and one gradient back per micro-batch
    (a send, counted on the sender as ring bytes, and a receive, one d2d message)."""
    r, t, m, h = c.micro_batches, c.tokens, c.d_model, c.d_ff // c.tp
    act = F32 * t * m
    weights = (m * h, h, h * m, m)  # w1, b1, w2, b2 shards
    per_rank = [h2d(*weights), Statistics(flops=r * 6 * 2 * t * m * h)]
    per_rank += [collective(Collective.ALL_REDUCE, c.tp, act)] * (2 * r)
    per_rank += [collective(Collective.ALL_REDUCE, c.dp, F32 * n) for n in weights]
    ranks = c.world_size
    boundaries = c.dp * c.tp * (c.pp - 1)  # (replica, tp rank) pairs of neighbouring stages
    ends = h2d(*([t * m] * (r * c.dp * c.tp)))  # stage 0's inputs, then the last stage's targets
    send = Statistics(d2d_messages=1, d2d_bytes=act, ring_bytes=ring_bytes_per_rank(Collective.SEND_RECV, 2, act))
    return _sum([_sum(per_rank)] * ranks + [ends, ends] + [send] * (2 * r * boundaries))


def predict(case: Case) -> Statistics:
    """The statistics summed over all ranks (``wire_bytes`` is a count, never predicted: 0)."""
    if isinstance(case, PipelineCase):
        return _pipeline_total(case)
    if isinstance(case, FaultCase):
        return Statistics()
    if isinstance(case, MeshStepCase):
        return _mesh_total(case)
    one = _matmul_rank(case) if isinstance(case, MatMulCase) else (
        _ffn_rank(case) if isinstance(case, FfnCase) else _mlp_rank(case))
    return _sum([one] * case.world_size)
