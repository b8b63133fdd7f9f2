"""The offload planner: given a scenario and memory caps, what lives where and how fast a step runs.

Algorithm (design/offload.md section 4.3), exact over a few counts:
1. for every resident-layer count r (or the policy's), prefetch depth 1 (the analytical step does not depend
   on the depth once it is >= 1, section 4.5; deeper only costs memory), keep as many (layer, chunk) activation
   slots on the device as fit: a device slot is never worse than a home one (no transfer, no recompute);
2. the home slots start at the input level and are upgraded (input -> attention for all, then attention ->
   full) while host memory lasts; with ``downgrade`` the planner takes the best number of upgrades up to that
   limit instead of all of them ("recompute is better than idle"): the step is convex in the upgrades within
   each of the two stages, so a grid and a refinement around its best point find the optimum;
3. the plan with the most tokens/s wins; ties: fewer bytes moved, then less host memory.
More device memory, more host memory or a faster link only adds candidates or makes each one faster, so the
prediction is monotonic in all three (tests/unit/offload/test_offload_properties.py).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, fields
from functools import cache

import numpy as np

from greentrain import units
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.state_dtypes import workload_grad_dtype
from greentrain.model.spec import TransformerSpec
from greentrain.offload.config import OffloadCaps, OffloadFramework, OffloadPolicy, offload_constants, offload_framework
from greentrain.offload.costs import ChunkCosts, chunk_costs
from greentrain.offload.dataflow import MIN_DEVICE_SLOTS
from greentrain.offload.host import host_costs
from greentrain.offload.model import (
    Evaluated,
    FloatArray,
    Setting,
    device_parts,
    evaluate,
    host_parts,
    rounds_for,
    steady_tokens_per_s,
)
from greentrain.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryParts:
    """Bytes on one side (device or host) by category."""

    parts: tuple[tuple[str, float], ...]

    @property
    def total_bytes(self) -> float:
        return sum(b for _, b in self.parts)

    def as_dict(self) -> dict[str, float]:
        return dict(self.parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimes:
    """One streamed layer over one round (all its chunks), averaged over the layers."""

    fwd_s: float
    bwd_s: float
    recompute_s: float
    h2d_bytes: float
    d2h_bytes: float
    exposed_s: float  # per round, all layers: time the compute waits on the link (fills included)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadPlan:
    framework: str
    model: str
    chip: str
    seq_len: int
    scenario_hash: str  # model, sequence length and micro-batch the plan was made for (the executor checks it)
    caps: OffloadCaps
    resident_layers: int
    prefetch_depth: int
    activation_slots: tuple[tuple[str, int], ...]  # ("device", n), ("input", n), ("attention", n), ("full", n)
    optimizer_on: str
    device: MemoryParts
    host: MemoryParts
    per_layer: LayerTimes
    chunk_tokens: int
    chunks_per_round: int
    num_rounds: int
    tokens_per_step: int
    step_time_s: float
    optimizer_time_s: float
    tokens_per_s: float  # steady state (model.steady_tokens_per_s): within share/rounds of tokens_per_step/step
    mfu: float
    hfu: float
    recompute_fraction: float  # recomputed FLOPs / hardware FLOPs
    bound: str  # compute | h2d | d2h | host (synchronous host gradient copies) | optimizer
    minimum_device_bytes: float
    minimum_host_bytes: float
    needs_sequence_chunking: bool
    host_copy_time_s: float = 0.0  # per step: the compute waits for synchronous host gradient copies (executor)

    def slots(self) -> dict[str, int]:
        return dict(self.activation_slots)


def scenario_hash(sc: Scenario, micro_batch: int) -> str:
    return _hash(sc.model, sc.workload.seq_len, micro_batch, sc.workload.precision)


@cache
def _hash(model: TransformerSpec, seq_len: int, micro_batch: int, precision: str) -> str:
    key = f"{model.to_dict()}|{seq_len}|{micro_batch}|{precision}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _micro_batch(sc: Scenario) -> int:
    return sc.strategy.micro_batch_size if sc.strategy is not None else 1


def make_setting(sc: Scenario, profile: OffloadFramework, policy: OffloadPolicy,
                 eff: Efficiency | None = None) -> Setting:
    eff = eff or efficiency_for(sc.cluster.chip.name, profile.framework)
    link = sc.cluster.host_link
    if link is None:
        raise ConfigError("cluster.host_link", None,
                          f"chip {sc.cluster.chip.name} has none in the catalog; give one (e.g. pcie4)")
    k = offload_constants()
    w = sc.workload
    cc = chunk_costs(sc.model, sc.cluster.chip, eff, profile, w.seq_len, _micro_batch(sc), w.precision,
                     w.optimizer, workload_grad_dtype(w, eff))
    beta = link.bytes_per_s * eff.host_link / policy.chips_per_host_link
    master = 2.0 if profile.state_dtype_bytes == 2 else 4.0  # the host AdamW's masters: bf16 state, else fp32
    host = host_costs(profile, grad_bytes_per_param=cc.grad_bytes_per_param, master_bytes=master,
                      threads=policy.host_threads or int(k["cpu"]["host_threads"]), pinned_bytes_per_s=beta)
    return Setting(cc=cc, beta_bytes_per_s=beta, optimizer_on=policy.optimizer_on or profile.optimizer_on,
                   host=host, reserved_bytes=eff.reserved_bytes, rounds_per_step=policy.rounds_per_step or 0,
                   loss_chunk_tokens=min(policy.loss_chunk_tokens, cc.chunk_tokens),
                   ends_host_copy=profile.ends_host_copy, grads_round_trip=profile.grads_round_trip,
                   grad_buffers=profile.grad_buffers, layer_major=profile.layer_major_rounds,
                   min_device_slots=MIN_DEVICE_SLOTS if cc.sticky else 0, lookahead=profile.lookahead,
                   # several rounds, or not fixed yet (the batch rule may choose several): the gradients stay
                   grads_stay_on_device=profile.grads_stay_when_accumulating and policy.rounds_per_step != 1)


def _levels(cc: ChunkCosts, home: FloatArray, u: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(input, attention, full) slot counts after ``u`` upgrades of ``home`` slots (attention first)."""
    full = np.clip(u - home, 0, None)
    att = np.where(u <= home, u, home - full)
    return home - att - full, att, full


def _upgrade_limit(cc: ChunkCosts, home: FloatArray, free_bytes: FloatArray) -> FloatArray:
    sb = cc.saved_bytes
    extra = free_bytes - home * sb["input"]
    da, df = sb["attention"] - sb["input"], sb["full"] - sb["attention"]
    stage_a = np.minimum(home, np.floor(np.maximum(extra, 0) / da))
    stage_b = np.minimum(home, np.floor(np.maximum(extra - home * da, 0) / df))
    return np.where(stage_a < home, stage_a, home + stage_b)


def _segment_grid(lo: FloatArray, hi: FloatArray, points: int) -> FloatArray:
    """Integer grid over [lo, hi] per row: (rows, points)."""
    t = np.linspace(0.0, 1.0, points)[None, :]
    return np.round(lo[:, None] + (hi - lo)[:, None] * t)


GRID_POINTS = 17  # per upgrade stage; then every integer within one grid step of the best point


@dataclass(frozen=True, slots=True, kw_only=True)
class _Candidates:
    r: FloatArray
    dev: FloatArray
    u: FloatArray
    home: FloatArray
    k: FloatArray  # prefetch depth: the ring holds k + 1 layers (0: ml_dataflow's single block, dataflow.py)
    ev: Evaluated | None = None  # its evaluation, when the search has it already


def _score(st: Setting, cand: _Candidates, share: float) -> tuple[FloatArray, FloatArray, FloatArray, Evaluated]:
    n_in, n_att, n_full = _levels(st.cc, cand.home, cand.u)
    ev = evaluate(st, cand.r, n_in, n_att, n_full, single=cand.k == 0, k=cand.k)
    return steady_tokens_per_s(st, ev, share), ev.h2d_s + ev.d2h_s, ev.host_bytes, ev


def _search(st: Setting, caps: OffloadCaps, policy: OffloadPolicy, k: int, share: float) -> _Candidates | None:
    """The best candidate (as 1-element arrays), or None when nothing fits."""
    cc = st.cc
    slots = cc.num_layers * cc.chunks_per_round
    r = np.arange(cc.num_layers + 1, dtype=np.float64)
    if policy.resident_layers is not None:
        r = np.array([float(min(policy.resident_layers, cc.num_layers))])
    kk = np.float64(k) + 0 * r
    fixed: FloatArray = np.asarray(sum(device_parts(st, r, kk, 0 * r).values()))
    if st.min_device_slots:  # ml_dataflow runs with one weight and one gradient block when no more fit (``main``:
        # num_full_layers_on_dev == 0 -> NUM_DEV_BLOCKS = NUM_DEV_GRAD_BLOCKS = 1)
        single: FloatArray = np.asarray(sum(device_parts(st, r, 0 * r, 0 * r).values()))
        kk = np.where(fixed <= caps.device_bytes, kk, 0.0)
        fixed = np.where(kk > 0, fixed, single)
    # fixed holds the framework's minimum device slots (ml_dataflow's two); more fill what is left
    extra = np.floor((caps.device_bytes - fixed) / cc.saved_bytes["device"])
    dev = np.clip(extra + st.min_device_slots, 0, slots)
    home = slots - dev
    base: FloatArray = np.asarray(sum(host_parts(st, r, 0 * r, 0 * r, 0 * r).values()))
    free = caps.host_bytes - base
    ok = (fixed <= caps.device_bytes) & (home * cc.saved_bytes["input"] <= free)
    if not ok.any():
        return None
    r, dev, home, free, kk = r[ok], dev[ok], home[ok], free[ok], kk[ok]
    umax = _upgrade_limit(cc, home, free)
    if not policy.downgrade:
        best = _best(st, _Candidates(r=r, dev=dev, u=umax, home=home, k=kk), share)
        return best
    segments = ((0 * umax, np.minimum(umax, home)), (np.minimum(umax, home), umax))
    coarse = np.concatenate([_segment_grid(lo, hi, GRID_POINTS) for lo, hi in segments], axis=1)
    tps = _score(st, _rows(r, dev, home, kk, coarse), share)[0].reshape(coarse.shape)
    fine = []
    for i, (lo, hi) in enumerate(segments):  # around each segment's best grid point: one grid step each way
        part = slice(i * GRID_POINTS, (i + 1) * GRID_POINTS)
        center = coarse[:, part][np.arange(len(r)), np.argmax(tps[:, part], axis=1)][:, None]
        step = np.ceil((hi - lo) / (GRID_POINTS - 1))[:, None]
        reach = int(step.max())
        window = np.arange(-reach, reach + 1)[None, :]
        fine.append(np.clip(center + np.clip(window, -step, step), lo[:, None], hi[:, None]))
    return _best(st, _rows(r, dev, home, kk, np.concatenate(fine, axis=1)), share)


def _rows(r: FloatArray, dev: FloatArray, home: FloatArray, k: FloatArray, u: FloatArray) -> _Candidates:
    """One candidate per (row, column) of ``u``: rows are resident-layer choices, columns upgrade counts."""
    width = u.shape[1]
    return _Candidates(r=np.repeat(r, width), dev=np.repeat(dev, width), u=u.ravel(), home=np.repeat(home, width),
                       k=np.repeat(k, width))


def _best(st: Setting, cand: _Candidates, share: float) -> _Candidates:
    tps, moved, host, ev = _score(st, cand, share)
    top = tps >= tps.max() * (1 - 1e-9)
    order = np.lexsort((host, moved, ~top))
    i = int(order[0])
    row = Evaluated(**{f.name: getattr(ev, f.name)[i:i + 1] for f in fields(Evaluated)})
    return _Candidates(r=cand.r[i:i + 1], dev=cand.dev[i:i + 1], u=cand.u[i:i + 1], home=cand.home[i:i + 1],
                       k=cand.k[i:i + 1], ev=row)


def _fixed_levels(st: Setting, policy: OffloadPolicy, k: int) -> _Candidates:
    """The policy's own slot counts: they must cover every (layer, chunk) slot and be upgrades in order."""
    cc = st.cc
    lv = policy.activation_levels or {}
    slots = cc.num_layers * cc.chunks_per_round
    total = sum(lv.get(x, 0) for x in ("device", "input", "attention", "full"))
    if total != slots:
        raise ConfigError("offload.activation_levels", lv, f"must add up to {slots} (layers x chunks per round)")
    r = float(policy.resident_layers or 0)
    home = float(slots - lv.get("device", 0))
    u = float(lv.get("attention", 0) + 2 * lv.get("full", 0)) if lv.get("input", 0) == 0 else \
        float(lv.get("attention", 0))
    if lv.get("input", 0) and lv.get("full", 0):
        raise ConfigError("offload.activation_levels", lv, "input and full slots together: upgrade all to "
                          "attention first")
    return _Candidates(r=np.array([r]), dev=np.array([float(lv.get("device", 0))]), u=np.array([u]),
                       home=np.array([home]), k=np.array([float(k)]))


def plan_offload(sc: Scenario, caps: OffloadCaps, policy: OffloadPolicy | None = None,
                 profile: OffloadFramework | None = None, *, eff: Efficiency | None = None) -> OffloadPlan:
    """The fastest placement under ``caps``. InfeasibleError names the minimum device and host memory."""
    policy = policy or OffloadPolicy()
    profile = profile or offload_framework("pytorch")
    st = make_setting(sc, profile, policy, eff)
    k = policy.prefetch_depth or 1
    share = float(offload_constants()["batch"]["optimizer_share"])
    chip = sc.cluster.chip
    if caps.device_bytes > chip.memory_bytes:
        raise ConfigError("offload.device_gib", round(units.bytes_to_gib(caps.device_bytes), 3),
                          f"must be <= {units.bytes_to_gib(chip.memory_bytes):g} ({chip.name} memory)")
    limit = sc.cluster.host_memory_bytes_per_node
    if limit and caps.host_bytes > limit:
        raise ConfigError("offload.host_gib", round(units.bytes_to_gib(caps.host_bytes), 3),
                          f"must be <= {units.bytes_to_gib(limit):g} (cluster.host_memory_gib_per_node)")
    best = _fixed_levels(st, policy, k) if policy.activation_levels else _search(st, caps, policy, k, share)
    if best is None:
        raise _infeasible(st, caps, policy, 0 if st.min_device_slots else k, sc)
    return _assemble(sc, st, caps, profile, best, share)


def minimum_bytes(st: Setting, caps: OffloadCaps, k: int) -> tuple[dict[str, float], dict[str, float]]:
    """Device minimum (nothing resident, no device activations) and the host minimum at this device cap."""
    z = np.zeros(1)
    cc = st.cc
    dev = {n: float(v[0]) for n, v in device_parts(st, z, z + k, z).items()}
    fixed = sum(dev.values())
    slots = cc.num_layers * cc.chunks_per_round
    on_dev = max(0.0, min(slots, math.floor((caps.device_bytes - fixed) / cc.saved_bytes["device"])
                          + st.min_device_slots))
    host = {n: float(v[0]) for n, v in host_parts(st, z, z + slots - on_dev, z, z).items()}
    return dev, host


def _size(nbytes: float) -> str:
    gib = units.bytes_to_gib(nbytes)
    return f"{gib:.1f} GiB" if gib >= 0.1 else f"{nbytes / 2**20:.2f} MiB"


def _infeasible(st: Setting, caps: OffloadCaps, policy: OffloadPolicy, k: int, sc: Scenario) -> InfeasibleError:
    dev, host = minimum_bytes(st, caps, k)
    need_d, need_h = sum(dev.values()), sum(host.values())
    parts_d = ", ".join(f"{n} {_size(b)}" for n, b in dev.items() if b)
    parts_h = ", ".join(f"{n} {_size(b)}" for n, b in host.items() if b)
    if need_d > caps.device_bytes:
        short, knob = need_d - caps.device_bytes, f"raise device_gib to >= {_size(need_d)}, or shorten seq_len"
    else:
        short = need_h - caps.host_bytes
        knob = f"raise host_gib to >= {_size(need_h)} (or device_gib, which keeps activations off the host)"
    return InfeasibleError(
        f"{sc.model.name} at seq_len {sc.workload.seq_len} does not fit device {_size(caps.device_bytes)} / "
        f"host {_size(caps.host_bytes)}: minimum device {_size(need_d)} ({parts_d}); minimum host "
        f"{_size(need_h)} ({parts_h}); {knob}", shortfall_bytes=short)


def _assemble(sc: Scenario, st: Setting, caps: OffloadCaps, profile: OffloadFramework, best: _Candidates,
              share: float) -> OffloadPlan:
    cc = st.cc
    k = int(best.k[0])
    n_in, n_att, n_full = _levels(cc, best.home, best.u)
    ev = best.ev or evaluate(st, best.r, n_in, n_att, n_full, single=best.k == 0, k=best.k)
    rounds = float(rounds_for(ev.round_s, ev.optimizer_s, share, st.rounds_per_step)[0])
    step = rounds * float(ev.round_s[0]) + float(ev.optimizer_s[0])
    peak = sc.cluster.chip.peak_flop_per_s(sc.workload.precision)
    model_flop = rounds * cc.chunks_per_round * cc.model_flop_per_chunk
    rec_flop = rounds * float(ev.recompute_flop[0])
    dev = device_parts(st, best.r, best.r * 0 + k, best.dev, (n_in, n_att, n_full))
    host = host_parts(st, best.r, n_in, n_att, n_full)
    L = cc.num_layers
    acts = float((n_in * cc.saved_bytes["input"] + n_att * cc.saved_bytes["attention"]
                  + n_full * cc.saved_bytes["full"])[0]) / L
    streamed = float(best.r[0]) < L
    w_bytes = cc.layer_params * cc.weight_bytes_per_param if streamed else 0.0
    g_bytes = cc.layer_params * cc.grad_bytes_per_param if streamed else 0.0
    opt = float(ev.optimizer_s[0])
    busy = {"compute": float(ev.compute_s[0]), "h2d": float(ev.h2d_s[0]), "d2h": float(ev.d2h_s[0]),
            "host": float(ev.host_s[0])}
    bound = "optimizer" if opt > rounds * float(ev.round_s[0]) else max(busy, key=lambda x: busy[x])
    mins = minimum_bytes(st, caps, 0 if st.min_device_slots else k)
    slots = (("device", int(best.dev[0])), ("input", int(n_in[0])), ("attention", int(n_att[0])),
             ("full", int(n_full[0])))
    return OffloadPlan(
        framework=profile.name, model=sc.model.name, chip=sc.cluster.chip.name, seq_len=sc.workload.seq_len,
        scenario_hash=scenario_hash(sc, _micro_batch(sc)), caps=caps, resident_layers=int(best.r[0]),
        prefetch_depth=k, activation_slots=slots, optimizer_on=st.optimizer_on,
        device=MemoryParts(parts=tuple((n, float(v[0])) for n, v in dev.items())),
        host=MemoryParts(parts=tuple((n, float(v[0])) for n, v in host.items())),
        per_layer=LayerTimes(fwd_s=cc.chunks_per_round * cc.fwd_s, bwd_s=cc.chunks_per_round * cc.bwd_s,
                             recompute_s=float(ev.recompute_s[0]) / L,
                             h2d_bytes=w_bytes * 2 + acts + (g_bytes if st.grads_round_trip else 0.0),
                             d2h_bytes=acts + g_bytes, exposed_s=float(ev.exposed_s[0])),
        chunk_tokens=cc.chunk_tokens, chunks_per_round=cc.chunks_per_round, num_rounds=int(rounds),
        tokens_per_step=int(rounds * cc.tokens_per_round), step_time_s=step, optimizer_time_s=opt,
        tokens_per_s=float(steady_tokens_per_s(st, ev, share)[0]), mfu=model_flop / (step * peak),
        hfu=(model_flop + rec_flop) / (step * peak),
        recompute_fraction=rec_flop / (model_flop + rec_flop), bound=bound,
        minimum_device_bytes=sum(v for v in mins[0].values()), minimum_host_bytes=sum(v for v in mins[1].values()),
        needs_sequence_chunking=cc.chunks_per_round > 1, host_copy_time_s=rounds * float(ev.host_s[0]))
