"""MoE layers as they run (estimate/moe.py) and fp8 recipes (estimate/fp8.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from greentrain.errors import ConfigError
from greentrain.estimate import fp8, moe, stage
from greentrain.estimate.compute import Sharding, compute_peaks, local_op
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict


def _cluster(num_chips: int = 32):  # type: ignore[no-untyped-def]
    return scenario_from_dict({"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": num_chips},
                               "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}}).cluster


def test_an_all_to_all_sends_its_node_share_over_nvlink_and_the_rest_over_the_network() -> None:
    cl, eff = _cluster(), efficiency_for("h100-sxm")
    buf = 1e9
    inside = moe.all_to_all_s(8, 8, buf, cl, eff)
    nv = cl.intra_node.latency_s + buf * 7 / 8 / (cl.intra_node.bytes_per_s * eff.intra_node_link)
    assert inside == pytest.approx(nv)
    across = moe.all_to_all_s(32, 8, buf, cl, eff)  # 24 of 32 peers on other nodes
    net = cl.inter_node.latency_s + buf * 24 / 32 / (cl.inter_node.bytes_per_s * eff.inter_node_link)
    assert across == pytest.approx(net)
    # fewer peers on the node: more of the buffer crosses the network
    assert moe.all_to_all_s(32, 4, buf, cl, eff) > across
    cols = moe.all_to_all_s(np.array([8.0, 32.0, 1.0]), np.array([8.0, 8.0, 1.0]), buf, cl, eff)
    assert cols == pytest.approx([inside, across, 0.0])


def test_sequence_parallel_ranks_dispatch_their_shard_and_overlap_hides_the_rest() -> None:
    cl, eff = _cluster(), efficiency_for("h100-sxm")
    kw = dict(tokens=8192.0, top_k=2, hidden=4096, e=2.0, ep=8, etp=1, compute_s=1e-3, cl=cl, eff=eff)
    none = moe.MoeProfile()
    full = moe.ep_pass_s(tp=2, sp=False, profile=none, **kw)
    shard = moe.ep_pass_s(tp=2, sp=True, profile=none, **kw)
    assert shard < 0.6 * full
    hidden = moe.ep_pass_s(tp=2, sp=True, profile=moe.MoeProfile(overlap="compute"), **kw)
    # the part behind the compute costs what a data-parallel collective beside it costs (the compute runs slower)
    x = eff.overlap_slowdown
    assert x > 0
    assert hidden == pytest.approx(max(0.0, shard - 1e-3) + min(shard, 1e-3) * x / (1 + x))


def test_expert_kernels_cost_per_local_expert_after_the_host_sync() -> None:
    p = moe.moe_profile(efficiency_for("", "megatron"))
    f16, b16 = moe.expert_kernels_s(local_experts=16, fp8=False, profile=p)
    f32, _ = moe.expert_kernels_s(local_experts=32, fp8=False, profile=p)
    f8, b8 = moe.expert_kernels_s(local_experts=16, fp8=True, profile=p)
    assert f32 - f16 == pytest.approx(16 * 2 * p.kernel_host_s)
    assert b16 > f16 and f8 > f16 and b8 > b16
    # Megatron Core's DeepEP and HybridEP dispatch size the received tokens on the host too (fused_a2a.py)
    deepep = moe.moe_profile(efficiency_for("", "nemo-deepep"))
    assert moe.expert_kernels_s(local_experts=16, fp8=True, profile=deepep) == (f8, b8)
    unsynced = moe.moe_profile(dataclasses.replace(efficiency_for("", "nemo-deepep"), moe_host_sync=False))
    assert moe.expert_kernels_s(local_experts=16, fp8=True, profile=unsynced) == (0.0, 0.0)


def test_a_moe_step_pays_its_expert_kernels() -> None:
    sc = scenario_from_dict({"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 1}})
    s = Strategy(dp=8, ep=8, zero=1, micro_batch_size=1)
    eff = efficiency_for("h100-sxm")
    base = estimate_step(sc, s, check_fit=False, eff=eff)
    moe._moe_profile.cache_clear()
    stage.clear_cache()  # the step's per-key costs, cached by their inputs' identities
    try:
        data = moe._data()
        saved = data["kernel_host_s"]
        data["kernel_host_s"] = 0.0
        free = estimate_step(sc, s, check_fit=False, eff=eff)
    finally:
        data["kernel_host_s"] = saved
        moe._moe_profile.cache_clear()
        stage.clear_cache()
    layers = sc.model.num_layers * base.num_micro_batches
    kernels = 1 * (2 + 4) + 2 * 10  # one local expert, bf16; fixed kernels both passes
    assert base.compute_time_s - free.compute_time_s == pytest.approx(layers * kernels * saved, rel=1e-6)


def test_experts_padded_to_a_capacity_pay_no_host_sync() -> None:
    """Megatron Core's dispatcher knows every split on the host when the experts are padded to a capacity
    (drop_and_pad: preprocess returns before any cuda_sync_point), so only dropless routing loses the run-ahead;
    at capacity factor 1 the experts compute the balanced share, the same FLOPs."""
    sc = scenario_from_dict({"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 4096, "num_steps": 1}})
    padded = dataclasses.replace(sc, model=dataclasses.replace(sc.model, capacity_factor=1.0))
    s = Strategy(dp=8, ep=8, zero=1, micro_batch_size=1)
    eff = efficiency_for("h100-sxm")
    dropless, capped = estimate_step(sc, s, check_fit=False, eff=eff), estimate_step(padded, s, check_fit=False,
                                                                                     eff=eff)
    host = moe.moe_profile(eff).kernel_host_s
    layers = sc.model.num_layers * dropless.num_micro_batches
    assert dropless.compute_time_s - capped.compute_time_s == pytest.approx(layers * (6 + 20) * host, rel=1e-6)
    assert dropless.model_flop_per_step == pytest.approx(capped.model_flop_per_step)


def test_fp8_gemms_run_at_the_chips_fp8_fraction_and_pay_their_casts() -> None:
    h100 = get_chip("h100-sxm")
    peaks = compute_peaks(h100, "fp8")
    assert peaks.matmul == pytest.approx(h100.peak_fp8_flop_per_s * 0.709 / 0.803)
    assert peaks.attention == h100.peak_bf16_flop_per_s  # the attention core stays bf16
    assert peaks.cast_bytes_per_elt == pytest.approx(6.0)  # tensorwise: read 2 x 2 B, write 2 x 1 B
    assert compute_peaks(h100, "bf16").cast_bytes_per_elt == 0.0
    assert fp8.gemm_ratio("no-such-chip") == 1.0
    assert fp8.recipe("mxfp8").bytes_per_element(2.0) == pytest.approx(4.0625)
    with pytest.raises(ConfigError, match=r"not a known fp8 recipe.*tensorwise"):
        fp8.recipe("tensorwize")


def test_an_fp8_step_is_not_twice_as_fast_as_bf16() -> None:
    d = {"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
         "workload": {"global_batch_size": 64, "seq_len": 8192, "num_steps": 1}}
    bf16 = scenario_from_dict(d)
    f8 = dataclasses.replace(bf16, workload=dataclasses.replace(bf16.workload, precision="fp8"))
    s = Strategy(dp=8, zero=1, micro_batch_size=1)
    t16 = estimate_step(bf16, s, check_fit=False).step_time_s
    t8 = estimate_step(f8, s, check_fit=False).step_time_s
    assert 0.55 * t16 < t8 < 0.9 * t16


def test_dispatchers_that_overlap_or_forward_through_nodes_expose_less() -> None:
    sc = scenario_from_dict({"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 32, "seq_len": 4096, "num_steps": 1}})
    s = Strategy(dp=16, ep=8, etp=1, zero=1, micro_batch_size=1)  # an expert group per node
    plain, overlap, deepep, both = (estimate_step(sc, s, check_fit=False, eff=efficiency_for("h100-sxm", fw))
                                    for fw in ("nemo", "nemo-a2a-overlap", "nemo-deepep", "nemo-deepep-a2a-overlap"))
    assert plain.ep_comm_time_s > overlap.ep_comm_time_s >= both.ep_comm_time_s
    assert deepep.ep_comm_time_s == pytest.approx(plain.ep_comm_time_s)  # inside a node: nothing to forward
    assert deepep.compute_time_s < plain.compute_time_s  # only the receiving rank permutes
    assert both.compute_time_s == pytest.approx(deepep.compute_time_s)
    wide = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                               "workload": {"global_batch_size": 32, "seq_len": 4096, "num_steps": 1}})
    across = Strategy(dp=16, ep=16, etp=1, zero=1, micro_batch_size=1)  # the group spans both nodes
    plain, deepep = (estimate_step(wide, across, check_fit=False, eff=efficiency_for("h100-sxm", fw))
                     for fw in ("nemo", "nemo-deepep"))
    assert deepep.ep_comm_time_s < plain.ep_comm_time_s  # a token crosses the network once per remote node


def test_a_rank_reads_the_weights_of_its_own_experts_only() -> None:
    """A GEMM's bytes are its local operands: under ep a rank holds count / ep experts, each with the rows of ep
    ranks; under cp every rank reads the whole weight (primitives.matmul counts both reads and the write)."""
    group = next(g for g in model_ops(load_model("gpt-oss-120b"), 1, 4096, 2.0).layers if g.moe)
    up = next(o for o in group.ops if o.name.endswith("experts.up"))
    width = up.bytes / (up.count * (up.m * up.k + up.k * up.n + up.m * up.n))
    assert width == pytest.approx(2.0)
    for ep in (1, 8, 64):
        rows, experts = up.m * ep, up.count / ep
        weights = width * experts * up.k * up.n
        assert local_op(up, Sharding(ep=ep)).bytes == pytest.approx(
            width * experts * (rows * up.k + rows * up.n) + weights)
    qkv = next(o for o in group.ops if o.name.endswith("attn.qkv"))
    halves = local_op(qkv, Sharding(cp=2))
    assert halves.bytes == pytest.approx(width * (qkv.m / 2 * (qkv.k + qkv.n) + qkv.k * qkv.n))
    assert halves.flop == pytest.approx(qkv.flop / 2)


def test_transformer_engine_keeps_fp8_gemm_inputs_in_one_byte() -> None:
    d = {"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
         "workload": {"global_batch_size": 8, "seq_len": 8192, "num_steps": 1}}
    bf16 = scenario_from_dict(d)
    f8 = dataclasses.replace(bf16, workload=dataclasses.replace(bf16.workload, precision="fp8"))
    def act(sc, fw):  # type: ignore[no-untyped-def]
        s = Strategy(dp=8, zero=3 if fw == "torchtitan" else 1, micro_batch_size=1)
        return estimate_step(sc, s, check_fit=False, eff=efficiency_for("h100-sxm", fw)).memory.activations_bytes

    m = bf16.model
    saved = m.num_layers * 8192 * (2 * m.hidden_size + m.attn_out_width + m.ffn_hidden_size)  # 1 byte each
    assert act(bf16, "nemo") - act(f8, "nemo") == pytest.approx(saved, rel=0.02)
    assert act(f8, "torchtitan") == pytest.approx(act(bf16, "torchtitan"))  # torchao keeps the bf16 input


def test_tensor_parallel_experts_gather_their_tokens() -> None:
    cl, eff = _cluster(), efficiency_for("h100-sxm")
    kw = dict(tokens=8192.0, top_k=2, hidden=4096, e=2.0, tp=4, sp=True, ep=2, compute_s=0.0, cl=cl, eff=eff,
              profile=moe.MoeProfile())
    folded, split = moe.ep_pass_s(etp=1, **kw), moe.ep_pass_s(etp=4, **kw)
    held = 8192 / 4 * 2 * 4096 * 2.0
    nv = cl.intra_node.bytes_per_s * eff.intra_node_link
    gather = 2 * (3 * cl.intra_node.latency_s + held * 4 * 3 / 4 / nv)  # all-gather + reduce-scatter over 4
    assert split - folded == pytest.approx(gather, rel=0.02)


def test_a_tensor_parallel_group_shares_its_experts_work_whatever_etp() -> None:
    from greentrain.estimate.compute import Sharding, local_op
    from greentrain.model.load import load_model
    from greentrain.model.ops import model_ops

    ops = model_ops(load_model("mixtral-8x7b"), 1, 4096, 2.0)
    moe_group = next(g for g in ops.layers if g.moe)
    up = next(op for op in moe_group.ops if op.expert and op.flop)
    act = next(op for op in moe_group.ops if op.expert and not op.flop)
    alone = local_op(up, Sharding(tp=1, ep=4, etp=1, sp=True))
    folded = local_op(up, Sharding(tp=2, ep=4, etp=1, sp=True))  # each tp rank: its own sequence shard
    split = local_op(up, Sharding(tp=2, ep=4, etp=2, sp=True))  # each tp rank: half of each expert matrix
    assert folded.flop == pytest.approx(alone.flop / 2) == pytest.approx(split.flop)
    assert folded.m == pytest.approx(alone.m / 2) and split.n == pytest.approx(alone.n / 2)
    assert local_op(act, Sharding(tp=2, ep=4, etp=1, sp=True)).bytes == pytest.approx(
        local_op(act, Sharding(tp=1, ep=4, etp=1, sp=True)).bytes / 2)


def test_a_single_grouped_kernel_does_not_grow_with_the_local_experts() -> None:
    titan = moe.moe_profile(efficiency_for("", "torchtitan"))
    assert titan.grouped_gemm == "one" and moe.moe_profile(efficiency_for("", "nemo")).grouped_gemm == "per_expert"
    assert moe.expert_kernels_s(local_experts=32, fp8=False, profile=titan) == \
        moe.expert_kernels_s(local_experts=1, fp8=False, profile=titan)
    assert moe.expert_kernels_s(local_experts=32, fp8=False, profile=moe.moe_profile(efficiency_for("", "nemo")))[0] > \
        moe.expert_kernels_s(local_experts=32, fp8=False, profile=titan)[0]


def test_forwarding_sends_a_token_once_per_remote_node() -> None:
    # 32 ranks on 4 nodes of 8, top-8: a token reaches 3 (1 - (3/4)^8) = 2.70 remote nodes on average where an
    # all-to-all sends 8 x 24/32 = 6 copies over the network (DeepEP's NVLink -> RDMA forwarding)
    nv, net = moe.forwarded_pass_bytes(32, 8, 1.0, 8)
    assert net == pytest.approx(3 * (1 - 0.75 ** 8))
    assert nv == pytest.approx(8 * (7 / 32 + 24 / 32 * 7 / 8))
    # one expert per token: nothing to merge, the plain all-to-all's network share
    assert moe.forwarded_pass_bytes(32, 8, 1.0, 1)[1] == pytest.approx(24 / 32)
    # inside one node: no network, NVLink as the all-to-all's
    nv1, net1 = moe.forwarded_pass_bytes(8, 8, 1.0, 8)
    assert net1 == 0.0 and nv1 == pytest.approx(8 * 7 / 8)
    cols = moe.forwarded_pass_bytes(np.array([32.0, 8.0]), np.array([8.0, 8.0]), 1.0, 8)[1]
    assert cols == pytest.approx([net, 0.0])


def test_a_forwarding_dispatcher_spares_the_network_only_across_nodes() -> None:
    sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "h100-sxm", "num_chips": 32},
                             "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}})
    fwd = efficiency_for("h100-sxm", "nemo-deepep")
    assert fwd.moe_node_forwarding
    plain = dataclasses.replace(fwd, moe_overlap="none", moe_node_forwarding=False)
    forwarded = dataclasses.replace(plain, moe_node_forwarding=True)
    across = Strategy(dp=32, ep=32, etp=1, zero=1, micro_batch_size=1)  # 128 experts over 4 nodes, top-8
    inside = Strategy(dp=32, ep=8, etp=1, zero=1, micro_batch_size=1)
    a, b = (estimate_step(sc, across, check_fit=False, eff=e).ep_comm_time_s for e in (plain, forwarded))
    assert b < a
    c, d = (estimate_step(sc, inside, check_fit=False, eff=e).ep_comm_time_s for e in (plain, forwarded))
    assert d == pytest.approx(c)


def test_a_moe_layer_moves_its_tokens_to_their_experts_and_back() -> None:
    """model/routing.py: the T x top_k routed rows gathered and sorted into expert order (2 reads + 2 writes
    each), sorted back and summed into T rows (2 reads, 1 + 1/top_k writes), the backward the same bytes; a dense
    layer moves none; Megatron's ``moe`` recompute module repeats them, ``moe_act`` does not."""
    from greentrain.estimate.recompute import modules_mask, op_module_masks
    from greentrain.model.load import load_model
    from greentrain.model.ops import model_ops

    spec = load_model("mixtral-8x7b")
    t, k, d, e = 2 * 4096, spec.top_k, spec.hidden_size, 2.0
    layers = model_ops(spec, 2, 4096, e, 0, True).layers
    (moe_layer,) = [g for g in layers if g.moe]
    ops = {op.name: op for op in moe_layer.ops}
    into, back = ops["mlp.experts.permute"], ops["mlp.experts.unpermute"]
    assert into.bytes == pytest.approx(t * k * d * 4 * e)
    assert back.bytes == pytest.approx(t * k * d * (3 + 1 / k) * e)
    assert into.expert and back.expert and into.backward_factor == back.backward_factor == 1.0
    names = [op.name for op in moe_layer.ops]
    assert names.index("mlp.router") < names.index("mlp.experts.permute") < names.index("mlp.experts.up")
    assert names.index("mlp.experts.down") < names.index("mlp.experts.unpermute")
    masks = dict(zip(names, op_module_masks(moe_layer.ops), strict=True))
    assert masks["mlp.experts.permute"] == masks["mlp.experts.unpermute"] == modules_mask("moe")
    dense = model_ops(load_model("llama3-8b"), 1, 4096, e, 0, True).layers
    assert not any("permute" in op.name for g in dense for op in g.ops)


def test_deepep_permutes_on_the_receiving_side_only() -> None:
    """moe_sender_permutes false (nemo-deepep: DeepEP's dispatch reads each token in place): the two token
    permutation ops move half the bytes; every other op of the layer costs the same."""
    from greentrain.estimate.compute import Sharding, ops_time
    from greentrain.model.load import load_model
    from greentrain.model.ops import model_ops

    chip = get_chip("h100-sxm")
    (layer,) = [g for g in model_ops(load_model("mixtral-8x7b"), 1, 4096, 2.0, 0, True).layers if g.moe]
    nemo, deepep = efficiency_for("h100-sxm", "nemo"), efficiency_for("h100-sxm", "nemo-deepep")
    assert nemo.moe_sender_permutes and not deepep.moe_sender_permutes
    sh = Sharding(tp=1, ep=8)
    deepep_as_nemo = dataclasses.replace(deepep, moe_sender_permutes=True)

    def fwd(ops: tuple, eff) -> float:  # type: ignore[no-untyped-def]
        return float(ops_time(ops, sh, compute_peaks(chip, "bf16"), chip.memory_bytes_per_s, eff).forward_s)

    permute = tuple(op for op in layer.ops if op.name.endswith(("permute", "unpermute")))
    rest = tuple(op for op in layer.ops if op not in permute)
    gaps = sum(deepep.launch_gap_s * op.kernels[0] for op in permute)  # each kernel: max(roofline, floor) + gap
    assert fwd(permute, deepep) - gaps == pytest.approx(0.5 * (fwd(permute, deepep_as_nemo) - gaps), rel=1e-6)
    assert fwd(rest, deepep) == fwd(rest, deepep_as_nemo)


def test_a_fused_expert_activation_runs_in_the_grouped_gemms() -> None:
    """moe_fused_act (nemo-full-graph: Megatron Core's cutedsl_fused_grouped_mlp): the experts' activation costs
    no kernel and no memory pass, and with an fp8 recipe the second GEMM's input cast (forward) and the first
    GEMM's output-gradient cast (backward) are gone; every other op, and every cast of the other GEMMs, stays."""
    from greentrain.estimate.compute import Peaks, Sharding, ops_time

    chip = get_chip("gb200")
    (layer,) = [g for g in model_ops(load_model("qwen3-30b-a3b"), 4, 4096, 2.0, 0, True).layers if g.moe]
    plain = dataclasses.replace(efficiency_for("gb200", "nemo"), moe_grouped_gemm="one")
    fused = dataclasses.replace(plain, moe_fused_act=True)
    sh, cast_bytes = Sharding(tp=1, ep=8), 1.5  # an fp8 recipe's quantize: reads 2 bytes, writes ~1

    def times(ops: tuple, eff, cast: float = 0.0):  # type: ignore[no-untyped-def]
        p = chip.peak_flop_per_s("fp8")
        peaks = Peaks(matmul=p, attention=p, ends=p, cast_bytes_per_elt=cast, cast_kernels=1.0)
        t = ops_time(ops, sh, peaks, chip.memory_bytes_per_s, eff)
        return float(t.forward_s), float(t.backward_s)

    act = tuple(op for op in layer.ops if op.name.endswith(".experts.act"))
    assert len(act) == 1 and times(act, plain)[0] > 0 and times(act, fused) == (0.0, 0.0)
    up, down = (tuple(op for op in layer.ops if op.name.endswith(n)) for n in (".experts.up", ".experts.down"))
    others = tuple(op for op in layer.ops if op not in act + up + down)
    assert times(others, fused, cast_bytes) == times(others, plain, cast_bytes)
    for gemm, saved in ((down, 0), (up, 1)):  # down: no forward input cast; up: no backward output-gradient cast
        assert times(gemm, fused) == times(gemm, plain)  # no fp8 recipe: nothing to fuse
        with_cast, fused_cast = times(gemm, plain, cast_bytes), times(gemm, fused, cast_bytes)
        assert fused_cast[saved] < with_cast[saved] and fused_cast[1 - saved] == with_cast[1 - saved]
        assert fused_cast[saved] == times(gemm, plain)[saved]


def test_the_full_graph_profile_is_nemo_with_its_moe_features() -> None:
    """nemo-full-graph is nemo with full-iteration CUDA graphs (no launch gap, no host sync, no per-layer host
    time), the all-to-all overlap and the fused grouped MLP; a dense model keeps nemo's kernels and loses only
    the gaps; a MoE step is faster than nemo's and than nemo-a2a-overlap's."""
    nemo, full = efficiency_for("gb200", "nemo"), efficiency_for("gb200", "nemo-full-graph")
    assert (full.cuda_graphs, full.moe_host_sync, full.moe_overlap, full.moe_grouped_gemm, full.moe_fused_act) == \
        (True, False, "compute", "one", True)
    assert full.launch_gap_s == 0.0 < nemo.launch_gap_s and full.host_layer_s == 0.0
    sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "gb200", "num_chips": 8},
                             "workload": {"global_batch_size": 32, "seq_len": 4096, "num_steps": 1,
                                          "precision": "fp8", "fp8_recipe": "mxfp8"}})
    s = Strategy(dp=8, ep=8, etp=1, zero=1, micro_batch_size=4)
    steps = [estimate_step(sc, s, check_fit=False, eff=efficiency_for("gb200", fw)).step_time_s
             for fw in ("nemo", "nemo-a2a-overlap", "nemo-full-graph")]
    assert steps[0] > steps[1] > steps[2]
