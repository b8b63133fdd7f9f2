"""torchtitan's op-level selective activation checkpointing: the share of each op it recomputes (estimate/recompute.py
prices it) and what it keeps (estimate/memory.py)."""

from __future__ import annotations

from dataclasses import replace

from greentrain.model.primitives import Op
from greentrain.model.spec import TransformerSpec


def op_sac(spec: TransformerSpec, ops: list[Op]) -> list[Op]:
    """``ops`` with the share of each that torchtitan's op-level selective activation checkpointing recomputes
    (pytorch/torchtitan @157a12c5 parallelize_llama.py ``_get_custom_policy``: inside each block's checkpoint it
    saves the outputs of aten.mm and of the SDPA flash/efficient kernels, except every second mm, counted from the
    block's start; everything else, element-wise ops included, is recomputed in the backward). torchtitan's
    Llama issues wq, wk, wv, wo, then w1, w3, w2 (GLU) or up, down: the second, fourth and sixth are recomputed,
    i.e. wk, wo and w3 (or down). greentrain fuses q|k|v and gate|up into one op each: their shares follow."""
    q, kv = spec.q_width, spec.kv_width
    share = {"attn.qkv": kv / (q + 2 * kv) if q + 2 * kv else 0.0, "attn.flash": 0.0, "attn.out": 1.0,
             "mlp.up": 0.5 if spec.glu else 0.0, "mlp.down": 0.0 if spec.glu else 1.0,
             "mlp.experts.up": 0.5 if spec.glu else 0.0, "mlp.experts.down": 0.0 if spec.glu else 1.0,
             "mlp.shared.up": 0.5 if spec.glu else 0.0, "mlp.shared.down": 0.0 if spec.glu else 1.0,
             "mlp.router": 0.0}
    return [replace(op, sac_recompute=share[op.name]) if op.name in share else op for op in ops]


def op_sac_saved_bytes(spec: TransformerSpec, t: float, e: float, mixer: str, mlp: str,
                       flash_lse: float) -> tuple[float, float]:
    """(replicated, split) bytes op-level SAC keeps (op_sac above): the block input; of the matmuls wq,
    wk, wv, wo, w1, w3, w2 (or up, down) the odd ones' outputs: wq, wv, w1 and w2 (GLU) or wq, wv, up; the
    attention kernel's output and log-sum-exp. MoE: per routed (top_k) and shared expert."""
    h = spec.hidden_size
    repl = e * t * h
    split = e * t * (spec.q_width + spec.kv_width + spec.attn_out_width) + flash_lse
    if mlp == "none":
        return repl, split
    f = spec.ffn_hidden_size
    if mlp == "moe":
        f = spec.top_k * spec.expert_ffn_hidden_size + spec.num_shared_experts * (
            spec.shared_expert_ffn_hidden_size or spec.expert_ffn_hidden_size)
    split += e * t * f
    if spec.glu:
        repl += e * t * h  # w2's output
    return repl, split
