"""`simulate step`: schedules, hand-computed pipelines, stragglers, and agreement with `greentrain plan`."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.cli.main import main
from greentrain.parallel.schedules import implied_schedule
from greentrain.sim.cluster import StepCosts, StepOptions, simulate_costs
from greentrain.sim.trace import Trace


def costs(pp: int, m: int, f: float, b: float, *, vpp: int = 1, schedule: str = "", send: float = 0.0,
          dp: float = 0.0) -> StepCosts:
    return StepCosts(pp=pp, vpp=vpp, num_micro_batches=m, schedule=schedule or implied_schedule(vpp).name,
                     forward_s=f, backward_s=b, send_s=send, pp_crosses_nodes=True, dp_reduce_s=dp,
                     dp_crosses_nodes=True, dp_tail_s=0.0, grad_bytes=1e8, optimizer_s=0.0,
                     analytic_step_time_s=1.0)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_by_hand(schedule: str) -> None:
    # no communication: (m + pp - 1) (f + b) = (8 + 3) * 3 (Narayanan et al. 2021 §2.2)
    res = simulate_costs(costs(4, 8, 1.0, 2.0, schedule=schedule))
    assert res.step_time_s == pytest.approx(33.0)
    assert res.bubble_fraction == pytest.approx(1 - 24 / 33)


def test_interleaved_bubble_shrinks_by_vpp() -> None:
    # per device a micro-batch costs F = 2 x 0.5 and B = 2 x 1: (m + (pp - 1) / vpp) (F + B) = (4 + 1/2) * 3
    res = simulate_costs(costs(2, 4, 0.5, 1.0, vpp=2))
    assert res.step_time_s == pytest.approx(13.5)


def test_sends_block_the_sender_and_a_straggler_sets_the_pace() -> None:
    base = simulate_costs(costs(2, 1, 1.0, 2.0, send=0.25))
    assert base.step_time_s == pytest.approx(1 + 0.25 + 1 + 2 + 0.25 + 2)
    slow = simulate_costs(costs(4, 16, 1.0, 2.0), StepOptions(stragglers={2: 1.5}))
    assert slow.step_time_s == pytest.approx((16 + 3) * 3 + 16 * 3 * 0.5, rel=0.05)
    assert slow.step_time_s > simulate_costs(costs(4, 16, 1.0, 2.0)).step_time_s


def test_dp_buckets_overlap_the_last_backward_and_contend_with_sends(tmp_path) -> None:
    hidden = simulate_costs(costs(2, 4, 1.0, 2.0, dp=1.0))
    assert hidden.dp_exposed_s < 0.6  # mostly under the last backward (2 s)
    exposed = simulate_costs(costs(2, 4, 1.0, 2.0, dp=10.0))
    assert exposed.dp_exposed_s > 7.0
    trace = Trace()
    simulate_costs(costs(2, 4, 1.0, 2.0, send=0.1, dp=1.0), trace=trace)
    assert {"stage/0", "stage/1", "link/stage0.nic", "link/stage1.nic"} <= set(trace.tracks())


def _step_json(capsys: pytest.CaptureFixture[str], cmd: str, args: list[str]) -> dict:
    assert main([cmd, *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("args", [["--pp", "4", "--tp", "8", "--dp", "2"],
                                  ["--pp", "4", "--vpp", "2", "--tp", "8", "--dp", "2"],
                                  ["--pp", "2", "--tp", "4", "--dp", "8", "--recompute", "full"]])
def test_step_time_agrees_with_plan_within_one_percent(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    plan = _step_json(capsys, "plan", args)["step_time_s"]
    sim = _step_json(capsys, "simulate", ["step", *args])["step_time_s"]
    assert sim == pytest.approx(plan, rel=0.01)


@pytest.mark.parametrize(("args", "message"), [
    (["--straggler", "9=2"], "stage must be in [0, 3]"),
    (["--straggler", "two"], "must be STAGE=FACTOR"),
    (["--straggler", "1=-1"], "factor must be in [0.001, 10,000] x"),
    (["--straggler", "0=1e8"], "factor must be in [0.001, 10,000] x"),  # looped forever in the engine (issue 24)
    (["--link-slowdown", "1e12"], "--link-slowdown=1000000000000.0: must be in [0.001, 10,000] x"),
    (["--link-slowdown", "0"], "argument --link-slowdown: '0' must be > 0"),
    (["--link-slowdown", "inf"], "argument --link-slowdown: 'inf' must be a finite number"),
    (["--straggler", "1=2", "--straggler", "1=3"], "stage 1 is already given (1=2); give each stage once"),
])
def test_bad_step_options_are_one_line_exit_2(args: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "step", "--pp", "4", "--tp", "8", "--dp", "2", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 8), m=st.integers(1, 24), f=st.floats(0.1, 5.0), b=st.floats(0.1, 5.0),
       vpp=st.integers(1, 3), schedule=st.sampled_from(["gpipe", "1f1b"]))
def test_without_communication_the_simulator_equals_the_closed_form(pp: int, m: int, f: float, b: float,
                                                                     vpp: int, schedule: str) -> None:
    # (m + (pp - 1) / vpp) x (F + B) per device (Narayanan et al. 2021 §2.2); interleaving needs m % pp == 0
    if pp == 1:
        vpp = 1
    if vpp > 1:
        m = pp * max(1, m // pp)
    res = simulate_costs(costs(pp, m, f / vpp, b / vpp, vpp=vpp, schedule=schedule if vpp == 1 else ""))
    assert res.step_time_s == pytest.approx((m + (pp - 1) / vpp) * (f + b), rel=1e-9)


@pytest.mark.parametrize(("recompute", "mode", "forward_passes"), [
    ("none", "attention", 1 / 2), ("full", "attention", 1 / 3), ("selective", "layer-2", 1 / 2.5)])
def test_in_layer_communication_split_as_the_estimator_counts_it(recompute: str, mode: str,
                                                                 forward_passes: float) -> None:
    """The simulator's micro-batch is the estimator's: its forward and backward hold the in-layer (TP)
    communication the estimator counts, the forward one pass of them (estimate/recompute.in_layer_comm_passes:
    full recomputation and layer-N repeat the forward's collectives in the backward)."""
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.estimate.step import estimate_step
    from greentrain.parallel.strategy import Strategy
    from greentrain.scenario import scenario_from_dict
    from greentrain.sim.cluster import step_costs

    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096}})
    eff = efficiency_for("h100-sxm", selective_recompute=mode)
    sc = dataclasses.replace(sc, strategy=Strategy(dp=2, tp=4, recompute=recompute))
    est, c = estimate_step(sc, eff=eff), step_costs(sc, eff)
    m = est.num_micro_batches
    in_layer, host, accum = est.tp_comm_time_s / m, est.host_wait_time_s / m, est.grad_accum_time_s / m
    assert in_layer > 0
    assert c.forward_s == pytest.approx(est.micro_batch_forward_s + forward_passes * (in_layer + host), rel=1e-12)
    assert c.forward_s + c.backward_s == pytest.approx(
        est.micro_batch_forward_s + est.micro_batch_backward_s + accum + in_layer + host, rel=1e-12)
