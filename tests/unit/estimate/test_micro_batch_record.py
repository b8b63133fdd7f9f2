"""estimate_micro_batch: the record `simulate step` runs is estimate_step's own micro-batch, split into passes."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.estimate.efficiency import PARALLEL_AXES, efficiency_for
from greentrain.estimate.step import estimate_micro_batch, estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario, scenario_from_dict


def _scenario(strategy: Strategy, chips: int = 16) -> Scenario:
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": chips},
                             "workload": {"global_batch_size": 32, "seq_len": 4096}})
    return dataclasses.replace(sc, strategy=strategy)


@pytest.mark.parametrize(("strategy", "framework"), [
    (Strategy(dp=4, tp=4, zero=1), "megatron"), (Strategy(dp=2, tp=4, pp=2, recompute="full"), "megatron"),
    (Strategy(dp=2, tp=2, pp=4, vpp=2, sp=True), "megatron"), (Strategy(dp=2, tp=4, pp=2, recompute="full"), "ddp"),
    (Strategy(dp=2, tp=2, pp=4, vpp=2, sp=True), "ddp"), (Strategy(dp=8, tp=2, zero=3), "megatron"),
    (Strategy(dp=8, tp=2, zero=3, recompute="selective"), "torchtitan"), (Strategy(dp=4, tp=4, zero=2), "torchtitan")])
def test_the_record_adds_up_to_the_estimate(strategy: Strategy, framework: str) -> None:
    eff = efficiency_for("h100-sxm", framework=framework)
    if framework == "ddp":  # DDP's 25 MiB gradient buckets under tp and pp (plain DDP has neither: lifted here)
        eff = dataclasses.replace(eff, parallelisms=PARALLEL_AXES)
    sc = _scenario(strategy)
    est, t = estimate_step(sc, eff=eff), estimate_micro_batch(sc, eff=eff)
    m = est.num_micro_batches
    assert (t.num_micro_batches, t.schedule, t.pp, t.vpp) == (m, strategy.schedule, strategy.pp, strategy.vpp)
    assert t.step_s == est.step_time_s and t.optimizer_s == est.optimizer_time_s
    in_layer = est.tp_comm_time_s + est.cp_comm_time_s + est.ep_comm_time_s
    assert m * (t.forward_s + t.backward_s) == pytest.approx(
        est.compute_time_s + est.grad_accum_time_s + in_layer + est.host_wait_time_s, rel=1e-12)
    assert t.forward_s > est.micro_batch_forward_s  # it holds the forward's pass of the collectives
    assert m * t.pp_send_s == pytest.approx(est.pp_comm_time_s, rel=1e-12)
    if strategy.zero == 3:  # the gathers are not events: the estimate's exposed DP time follows the pipeline
        assert t.dp_reduce_s == 0.0 and t.dp_tail_s == est.dp_comm_time_s
    else:  # with no backward to hide behind, the reduction is at least what the estimate leaves exposed
        assert t.dp_tail_s == 0.0 and t.dp_reduce_s >= est.dp_comm_time_s > 0.0
    if eff.dp_bucket_per_layer:  # one bucket per layer of the slowest stage (llama3-8b: 32 layers)
        assert t.grad_bytes / t.bucket_bytes == pytest.approx(round(t.grad_bytes / t.bucket_bytes))
        assert 32 / strategy.pp <= t.grad_bytes / t.bucket_bytes <= 32 / strategy.pp + 1
    else:  # the framework's bucket, or 0: all gradients at once
        assert t.bucket_bytes == eff.dp_bucket_bytes and t.grad_bytes > 0
