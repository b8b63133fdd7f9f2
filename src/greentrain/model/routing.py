"""Moving a mixture-of-experts layer's tokens to their experts and back: the memory traffic of token-choice routing.

A dropless token-choice MoE layer does not compute on the tokens where they are: each token's top_k copies are
gathered into expert order, and the experts' outputs are scattered back and summed per token. Megatron Core's
alltoall dispatcher (megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher) does it in
four passes around its two all-to-alls: permutation 1 (``permute``: the top_k copies of each local token, grouped
by expert), after the dispatch permutation 2 (``sort_chunks_by_idxs``: the received chunks regrouped by local
expert, whenever a rank holds more than one), and after the experts their inverses (the chunks sorted back, then
``unpermute``: the top_k copies summed into one row per token). torchtitan's MoE and Hugging Face's expert loops
gather and scatter the same rows. Each pass reads and writes every routed row once (``moe_permute_fusion`` runs a
pass as one kernel; the rows are still copied); the backward runs the inverse passes over the gradients, the same
bytes. Under DeepEP (Megatron Core's flex dispatcher) the dispatch reads each token in place and only the receiving
rank permutes: half the bytes (the framework's ``moe_sender_permutes``, estimate/compute.py). The all-to-alls
themselves are estimate/moe.py's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from greentrain.model.primitives import Op, Shard, elementwise

PERMUTE_OPS = ("experts.permute", "experts.unpermute")  # the two ops' names after the block's prefix
# the experts' own ops, by the same naming (model/ops.py mlp_ops; estimate/compute.py prices their fusions)
EXPERT_UP, EXPERT_ACT, EXPERT_DOWN = "experts.up", "experts.act", "experts.down"
# the share of those bytes where only the receiving rank permutes (DeepEP): two of the four passes
RECEIVER_ONLY_SHARE = 0.5


class RoutedShape(Protocol):
    """The TransformerSpec fields token routing reads (model/spec.py), read-only."""

    @property
    def hidden_size(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def expert_bias(self) -> bool: ...
    @property
    def glu_clamp(self) -> bool: ...


def token_permutation_ops(spec: RoutedShape, tokens: float, e: float, prefix: str) -> tuple[Op, Op]:
    """(into expert order, back to token order) for one MoE layer of ``tokens`` tokens at ``e`` bytes per
    element. Into: the gather of T x top_k rows (each read from its token, written once) and the sort by local
    expert (read and written once). Back: the sort back (read and written once) and the unpermute (T x top_k rows
    read, T rows written). Expert-side element-wise ops: split over the tensor-parallel ranks as the experts' work
    is (estimate/compute.py _local), two kernels each way. The op list does not know the expert parallelism: a
    rank holding a single expert (ep = num_experts), which skips the two sorts, is charged them too."""
    routed = tokens * spec.top_k * spec.hidden_size
    into = elementwise(f"{prefix}.{PERMUTE_OPS[0]}", routed, e, Shard.TOKENS, reads=2.0, writes=2.0, expert=True,
                       kernels=(2.0, 2.0))
    back = elementwise(f"{prefix}.{PERMUTE_OPS[1]}", routed, e, Shard.TOKENS, reads=2.0,
                       writes=1.0 + 1.0 / spec.top_k, expert=True, kernels=(2.0, 2.0))
    return replace(into, backward_factor=1.0), replace(back, backward_factor=1.0)


# the down projection's biased sum with fp32 routing probabilities against 16-bit ones (expert_extra_ops), per
# element at 16 bits: forward 24 + 2e against 6e bytes, backward 32 + 4e against 8e (estimate/compute.py applies it)
EXPERT_BIAS, EXPERT_CLAMP = "experts.bias", "experts.clamp"
FP32_PROBS_BYTES = ((24.0 + 4.0) / 12.0, (32.0 + 8.0) / 16.0)


def expert_extra_ops(spec: RoutedShape, rows: float, f: int, e: float, prefix: str) -> tuple[list[Op], list[Op]]:
    """(before the experts' activation, after their down projection): the element-wise ops GPT-OSS's experts add
    around their fused kernels, over ``rows`` routed rows (T x top_k) of an ``f``-wide expert, as Megatron Core runs
    them (NVIDIA/Megatron-LM since 2025-09, gpt-oss PRs 3857-3858; Megatron-Bridge's GPT-OSS sets
    activation_func_clamp_value 7 and add_bias_linear):
    - ``experts.clamp`` (``glu_clamp``): fused_bias_geglu.py weighted_bias_quick_geglu_impl clamps the gate and
      linear halves of the up projection's output in eager PyTorch before its fused quick-GEGLU: two clamps and a
      cat, each reading and writing its part (4e per element of the 2f-wide output, 3 kernels); backward each
      clamp's mask (le; ge, le and logical_and for the two-sided one: 1-byte masks) and where, then the chunk's cat:
      5.5e + 4 bytes, 7 kernels (counted under torch 2.13's dispatch);
    - ``experts.bias`` (``expert_bias``): the down projection's bias scaled by each row's routing probability,
      ``t + b * p`` (moe/experts.py TEGroupedMLP._apply_bias; one split per local expert until PR 6000, 2026-08, a
      repeated bias row per token since): with 16-bit probabilities (Megatron's router casts them to the logits'
      dtype, moe_utils.py) b * p (e), the sum (2e read, e written) and the cat (2e): 6e per element of the d-wide
      output; backward the gradients of b and p (a product and a reduction each, 3e + 3e) and the split's cat
      (2e): 8e. DeepEP and HybridEP take fp32 probabilities (token_dispatcher.py), so the product, the sum and the
      cat run in fp32 and the result is cast back: 24 + 2e and 32 + 4e (FP32_PROBS_BYTES, estimate/compute.py).
      4 kernels forward and 6 backward (PR 6000's packed form; the per-expert loop launches two per local expert).
    The up projection's bias is added by Transformer Engine's GEMM or inside the fused activation (no pass of its
    own). AutoModel's GPT-OSS (a torch.compile'd quick-GEGLU, its biases added per expert) moves the same bytes."""
    before, after = [], []
    if spec.glu_clamp:
        before.append(replace(elementwise(f"{prefix}.{EXPERT_CLAMP}", rows * 2 * f, e, Shard.HIDDEN, reads=2.0,
                                          writes=2.0, expert=True, kernels=(3.0, 7.0)),
                              backward_factor=(5.5 * e + 4.0) / (4.0 * e)))
    if spec.expert_bias:
        after.append(replace(elementwise(f"{prefix}.{EXPERT_BIAS}", rows * spec.hidden_size, e, Shard.TOKENS,
                                         reads=3.0, writes=3.0, expert=True, kernels=(4.0, 6.0)),
                             backward_factor=8.0 / 6.0))
    return before, after
