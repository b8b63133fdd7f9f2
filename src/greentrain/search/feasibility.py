"""Why nothing was found, and how many chips would do: the search's infeasibility messages.

``fits``: whether any layout of a chip count fits in memory (the memory-lightest choices of every mesh
suffice). ``min_chips_to_fit``: the smallest valid count above the scenario's that fits. ``layout_counts``:
the nearest counts below and above that admit any dp x tp x pp x cp layout at all (divisibility only).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence

from greentrain.estimate.efficiency import PARALLEL_AXES, Efficiency, Profile
from greentrain.estimate.vector import estimate_steps
from greentrain.hardware.cluster import valid_chip_count
from greentrain.scenario import Scenario
from greentrain.search.space import LIGHTEST, SearchSpace, meshes, table

MAX_PROBES = 16  # fits() calls when scanning between a failing and a fitting count


def with_chips(sc: Scenario, n: int) -> Scenario:
    return sc if n == sc.cluster.num_chips else dataclasses.replace(
        sc, cluster=dataclasses.replace(sc.cluster, num_chips=n))


def _round_up(n: int, per_node: int) -> int:
    return n if n <= per_node else -(-n // per_node) * per_node


def framework_space(space: SearchSpace, eff: Efficiency) -> SearchSpace | None:
    """``space`` within what the framework runs: its ZeRO stages, optimizer and activation offload only where it
    has them, and degree 1 on every axis it has no parallelism for (None: none of the ZeRO stages asked for, or
    a pin it cannot run)."""
    zero = tuple(z for z in space.zero if z in eff.zero_stages)
    offload = tuple(o for o in space.offload if eff.optimizer_offload or not o)
    if not zero or not offload or eff.lacks(tp=space.tp, pp=space.pp, cp=space.cp, ep=space.ep):
        return None
    one = {axis: 1 if axis not in eff.parallelisms else getattr(space, axis) for axis in PARALLEL_AXES}
    acts = space.offload_activations if eff.activation_offload else (0,)  # () on: activation_offloads' default
    return dataclasses.replace(space, zero=zero, offload=offload, offload_activations=acts, tp=one["tp"],
                               pp=one["pp"], cp=one["cp"], ep=one["ep"])


def lightest(eff: Efficiency | None) -> SearchSpace:
    """LIGHTEST within what the framework runs: its highest ZeRO stage, the optimizer offloaded if it can."""
    if eff is None:
        return LIGHTEST
    space = framework_space(dataclasses.replace(LIGHTEST, zero=(max(eff.zero_stages),),
                                                offload=(eff.optimizer_offload,)), eff)
    assert space is not None  # its own stage and offload
    return space


def fits(sc: Scenario, num_chips: int, eff: Efficiency | None = None) -> bool:
    """Whether any strategy fits on ``num_chips`` chips: the memory-lightest choices of every mesh suffice
    (ZeRO-3, full recomputation, micro-batch 1, offloaded optimizer use the least device memory), within what
    the framework of ``eff`` runs (None: the default framework's efficiency, every choice)."""
    sc = with_chips(sc, num_chips)
    return len(estimate_steps(sc, table(sc, lightest(eff)), eff=eff).index) > 0


def min_chips_to_fit(sc: Scenario, limit: int = 1 << 20, eff: Efficiency | None = None) -> int | None:
    """The smallest valid chip count above the scenario's that fits (None up to ``limit``): doubling finds a
    count that fits; the valid counts between the last failure and it are then tried in order, at most
    MAX_PROBES of them (evenly spaced when there are more: the answer is then within 1/MAX_PROBES)."""
    n, per_node = sc.cluster.num_chips, sc.cluster.chips_per_node
    lo, hi = n, _round_up(2 * n, per_node)
    while hi <= limit and not fits(sc, hi, eff):
        lo, hi = hi, _round_up(2 * hi, per_node)
    if hi > limit:
        return None
    between = [c for c in range(lo + 1, hi) if valid_chip_count(c, per_node)] if hi - lo <= 4096 else \
        list(range(_round_up(lo + 1, per_node), hi, per_node))
    step = max(1, -(-len(between) // MAX_PROBES))
    return next((c for c in between[step - 1::step] if fits(sc, c, eff)), hi)


def layout_counts(sc: Scenario, reach: int = 64, eff: Efficiency | None = None) -> tuple[int | None, int | None]:
    """The nearest valid chip counts below and above the scenario's (within ``reach`` of the valid counts on
    each side) that admit any parallel layout of the model and batch (on the axes the framework of ``eff`` runs)."""
    n, per_node = sc.cluster.num_chips, sc.cluster.chips_per_node
    space = SearchSpace(interleave=False)
    space = (framework_space(space, eff) or space) if eff is not None else space

    def ok(c: int) -> bool:
        return next(meshes(with_chips(sc, c), space), None) is not None

    below = list(itertools.islice((c for c in range(n - 1, 0, -1) if valid_chip_count(c, per_node)), reach))
    above = list(itertools.islice(_valid_above(n, per_node), reach))
    return next((c for c in below if ok(c)), None), next((c for c in above if ok(c)), None)


def _valid_above(n: int, per_node: int) -> Iterator[int]:
    c = n + 1
    while True:
        c = _round_up(c, per_node)
        yield c
        c += 1 if c < per_node else per_node


def no_layout_message(sc: Scenario, eff: Efficiency | None = None) -> str:
    """No dp x tp x pp x cp split of the chip count (on the axes the framework of ``eff`` runs) passes
    check_divisibility: say what must divide."""
    m, w = sc.model, sc.workload
    below, above = layout_counts(sc, eff=eff)
    axes = "" if eff is None or eff.parallelisms == PARALLEL_AXES else \
        f" (the {eff.framework} framework runs {', '.join(eff.parallelisms) or 'data parallelism only'})"
    near = " or ".join(str(c) for c in (below, above) if c is not None)
    heads = f"{m.num_heads} attention heads, " if m.num_heads else ""
    experts = f"{m.num_experts} experts, " if m.is_moe else ""
    return (f"no parallel layout of {sc.cluster.num_chips} x {sc.cluster.chip.name} divides {m.name} "
            f"(global batch {w.global_batch_size}, {m.total_layers} layers, {heads}{experts}sequence {w.seq_len})"
            f": dp must divide the batch, tp the heads, pp at most the layers{axes}"
            + (f"; the nearest counts that do: {near}" if near else ""))


def nothing_fits_message(scenarios: Sequence[Scenario], units_: Sequence[Scenario], total: int,
                         profile: Profile | None = None) -> str:
    """Every strategy is infeasible (no constraint given): per chip type, why and how many chips would do under
    the framework of ``profile`` (None: any choice, the default framework)."""
    if total == 0:
        return "; ".join(no_layout_message(u, profile.for_chip(u.cluster.chip.name) if profile else None)
                         for u in units_)
    parts = []
    for sc in scenarios:
        top = max(u.cluster.num_chips for u in units_ if u.cluster.chip.name == sc.cluster.chip.name)
        need = min_chips_to_fit(with_chips(sc, top), eff=profile.for_chip(sc.cluster.chip.name) if profile else None)
        where = f"{top} x {sc.cluster.chip.name}"
        parts.append(f"{where}: smallest count that fits is {need}" if need else f"{where}: no count up to 2^20 fits")
    return f"none of the {total:,} strategies fits {scenarios[0].model.name}; " + "; ".join(parts)
