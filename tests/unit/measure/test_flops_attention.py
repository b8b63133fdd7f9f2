"""greentrain.measure.flops on attention: grouped-query attention (fewer key/value heads, as Llama 3, Mistral
and Qwen send to the fused CUDA kernels with ``enable_gqa``) is counted at the query heads, not refused: torch's
own ``sdpa_flop_count`` asserts equal heads, which stopped a Llama 3.2 1B training under the Tracker on an
H200 (2026-11-26, BENCHMARKS.md)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from greentrain.measure.flops import (  # noqa: E402
    ATTENTION_FLOPS,
    LocalFlopCounter,
    attention_backward_flop,
    attention_forward_flop,
)

aten = torch.ops.aten
B, H, KV, S, D = 2, 8, 2, 64, 16


def test_gqa_counts_the_query_heads() -> None:
    mha = attention_forward_flop((B, H, S, D), (B, H, S, D), (B, H, S, D))
    assert mha == 4 * B * H * S * S * D  # Narayanan et al. 2021 §5.1: QK^T and AV, 2·m·k·n each
    assert attention_forward_flop((B, H, S, D), (B, KV, S, D), (B, KV, S, D)) == mha
    assert attention_backward_flop((B, H, S, D), (B, H, S, D), (B, KV, S, D), (B, KV, S, D)) == 2 * mha
    with pytest.raises(ValueError, match="not a multiple"):
        attention_forward_flop((B, H, S, D), (B, 3, S, D), (B, 3, S, D))


def test_every_fused_cuda_kernel_uses_greentrains_formula() -> None:
    fused = (aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
             aten._scaled_dot_product_cudnn_attention)
    assert all(op in ATTENTION_FLOPS for op in fused)
    assert all(op in ATTENTION_FLOPS for op in (aten._scaled_dot_product_flash_attention_backward,
                                                aten._scaled_dot_product_efficient_attention_backward,
                                                aten._scaled_dot_product_cudnn_attention_backward))


def test_gqa_sdpa_forward_and_backward_under_the_counter() -> None:
    q = torch.randn(B, H, S, D, requires_grad=True)
    k, v = (torch.randn(B, KV, S, D, requires_grad=True) for _ in range(2))
    counter = LocalFlopCounter()
    with counter:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True).sum().backward()
    assert counter.total() == pytest.approx(3 * 4 * B * H * S * S * D, rel=0.01)
