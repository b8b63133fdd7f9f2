"""Routed experts' gradients and optimizer state over the expert data-parallel group (estimate/compose.py
expert_dp_group, dp_exposed_s, step_optimizer_s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.calibrate.runs import read_runs
from greentrain.estimate.comm import Collective, collective_s
from greentrain.estimate.compose import dp_exposed_s, expert_dp_group
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.stage import stage_costs
from greentrain.estimate.state_dtypes import workload_grad_bytes
from greentrain.estimate.step import estimate_step
from greentrain.estimate.step_terms import dp_sync_s, optimizer_s
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict


def _gpt_oss(num_chips: int = 64):  # type: ignore[no-untyped-def]
    return scenario_from_dict({"model": "gpt-oss-120b", "cluster": {"chip": "b200", "num_chips": num_chips},
                               "workload": {"global_batch_size": 20 * num_chips, "seq_len": 4096, "num_steps": 1,
                                            "precision": "bf16"}})


@pytest.mark.parametrize(("dp", "tp", "ep", "etp", "cp", "group"), [
    (64, 1, 8, 1, 1, 8),  # GPT-OSS-120B on 64 B200 (Megatron-Bridge 26.04): one expert replica per node
    (8, 1, 8, 1, 1, 1),  # Qwen3-30B-A3B on 8 B200: every expert once, nothing to reduce
    (16, 2, 32, 1, 1, 1),  # Qwen3-235B-A22B on 256 H100: ep folds tp in
    (64, 2, 64, 1, 1, 2),  # DeepSeek-V3 on 1,024 H100
    (4, 2, 2, 2, 2, 4),  # etp as tp: dp x cp x tp / (ep x etp)
])
def test_the_expert_data_parallel_group_is_the_stage_ranks_over_an_expert_group(
        dp: int, tp: int, ep: int, etp: int, cp: int, group: int) -> None:
    s = Strategy(dp=dp, tp=tp, ep=ep, etp=etp, cp=cp, sp=tp > 1)
    assert expert_dp_group(s) == group


def test_expert_gradients_reduce_over_one_rank_per_node_when_an_expert_group_fills_the_node() -> None:
    """GPT-OSS-120B on 64 B200 at ep 8: a rank's 14.3 B expert gradients reduce with the 7 ranks holding the same
    experts on the other nodes, all of it over its own NIC: far more than over a 64-rank group with 8 per node."""
    sc, eff = _gpt_oss(), efficiency_for("b200", "nemo")
    s = Strategy(dp=64, ep=8, micro_batch_size=4, zero=1)
    est = estimate_step(sc, s, eff=eff, check_fit=False)
    cl = sc.cluster
    expert_grad_bytes = 0.9 * 2.0 * 16 * 3 * 2880**2 * 36  # bf16, 16 local experts of 3 2880^2 matrices, 36 layers
    one_per_node = collective_s(Collective.REDUCE_SCATTER, 8, 1, expert_grad_bytes, cl, eff)
    assert one_per_node == pytest.approx(expert_grad_bytes * 7 / 8 / (cl.inter_node.bytes_per_s * eff.inter_node_link),
                                         rel=0.01)
    # the reduction overlaps at most the last micro-batch's backward; the weights' gather follows the step
    assert est.dp_comm_time_s > one_per_node - est.micro_batch_backward_s + 0.9 * one_per_node
    # the experts' state shards over 8 ranks, not 64: the optimizer step updates ~7x what a 64-way shard would
    local = 16.4e9  # 14.3 B of experts (16 of 128) and 2.1 B dense parameters on each rank
    all_over_64 = optimizer_s(params=local, zero=1, shard=64, offload=False, wb=2.0, gb=2.0, ob=8.0, cl=cl, eff=eff)
    assert est.optimizer_time_s - eff.step_overhead_s > 5 * all_over_64


def test_experts_held_once_need_no_gradient_reduction() -> None:
    """ep = every rank of the stage: the expert data-parallel group is one rank, only the dense part reduces."""
    sc, eff = _gpt_oss(8), efficiency_for("b200", "nemo")
    one_copy = estimate_step(sc, Strategy(dp=8, ep=8, micro_batch_size=4, zero=1), eff=eff, check_fit=False)
    replicated = estimate_step(sc, Strategy(dp=8, ep=4, micro_batch_size=4, zero=1), eff=eff, check_fit=False)
    # the dense 2.1 B reduce either way; the 14.3 B (ep 8) or 28.7 B (ep 4, two copies) of experts only at ep 4
    assert 0 < one_copy.dp_comm_time_s < 0.25 * replicated.dp_comm_time_s


def test_a_dense_model_reduces_its_whole_gradient_over_the_data_parallel_group() -> None:
    sc = scenario_from_dict({"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}})
    eff, s = efficiency_for("h100-sxm", "nemo"), Strategy(dp=16, micro_batch_size=1, zero=1)
    w, cl = sc.workload, sc.cluster
    st = stage_costs(sc, s, model_ops(sc.model, 1, w.seq_len, w.activation_bytes), eff)
    grads = workload_grad_bytes(st.trainable, w, eff)
    whole = dp_sync_s(zero=1, dp_group=16, dp_per_node=8, grad_bytes=grads,
                      weight_bytes=st.params * 2.0, updated_weight_bytes=st.trainable * 2.0, layers=st.layers,
                      backward_s=st.bwd_s + st.recompute_s, micro_batch_s=st.fwd_s + st.bwd_s + st.recompute_s,
                      num_micro=4, cl=cl, eff=eff, params=st.trainable, dp=16)
    assert whole > 0
    assert dp_exposed_s(sc, s, st, eff, 4) == pytest.approx(whole, rel=1e-12)


@pytest.mark.parametrize("framework", ["nemo", "nemo-a2a-overlap", "nemo-deepep", "nemo-deepep-a2a-overlap",
                                       "nemo-full-graph"])
def test_a_megatron_bridge_moe_row_without_etp_runs_its_experts_at_etp_1(tmp_path: Path, framework: str) -> None:
    """Megatron-Bridge's MoE recipes set expert_tensor_parallel_size 1 whatever their dispatcher (the nemo profiles'
    default_etp); a row naming the dispatcher's framework variant takes it too."""
    path = tmp_path / "runs.csv"
    path.write_text("run_id,framework,model,chip,num_chips,seq_len,global_batch,micro_batch,dp,tp,pp,ep,sp\n"
                    f"r,{framework},qwen3-30b-a3b,h100-sxm,16,4096,64,1,8,2,1,16,true\n", encoding="utf-8")
    (run,) = read_runs(path)
    assert run.strategy.expert_tp == 1
