"""Properties of the estimator (hypothesis): FLOPs do not depend on the strategy; more bandwidth or more
FLOP/s is never slower; memory per device never grows with more tp, and model states never with more pp."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greentrain.errors import InfeasibleError
from greentrain.estimate.step import StepEstimate, estimate_step
from greentrain.footprint.site import Site
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, build_cluster
from greentrain.workload import Workload

MODELS = ["gpt3-175b", "llama3-8b", "megatron-22b"]
settings.register_profile("greentrain", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("greentrain")


def _scenario(model: str, chips: int, chip: str = "a100-80gb") -> Scenario:
    return Scenario(model=load_model(model), cluster=build_cluster(get_chip(chip), chips),
                    workload=Workload(global_batch_size=256, seq_len=2048), site=Site())


strategies = st.builds(
    lambda tp, pp, mb, rec, zero, flash: Strategy(dp=64 // (tp * pp), tp=tp, pp=pp, micro_batch_size=mb,
                                                  sp=tp > 1, recompute=rec, zero=zero, flash_attention=flash),
    tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4, 8]), mb=st.sampled_from([1, 2, 4]),
    rec=st.sampled_from(["none", "selective", "full"]), zero=st.sampled_from([0, 1, 2, 3]),
    flash=st.booleans())


def _est(sc: Scenario, s: Strategy) -> StepEstimate | None:
    try:
        return estimate_step(sc, s, check_fit=False)
    except InfeasibleError:
        return None


@given(model=st.sampled_from(MODELS), a=strategies, b=strategies)
def test_model_flops_do_not_depend_on_strategy(model: str, a: Strategy, b: Strategy) -> None:
    sc = _scenario(model, 64)
    ea, eb = _est(sc, a), _est(sc, b)
    if ea and eb:
        assert ea.model_flop_per_step == eb.model_flop_per_step


@given(model=st.sampled_from(MODELS), s=strategies, factor=st.floats(1.0, 10.0))
def test_more_bandwidth_or_flops_is_never_slower(model: str, s: Strategy, factor: float) -> None:
    sc = _scenario(model, 64)
    base = _est(sc, s)
    if base is None:
        return
    cl = sc.cluster
    intra = dataclasses.replace(cl.intra_node, bytes_per_s=cl.intra_node.bytes_per_s * factor)
    inter = dataclasses.replace(cl.inter_node, bytes_per_s=cl.inter_node.bytes_per_s * factor)
    faster_links = dataclasses.replace(cl, intra_node=intra, inter_node=inter)
    chip = cl.chip
    faster_chip = dataclasses.replace(cl, chip=dataclasses.replace(
        chip, peak_bf16_flop_per_s=chip.peak_bf16_flop_per_s * factor,
        memory_bytes_per_s=chip.memory_bytes_per_s * factor))
    for cluster in (faster_links, faster_chip):
        est = _est(dataclasses.replace(sc, cluster=cluster), s)
        assert est is not None
        assert est.step_time_s <= base.step_time_s * (1 + 1e-12)


@given(model=st.sampled_from(MODELS), s=strategies)
def test_memory_never_grows_with_more_tp(model: str, s: Strategy) -> None:
    if s.tp * 2 > 8 or s.dp % 2 or s.zero == 3:  # ZeRO-3 shards over dp, which shrinks as tp grows
        return
    sc = _scenario(model, 64)
    small, big = _est(sc, s), _est(sc, dataclasses.replace(s, tp=s.tp * 2, dp=s.dp // 2, sp=True))
    if small and big and s.sp:
        assert big.memory.total_bytes <= small.memory.total_bytes * (1 + 1e-12)


@given(model=st.sampled_from(MODELS), s=strategies)
def test_model_states_never_grow_with_more_pp(model: str, s: Strategy) -> None:
    """At the same dp (twice the chips), doubling pp never grows weights, gradients or optimizer states.
    (On the same chips dp halves instead, and with ZeRO the first stage's embedding is sharded over fewer
    ranks, so the states can grow; total activations can grow too: Korthikanti et al. §4.3 count
    8sbp + sbhp bytes of input ids and embedding dropout on the first stage.)"""
    small = _est(_scenario(model, s.num_chips), s)
    big = _est(_scenario(model, s.num_chips * 2), dataclasses.replace(s, pp=s.pp * 2))
    if small and big:
        def states(e: StepEstimate) -> float:
            return e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes
        assert states(big) <= states(small) * (1 + 1e-12)
