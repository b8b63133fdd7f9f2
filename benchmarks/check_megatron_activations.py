"""What a Megatron-Core transformer layer keeps for its backward, against greentrain's count (``layer_activation``).

Megatron-Core is not a greentrain dependency, so this is a check to run by hand in a virtual environment that has
it (CPU only, no Transformer Engine, no GPU)::

    python3 -m venv /tmp/mcore && /tmp/mcore/bin/pip install torch==2.13.0 megatron-core==0.16.1 pyyaml numpy
    PYTHONPATH=src /tmp/mcore/bin/python benchmarks/check_megatron_activations.py

It builds one layer of the local spec (``get_gpt_layer_local_spec``: Megatron's own linear layers, unfused
attention, torch RMSNorm, the fused SwiGLU; ``hidden_dropout`` and ``attention_dropout`` 0, as Megatron-Bridge's
Llama, Qwen and GPT-OSS bridges set them), dense and MoE (SequentialMLP, 4 experts, top 2, the allgather
dispatcher: the CPU cannot build the alltoall one), runs a forward under torch's saved-tensor hooks and sums the
distinct storages kept, parameters and the rotary tables (s x 1 x 1 x d, not per token) left out. fp32, so that
the CPU's composite RMSNorm (input, normalised value, weighted output: 3 x 4 bytes) equals the count of an eager
norm (2 e + 4). The CPU-only stand-ins: ``torch.cuda.current_device`` returns "cpu" (the attention's scratch
buffer), the model-parallel RNG fork is a no-op, and ``te_general_gemm`` is None (megatron-core 0.16.1's router
names it without Transformer Engine).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

import torch
import torch.nn.functional as F

S, B, H, HEADS, FFN, EXPERTS, TOP_K = 128, 2, 256, 4, 768, 4, 2


def _megatron_layer(moe: bool) -> Any:
    from megatron.core import tensor_parallel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    import megatron.core.transformer.moe.moe_utils as moe_utils

    moe_utils.te_general_gemm = None  # type: ignore[attr-defined]
    extra: dict[str, Any] = dict(num_moe_experts=EXPERTS, moe_router_topk=TOP_K, moe_ffn_hidden_size=FFN,
                                 moe_token_dispatcher_type="allgather", moe_router_load_balancing_type="none",
                                 moe_aux_loss_coeff=0.0) if moe else {}
    config = TransformerConfig(num_layers=1, hidden_size=H, num_attention_heads=HEADS, kv_channels=H // HEADS,
                               ffn_hidden_size=FFN, gated_linear_unit=True, activation_func=F.silu,
                               normalization="RMSNorm", add_bias_linear=False, hidden_dropout=0.0,
                               attention_dropout=0.0, params_dtype=torch.float32, use_cpu_initialization=True,
                               bias_activation_fusion=True, bias_dropout_fusion=True, apply_rope_fusion=False,
                               masked_softmax_fusion=False, persist_layer_norm=False,
                               gradient_accumulation_fusion=False, **extra)
    spec = get_gpt_layer_local_spec(num_experts=EXPERTS if moe else None, normalization="RMSNorm")
    return build_module(spec, config=config, layer_number=1)


def measured_bytes(moe: bool) -> float:
    layer = _megatron_layer(moe)
    d = H // HEADS
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.outer(torch.arange(S, dtype=torch.float32), inv)
    freqs = torch.cat((angles, angles), dim=-1)[:, None, None, :]
    mask = torch.triu(torch.ones(1, 1, S, S, dtype=torch.bool), diagonal=1)
    saved: dict[int, tuple[int, tuple[int, ...]]] = {}

    def pack(a: torch.Tensor) -> torch.Tensor:
        storage = a.untyped_storage()
        saved[storage.data_ptr()] = (storage.nbytes(), tuple(a.shape))
        return a

    x = torch.randn(S, B, H, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda a: a):
        layer(x, attention_mask=mask, rotary_pos_emb=freqs)
    skip = {t.untyped_storage().data_ptr() for t in (*layer.parameters(), freqs, mask)}
    return float(sum(n for ptr, (n, shape) in saved.items() if ptr not in skip and shape != (S, 1, 1, d)))


def counted_bytes(moe: bool) -> float:
    from greentrain.estimate.memory import layer_activation
    from greentrain.model.spec import TransformerSpec

    spec = TransformerSpec(name="mcore-check", num_layers=1, hidden_size=H, num_heads=HEADS, ffn_hidden_size=FFN,
                           vocab_size=1000, glu=True, activation="silu", norm="rmsnorm", rotary=True,
                           tied_embeddings=False, num_experts=EXPERTS if moe else 1, top_k=TOP_K if moe else 1)
    act = layer_activation(spec, B, S, 4.0, moe=moe, flash=False, fused_glu=True, eager_norm=True)
    return act.replicated_bytes + act.split_bytes + act.scores_bytes


def held_by_views(e: float = 4.0) -> float:
    """Bytes per token the local spec keeps beyond a GPU run: its unfused attention saves v as a view of the fused
    qkv projection's output, which keeps the q and k parts of that buffer alive too (q and k themselves are the
    rotary outputs). Transformer Engine's attention finds that layout unsupported and makes v contiguous
    (attention/dot_product_attention/utils.py get_qkv_layout), so on a GPU the buffer is freed."""
    return e * (H + H)  # q width + k width (multi-head: both H)


def main() -> None:
    warnings.filterwarnings("ignore")  # megatron-core warns of every fallback for Transformer Engine and Apex
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment,return-value]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561", RANK="0", WORLD_SIZE="1")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel(1, 1)
    per = S * B * H
    for moe in (False, True):
        m, c = measured_bytes(moe), counted_bytes(moe) + S * B * held_by_views()
        print(f"{'MoE' if moe else 'dense'} layer: Megatron-Core keeps {m / per:.3f} B per token x hidden, "
              f"greentrain counts {c / per:.3f} with the qkv buffer v's view holds on the CPU ({c / m - 1:+.2%})")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
