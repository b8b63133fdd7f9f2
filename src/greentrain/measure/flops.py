"""FLOP counting through ``torch.utils.flop_counter``, with the attention ops it misses and local shapes
under DTensor.

- CPU ``scaled_dot_product_attention`` dispatches to ``aten._scaled_dot_product_flash_attention_for_cpu``,
  which torch 2.13's registry does not know (it counts 0 FLOPs). We register it.
- Attention FLOPs follow the model-FLOP convention of Narayanan et al. 2021 (Megatron-LM, SC'21, §5.1
  eq. 3) and Chowdhery et al. 2022 (PaLM, App. B): forward = QK^T + AV = 2 matmuls of 2·b·h·s·s_kv·d
  = 4·b·h·s·s_kv·d; backward = 2x forward (no recompute of the scores, no causal halving). torch's own
  backward formula for the fused kernels counts the flash recompute (2.5x), so we override those too,
  keeping CPU and GPU figures on one convention, the one the planner's ``flop_per_step`` uses.
- Under DTensor the dispatch mode sees global shapes; we evaluate each formula on the local shards
  (``DTensor._local_tensor``), so each rank reports the FLOPs it executes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_any, tree_map
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

aten = torch.ops.aten


def sdpa_flop(query_shape: Any, key_shape: Any, value_shape: Any) -> int:
    """QK^T and AV, 2·m·k·n each: 2·b·h·s·s_kv·d_qk + 2·b·h·s·s_kv·d_v, with h the query heads. Grouped-query
    attention (``enable_gqa``: fewer key/value heads, as Llama 3, Mistral and Qwen send to the fused CUDA
    kernels) broadcasts each key/value head to its group of query heads, so the count is the query heads';
    torch's own ``sdpa_flop_count`` asserts equal heads and would stop the training it measures."""
    if len(query_shape) != 4 or len(key_shape) != 4:  # not (batch, heads, seq, dim): torch's own count
        return int(sdpa_flop_count(query_shape, key_shape, value_shape))
    b, h, s_q, d_qk = query_shape
    _, h_kv, s_kv, _ = key_shape
    d_v = value_shape[-1]
    if h_kv < 1 or h % h_kv:
        raise ValueError(f"attention: {h} query heads are not a multiple of {h_kv} key/value heads")
    return 2 * b * h * s_q * s_kv * d_qk + 2 * b * h * s_q * s_kv * d_v


def attention_forward_flop(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                           out_shape: Any = None, **kwargs: Any) -> int:
    """4·b·h·s·s_kv·d (QK^T and AV, 2·m·k·n each; GQA: key/value heads broadcast to the query heads)."""
    return sdpa_flop(query_shape, key_shape, value_shape)


def attention_backward_flop(grad_out_shape: Any, query_shape: Any, key_shape: Any, value_shape: Any,
                            *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """2 x forward: dS = dO·V^T and dV = P^T·dO, dQ = dS·K and dK = dS^T·Q (Megatron-LM §5.1)."""
    return 2 * sdpa_flop(query_shape, key_shape, value_shape)


def _fused_forward_flop(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                        out_shape: Any = None, **kwargs: Any) -> int:
    return attention_forward_flop(query_shape, key_shape, value_shape)


ATTENTION_FLOPS: dict[Any, Any] = {  # every fused kernel, forward and backward: torch's formulas refuse GQA
    aten._scaled_dot_product_flash_attention: _fused_forward_flop,
    aten._scaled_dot_product_efficient_attention: _fused_forward_flop,
    aten._scaled_dot_product_cudnn_attention: _fused_forward_flop,
    aten._scaled_dot_product_flash_attention_for_cpu: attention_forward_flop,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: attention_backward_flop,
    aten._scaled_dot_product_fused_attention_overrideable: _fused_forward_flop,
    aten._scaled_dot_product_fused_attention_overrideable_backward: attention_backward_flop,
    aten._scaled_dot_product_efficient_attention_backward: attention_backward_flop,
    aten._scaled_dot_product_flash_attention_backward: attention_backward_flop,
    aten._scaled_dot_product_cudnn_attention_backward: attention_backward_flop,
}


def _is_dtensor(x: Any) -> bool:
    return type(x).__name__ == "DTensor" and hasattr(x, "_local_tensor")


def _local(x: Any) -> Any:
    return x._local_tensor if _is_dtensor(x) else x


class LocalFlopCounter(FlopCounterMode):
    """FlopCounterMode with the attention formulas above and local (per-rank) shapes under DTensor."""

    def __init__(self) -> None:
        super().__init__(display=False, custom_mapping=ATTENTION_FLOPS)

    def _count_flops(self, func_packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
        if tree_any(_is_dtensor, (args, kwargs, out)):
            local_args, local_kwargs, local_out = tree_map(_local, (args, kwargs, out))
            super()._count_flops(func_packet, local_out, local_args, local_kwargs)
            return out
        return super()._count_flops(func_packet, out, args, kwargs)

    def total(self) -> int:
        """FLOPs counted so far (cheap: sums one small dict)."""
        return sum(self.flop_counts["Global"].values()) if "Global" in self.flop_counts else 0
