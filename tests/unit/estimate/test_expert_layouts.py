"""Expert layouts (Megatron Core expert tensor parallelism): experts laid out over a stage's dp*cp*tp ranks,
ep*etp of them per expert group; etp = tp by default, etp = 1 folds tensor parallelism into expert
parallelism (ep may then exceed dp*cp)."""

from __future__ import annotations

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict
from greentrain.search.space import SearchSpace, table


def _sc(num_chips: int = 16):  # type: ignore[no-untyped-def]
    return scenario_from_dict({"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": num_chips},
                               "workload": {"global_batch_size": 64, "seq_len": 4096, "num_steps": 1}})


def test_the_ep_rule_counts_expert_tensor_parallelism() -> None:
    Strategy(dp=2, tp=8, ep=2)  # etp = tp: ep divides dp*cp
    with pytest.raises(ConfigError, match=r"ep\*etp = 8\*8 must divide dp\*cp\*tp = 16.*ep can be 1, 2"):
        Strategy(dp=2, tp=8, ep=8)
    s = Strategy(dp=2, tp=8, ep=8, etp=1)
    assert s.expert_tp == 1 and "etp=1" in s.describe()


def test_expert_groups_share_a_stages_ranks() -> None:
    """16 ranks (dp 2 x tp 8): ep 2 x etp 8 and ep 4 x etp 4 each fill them with one expert group (each rank
    holds half an expert's worth); ep 8 x etp 1 is two groups, each rank a whole expert."""
    sc = _sc()
    a, b, c = (estimate_step(sc, Strategy(dp=2, tp=8, ep=ep, etp=etp, zero=1, micro_batch_size=1), check_fit=False)
               for ep, etp in ((2, 0), (4, 4), (8, 1)))
    assert b.memory.weights_bytes == pytest.approx(a.memory.weights_bytes, rel=1e-9)
    assert c.memory.weights_bytes > 1.5 * a.memory.weights_bytes
    # the all-to-all spans 2, then 4 ranks: the same half of each buffer leaves the node (estimate/moe.py), the
    # rest goes over NVLink at the same time; the received tokens are then gathered over 8, then 4 expert-tp
    # ranks, and over none with etp 1
    assert a.ep_comm_time_s > b.ep_comm_time_s
    assert c.ep_comm_time_s < b.ep_comm_time_s


def test_the_search_enumerates_both_layouts() -> None:
    t = table(_sc(), SearchSpace(tp=8))
    layouts = {(int(e), int(x)) for e, x in zip(t.ep, t.etp, strict=True)}
    assert (2, 0) in layouts and (8, 1) in layouts and (8, 0) not in layouts


def test_multi_token_prediction_sits_on_the_last_stage() -> None:
    """DeepSeek-V3 §2.2: the MTP module follows the main head, so with a pipeline it loads the last stage."""
    import dataclasses

    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.estimate.stage import end_parts, layer_group_costs, sharding
    from greentrain.model.ops import model_ops

    sc = _sc()
    sc = dataclasses.replace(sc, model=dataclasses.replace(sc.model, num_mtp_layers=1))
    s = Strategy(dp=2, tp=2, pp=4, zero=1, micro_batch_size=1)
    ops = model_ops(sc.model, 1, 4096, 2.0, 0, True)
    eff = efficiency_for("h100-sxm")
    plain = dataclasses.replace(sc, model=dataclasses.replace(sc.model, num_mtp_layers=0))
    _, _, head = end_parts(sc, sharding(s), ops, eff)
    _, _, head0 = end_parts(plain, sharding(s), model_ops(plain.model, 1, 4096, 2.0, 0, True), eff)
    assert head.fwd_s > head0.fwd_s and head.params > head0.params
    assert sum(g.count for g in layer_group_costs(sc, sharding(s), ops, eff, True)) == sc.model.total_layers


def test_context_parallel_exchange_by_mixer() -> None:
    """Ring attention passes K/V cp-1 hops; a 1,024-token window over 131,072 tokens on cp 8 reaches one
    neighbour; a Mamba layer passes its state serially (nothing overlaps it)."""
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.estimate.stage import _cp_forward_s, sharding
    from greentrain.model.spec import LayerKind

    sc = scenario_from_dict({"model": "jamba-1.5-large", "cluster": {"chip": "h100-sxm", "num_chips": 64},
                             "workload": {"global_batch_size": 8, "seq_len": 131072, "num_steps": 1}})
    s, eff = sharding(Strategy(dp=1, tp=8, cp=8, zero=1)), efficiency_for("h100-sxm")
    n_tok = 131072 / 8
    full = _cp_forward_s(sc, s, 1, LayerKind(mixer="attention", mlp="moe"), n_tok, 131072, 0.0, 1, eff)
    ssm = _cp_forward_s(sc, s, 1, LayerKind(mixer="mamba", mlp="moe"), n_tok, 131072, 1e9, 1, eff)
    assert full > 0 and ssm > 0  # the state's hops are exposed however long the attention core
    assert _cp_forward_s(sc, s, 1, LayerKind(mixer="none", mlp="dense"), n_tok, 131072, 0.0, 1, eff) == 0.0
    gemma = scenario_from_dict({"model": "gemma3-27b", "cluster": {"chip": "h100-sxm", "num_chips": 64},
                                "workload": {"global_batch_size": 8, "seq_len": 131072, "num_steps": 1}})
    sliding = _cp_forward_s(gemma, s, 1, LayerKind(mixer="sliding", mlp="dense"), n_tok, 131072, 0.0, 1, eff)
    every = _cp_forward_s(gemma, s, 1, LayerKind(mixer="attention", mlp="dense"), n_tok, 131072, 0.0, 1, eff)
    assert sliding == pytest.approx(every / 7, rel=1e-9)  # 1 hop of the 7


def test_a_ring_that_spans_nodes_steps_at_its_network_hop() -> None:
    """All cp ranks send at once and each ring step waits for the slowest hop: with cp 8 at tp 2 (four cp ranks a
    node, two nodes) every one of the 7 hops costs a network hop; with cp 4 the ring stays on NVLink. A Mamba
    state's serial passes cross nodes once."""
    from greentrain.estimate.comm import Collective, collective_s
    from greentrain.estimate.efficiency import efficiency_for
    from greentrain.estimate.stage import _cp_forward_s, sharding
    from greentrain.model.spec import LayerKind

    sc = scenario_from_dict({"model": "llama3-70b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 8, "seq_len": 8192, "num_steps": 1}})
    eff, kind, n_tok = efficiency_for("h100-sxm"), LayerKind(mixer="attention", mlp="dense"), 8192 / 8
    hop_bytes = n_tok * 2 * sc.model.kv_width * 2.0 / 2
    across = _cp_forward_s(sc, sharding(Strategy(dp=1, tp=2, cp=8, zero=1)), 1, kind, n_tok, 8192, 0.0, 4, eff)
    network = collective_s(Collective.SEND_RECV, 2, 1, hop_bytes, sc.cluster, eff)
    assert across == pytest.approx(7 * network, rel=1e-9)
    inside = _cp_forward_s(sc, sharding(Strategy(dp=2, tp=2, cp=4, zero=1)), 1, kind, 8192 / 4, 8192, 0.0, 4, eff)
    nvlink = collective_s(Collective.SEND_RECV, 2, 4, 2 * hop_bytes, sc.cluster, eff)
    assert inside == pytest.approx(3 * nvlink, rel=1e-9) and nvlink < network
    jamba = scenario_from_dict({"model": "jamba-1.5-large", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                                "workload": {"global_batch_size": 8, "seq_len": 8192, "num_steps": 1}})
    s = sharding(Strategy(dp=1, tp=2, cp=8, zero=1))
    ssm = LayerKind(mixer="mamba", mlp="moe")
    two_nodes = _cp_forward_s(jamba, s, 1, ssm, n_tok, 8192, 0.0, 4, eff)
    one_node = _cp_forward_s(jamba, s, 1, ssm, n_tok, 8192, 0.0, 8, eff)
    m = jamba.model  # the fp32 state and the convolution's tail, split over tp 2
    state = (4.0 * m.ssm_inner * m.ssm_state_size + (m.ssm_conv_kernel - 1) * m.ssm_inner * 2.0) / 2
    near, far = (collective_s(Collective.SEND_RECV, 2, k, state, jamba.cluster, eff) for k in (4, 1))
    assert one_node == pytest.approx(7 * collective_s(Collective.SEND_RECV, 2, 8, state, jamba.cluster, eff))
    assert two_nodes == pytest.approx(6 * near + far) and far > near  # one of the 7 passes crosses nodes
