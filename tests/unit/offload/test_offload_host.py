"""The host side of a host optimizer (offload/host.py, issue 24): greentrain's executor waits for its synchronous
pageable gradient copies and runs clipping and a single-tensor AdamW after the backward; a run's own micro-batch
count fixes the rounds per step; the plan of `offload train` counts the untied head the executor builds."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.model.load import load_model
from greentrain.offload.config import OffloadCaps, OffloadPolicy, offload_constants, offload_framework, stock_executor
from greentrain.offload.host import host_costs
from greentrain.offload.launch import make_plan
from greentrain.offload.plan import plan_offload
from greentrain.offload.simulate import simulate_plan
from greentrain.scenario import Scenario, scenario_from_dict

K = offload_constants()
CAPS = OffloadCaps.from_gib(device_gib=120, host_gib=48)


def _sc(tied: bool = False) -> Scenario:
    model = dataclasses.replace(load_model("llama3.2-1b"), tied_embeddings=tied)
    return scenario_from_dict({"model": model.to_dict(), "cluster": {"chip": "h200", "num_chips": 1},
                               "workload": {"seq_len": 8192, "global_batch_size": 2, "precision": "bf16"}})


def test_executor_rates_follow_the_master_dtype_and_the_threads() -> None:
    prof = offload_framework("pytorch", "bf16")
    one = host_costs(prof, grad_bytes_per_param=2, master_bytes=2, threads=1, pinned_bytes_per_s=50e9)
    many = host_costs(prof, grad_bytes_per_param=2, master_bytes=2, threads=16, pinned_bytes_per_s=50e9)
    fp32 = host_costs(prof, grad_bytes_per_param=4, master_bytes=4, threads=1, pinned_bytes_per_s=50e9)
    ex = K["cpu"]["executor"]
    assert not one.grads_on_link and not one.overlapped
    assert one.optimizer_s_per_param == pytest.approx(1 / float(ex["bf16"]["adam_params_per_s_per_thread"])
                                                      + 1 / float(ex["bf16"]["clip_params_per_s_per_thread"]))
    assert many.optimizer_s_per_param == pytest.approx(one.optimizer_s_per_param / 16)
    assert fp32.optimizer_s_per_param > one.optimizer_s_per_param  # fp32 AdamW moves twice the bytes
    pageable = float(K["link"]["pageable_d2h_bytes_per_s"])
    assert one.grad_copy_s_per_param == pytest.approx(
        2 / pageable + 1 / float(ex["bf16"]["accumulate_params_per_s_per_thread"]))
    slow_link = host_costs(prof, grad_bytes_per_param=2, master_bytes=2, threads=1, pinned_bytes_per_s=1e9)
    assert slow_link.grad_copy_s_per_param > one.grad_copy_s_per_param  # pageable never beats pinned
    stock = host_costs(stock_executor("torchao"), grad_bytes_per_param=2, master_bytes=2, threads=8,
                       pinned_bytes_per_s=50e9)
    assert stock.overlapped and stock.adam_params_per_s == pytest.approx(
        8 * float(K["cpu"]["adam_fused_params_per_s_per_thread"]))


def test_bad_host_knobs_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"offload\.host_threads"):
        OffloadPolicy(host_threads=0)
    with pytest.raises(ConfigError, match=r"offload\.rounds_per_step"):
        OffloadPolicy(rounds_per_step=0)
    with pytest.raises(ConfigError, match=r"offload\.host_side"):
        host_costs(dataclasses.replace(offload_framework("pytorch"), host_side="gpu"), grad_bytes_per_param=2,
                   master_bytes=2, threads=1, pinned_bytes_per_s=1e9)


def test_the_h200_run_is_priced_step_by_step() -> None:
    """Session 8's run (16 resident layers, 2 micro-batches, 16 host threads): the step is the two rounds, each
    waiting for every gradient's pageable copy, then clipping, AdamW and the upload, one after the other."""
    policy = OffloadPolicy(resident_layers=16, rounds_per_step=2, host_threads=16)
    plan = plan_offload(_sc(), CAPS, policy, offload_framework("pytorch", "bf16"), eff=efficiency_for("h200", "ddp"))
    spec = _sc().model
    params = spec.num_params()
    host = host_costs(offload_framework("pytorch", "bf16"), grad_bytes_per_param=2, master_bytes=2, threads=16,
                      pinned_bytes_per_s=1e12)
    link = _sc().cluster.host_link
    assert link is not None
    beta = link.bytes_per_s * efficiency_for("h200", "ddp").host_link
    assert plan.num_rounds == 2 and plan.tokens_per_step == 2 * 8192
    assert plan.host_copy_time_s == pytest.approx(2 * params * host.grad_copy_s_per_param, rel=1e-9)
    assert plan.optimizer_time_s == pytest.approx(params * host.optimizer_s_per_param + params * 2 / beta, rel=0.01)
    assert plan.tokens_per_s == pytest.approx(plan.tokens_per_step / plan.step_time_s, rel=1e-9)
    assert plan.bound == "optimizer"  # the host AdamW is longer than both rounds
    # the event engine runs the same schedule
    sim = simulate_plan(_sc(), plan, offload_framework("pytorch", "bf16"), policy, eff=efficiency_for("h200", "ddp"))
    assert sim.step_time_s == pytest.approx(plan.step_time_s, rel=0.002)


def test_train_plans_the_untied_head_and_the_runs_micro_batches() -> None:
    """offload/llama.py builds the head as its own matrix: Llama 3.2 1B's 262.7 M more parameters, whose bf16
    state (8 bytes each) is what the H200 run's host held over the tied plan (11.16 against 9.21 GiB)."""
    plan = make_plan("llama3.2-1b", CAPS, 8192, 3, "h200", "cuda", host_threads=16)[1]
    tied = plan_offload(_sc(tied=True), CAPS, OffloadPolicy(rounds_per_step=3, host_threads=16),
                        offload_framework("pytorch", "bf16"), eff=efficiency_for("h200", "ddp"))
    table = 128256 * 2048
    assert plan.num_rounds == 3
    assert plan.host.total_bytes - tied.host.total_bytes == pytest.approx(8 * table, rel=1e-9)
    more = make_plan("llama3.2-1b", CAPS, 8192, 3, "h200", "cuda", host_threads=32)[1]
    assert more.optimizer_time_s < plan.optimizer_time_s
