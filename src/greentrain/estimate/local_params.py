"""Parameters one device holds of a transformer layer, of its routed experts, and of the embedding and LM head,
under tensor, expert and expert-tensor parallelism (estimate/stage.py sums them per stage); floats, or columns
(estimate/vector.py)."""

from __future__ import annotations

from greentrain.estimate.compute import Sharding, expert_tp
from greentrain.num import Num
from greentrain.scenario import Scenario


def kind_params(params: int, expert_params: int, sh: Sharding) -> Num:
    """One layer's parameters on one device from its exact count (model/ops.LayerGroup.params, any mixer):
    tensor parallelism splits the matrices (norms and routers are a rounding error), expert parallelism
    and expert tensor parallelism spread the routed experts."""
    return (params - expert_params) / sh.tp + expert_params / (sh.ep * expert_tp(sh))


def local_layer_params(sc: Scenario, moe: bool, encoder: bool, sh: Sharding) -> Num:
    """Parameters of one layer held by one device (TP splits matrices, EP splits experts)."""
    m = sc.model
    cross = m.arch == "encoder-decoder" and not encoder
    attn = m.attention_params() * (2 if cross else 1) / sh.tp
    norms = m.norm_params() * (3 if cross else 2)
    if moe:
        experts = m.num_experts / sh.ep * m.mlp_params(m.expert_ffn_hidden_size) / expert_tp(sh)
        shared = m.num_shared_experts * m.mlp_params(m.expert_ffn_hidden_size) / sh.tp
        mlp = experts + shared + m.hidden_size * m.num_experts
    else:
        mlp = m.mlp_params() / sh.tp
    return attn + mlp + norms


def local_expert_params(sc: Scenario, moe: bool, sh: Sharding) -> Num:
    """The routed experts' share of local_layer_params."""
    m = sc.model
    return m.num_experts / sh.ep * m.mlp_params(m.expert_ffn_hidden_size) / expert_tp(sh) if moe else 0.0


def local_end_params(sc: Scenario, tp: Num) -> tuple[Num, Num, Num]:
    """Parameters of the embedding, and of the LM head with pp = 1 and pp > 1, vocabulary-parallel over tp."""
    m = sc.model
    table = m.vocab_size * m.hidden_size / tp
    emb = table + m.embedding_params() - m.vocab_size * m.hidden_size
    head_1 = (0.0 if m.tied_embeddings else table) + m.norm_params()
    return emb, head_1, table + m.norm_params()
