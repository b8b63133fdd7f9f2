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
names it without Transformer Engine), and checkpoints save and restore the CPU's RNG state for the device's.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

S, B, H, HEADS, FFN, EXPERTS, TOP_K = 128, 2, 256, 4, 768, 4, 2


def _megatron_layer(moe: bool, modules: tuple[str, ...] = ()) -> Any:
    from megatron.core import tensor_parallel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
    import megatron.core.tensor_parallel.random as mrandom  # checkpoints keep the device's RNG state: the CPU's

    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda *a, **k: None
    # CheckpointWithoutOutput asks Transformer Engine's fp8 state whatever its fp8 argument (0.16.1: ``fp8 is not
    # None`` of a False default): none here
    mrandom.FP8GlobalStateManager = SimpleNamespace(is_fp8_enabled=lambda: False, get_fp8_recipe=lambda: None)
    mrandom.activation_recompute_forward = lambda **k: contextlib.nullcontext()
    import megatron.core.transformer.moe.moe_utils as moe_utils

    moe_utils.te_general_gemm = None  # type: ignore[attr-defined]
    extra: dict[str, Any] = dict(num_moe_experts=EXPERTS, moe_router_topk=TOP_K, moe_ffn_hidden_size=FFN,
                                 moe_token_dispatcher_type="allgather", moe_router_load_balancing_type="none",
                                 moe_aux_loss_coeff=0.0) if moe else {}
    if modules:
        extra.update(recompute_granularity="selective", recompute_modules=list(modules))
    config = TransformerConfig(num_layers=1, hidden_size=H, num_attention_heads=HEADS, kv_channels=H // HEADS,
                               ffn_hidden_size=FFN, gated_linear_unit=True, activation_func=F.silu,
                               normalization="RMSNorm", add_bias_linear=False, hidden_dropout=0.0,
                               attention_dropout=0.0, params_dtype=torch.float32, use_cpu_initialization=True,
                               bias_activation_fusion=True, bias_dropout_fusion=True, apply_rope_fusion=False,
                               masked_softmax_fusion=False, persist_layer_norm=False,
                               gradient_accumulation_fusion=False, **extra)
    spec = get_gpt_layer_local_spec(num_experts=EXPERTS if moe else None, normalization="RMSNorm")
    return build_module(spec, config=config, layer_number=1)


def measured_bytes(moe: bool, modules: tuple[str, ...] = ()) -> float:
    """Bytes the layer's forward leaves saved for its backward: the distinct storages its autograd graph holds,
    read once the forward is done (an output-discarding checkpoint, CheckpointWithoutOutput, empties its
    output's storage after the consumer saved it)."""
    layer = _megatron_layer(moe, modules)
    d = H // HEADS
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = torch.outer(torch.arange(S, dtype=torch.float32), inv)
    freqs = torch.cat((angles, angles), dim=-1)[:, None, None, :]
    mask = torch.triu(torch.ones(1, 1, S, S, dtype=torch.bool), diagonal=1)
    saved: dict[int, torch.Tensor] = {}

    def pack(a: torch.Tensor) -> torch.Tensor:
        saved[a.untyped_storage().data_ptr()] = a
        return a

    x = torch.randn(S, B, H, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda a: a):
        out = layer(x, attention_mask=mask, rotary_pos_emb=freqs)
    skip = {t.untyped_storage().data_ptr() for t in (*layer.parameters(), freqs, mask)}
    kept = float(sum(a.untyped_storage().nbytes() for ptr, a in saved.items()
                     if ptr not in skip and tuple(a.shape) != (S, 1, 1, d)))
    del out
    return kept


def counted_bytes(moe: bool, mode: str = "") -> float:
    from greentrain.estimate.memory import layer_activation, layer_activation_bytes
    from greentrain.model.spec import TransformerSpec

    spec = TransformerSpec(name="mcore-check", num_layers=1, hidden_size=H, num_heads=HEADS, ffn_hidden_size=FFN,
                           vocab_size=1000, glu=True, activation="silu", norm="rmsnorm", rotary=True,
                           tied_embeddings=False, num_experts=EXPERTS if moe else 1, top_k=TOP_K if moe else 1)
    act = layer_activation(spec, B, S, 4.0, moe=moe, flash=False, fused_glu=True, eager_norm=True)
    return float(layer_activation_bytes(act, tp=1, sp=False, recompute="selective" if mode else "none",
                                        mode=mode or "attention"))


# Megatron Core's recompute modules against greentrain's (estimate/recompute.py): (MoE layer, module, what the
# CPU's local spec frees beyond Transformer Engine's spec, in norms). The local spec runs every norm as a module of
# its own, where Transformer Engine fuses a dense layer's norms, and a MoE layer's input norm, into the next GEMM:
# its `layernorm` also frees the input norm (+1), and its dense `mlp` checkpoint starts after the pre-MLP norm,
# which stays (-1). A norm here is its output and the eager RMSNorm's own tensors: e + 4 bytes (memory.py
# EAGER_RMSNORM_EXTRA_BYTES), 8 at e = 4.
MODULE_CHECKS = ((False, "core_attn", 0), (False, "mlp", -1), (True, "core_attn", 0), (True, "layernorm", 1),
                 (True, "moe", 0))
NORM_BYTES = 4.0 + 4.0


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
    base = {}
    for moe in (False, True):
        m, c = measured_bytes(moe), counted_bytes(moe) + S * B * held_by_views()
        base[moe] = (m, c)
        print(f"{'MoE' if moe else 'dense'} layer: Megatron-Core keeps {m / per:.3f} B per token x hidden, "
              f"greentrain counts {c / per:.3f} with the qkv buffer v's view holds on the CPU ({c / m - 1:+.2%})")
    for moe, mode, norms in MODULE_CHECKS:
        m, c = measured_bytes(moe, (mode,)), counted_bytes(moe, mode) + S * B * held_by_views()
        freed, counted = (base[moe][0] - m) / per, (base[moe][1] - c) / per
        local = counted + norms * NORM_BYTES
        print(f"{'MoE' if moe else 'dense'} layer, recompute_modules [{mode}]: Megatron-Core frees {freed:.3f} B "
              f"per token x hidden, greentrain {counted:.3f} ({local:.3f} with the local spec's norms: "
              f"{local / freed - 1:+.2%})")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
