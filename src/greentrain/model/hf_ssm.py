"""State-space and hybrid models -> TransformerSpec fields: Mamba, Mamba-2, Jamba (Mamba + attention + MoE) and
Nemotron-H (Mamba-2 + attention + MLP/MoE blocks), from ``config.json`` alone (no ``transformers``, no network),
and each family's record. None of them is rotary: their attention layers, where they have any, use no positions.

Each reader reads the keys its ``*Config`` class defines, with that class's default when a key is absent
(transformers 5.23); tests/unit/model/test_model_hf_families_2024.py builds each family with transformers on the
meta device and checks the parameter count exactly, and the FLOPs of a tiny config against FlopCounterMode.
"""

from __future__ import annotations

from typing import Any

from greentrain.errors import ConfigError
from greentrain.model.family import ModelFamily
from greentrain.model.hf_reader import WHERE, ConfigReader, linear_biases, llama_fields


def _mamba(r: ConfigReader) -> dict[str, Any]:
    """MambaConfig (Gu & Dao 2023, arXiv 2312.00752): every layer an RMSNorm and a Mamba mixer (no inner
    norms, unlike Jamba), no MLP, no attention; ``time_step_rank`` "auto" is ceil(hidden_size / 16)."""
    d = r.get_int("hidden_size")
    rank = r.config.get("time_step_rank", "auto")
    return dict(
        num_layers=r.get_int("num_hidden_layers"), hidden_size=d, num_heads=1, head_dim=d, ffn_hidden_size=0,
        vocab_size=r.get_int("vocab_size"), activation=r.get_activation("hidden_act", default="silu"),
        tied_embeddings=r.get_bool("tie_word_embeddings", default=True), norm="rmsnorm", ssm="mamba",
        attention_layer_interval=0, ssm_state_size=r.get_int("state_size", default=16),
        ssm_expand=r.get_int("expand", default=2), ssm_conv_kernel=r.get_int("conv_kernel", default=4),
        ssm_dt_rank=0 if rank == "auto" else r.get_int("time_step_rank"),
        ssm_bias=r.get_bool("use_bias", default=False), ssm_conv_bias=r.get_bool("use_conv_bias", default=True),
    )


def _mamba2(r: ConfigReader) -> dict[str, Any]:
    """Mamba2Config (Dao & Gu 2024, arXiv 2405.21060, §7-8): every layer an RMSNorm and a Mamba-2 mixer, no
    MLP, no attention. The mixer's heads (``num_heads`` x ``head_dim`` = ``expand`` x hidden_size) stand in
    for attention heads in num_heads/head_dim."""
    heads, head_dim = r.get_int("num_heads", default=128), r.get_int("head_dim", default=64)
    d, expand = r.get_int("hidden_size"), r.get_int("expand", default=2)
    if heads * head_dim != expand * d:
        raise ConfigError(f"{WHERE}.num_heads", heads, f"times head_dim={head_dim} must equal expand * "
                          f"hidden_size = {expand * d} (Mamba2Mixer splits the inner width into heads)")
    return dict(
        num_layers=r.get_int("num_hidden_layers"), hidden_size=d, num_heads=heads, head_dim=head_dim,
        ffn_hidden_size=0, vocab_size=r.get_int("vocab_size"), activation=r.get_activation("hidden_act",
        default="silu"), tied_embeddings=r.get_bool("tie_word_embeddings", default=False), norm="rmsnorm",
        ssm="mamba2", attention_layer_interval=0, ssm_state_size=r.get_int("state_size", default=128),
        ssm_expand=expand, ssm_conv_kernel=r.get_int("conv_kernel", default=4), ssm_num_heads=heads,
        ssm_num_groups=r.get_int("n_groups", default=8), ssm_bias=r.get_bool("use_bias", default=False),
        ssm_conv_bias=r.get_bool("use_conv_bias", default=True), ssm_chunk_size=r.get_int("chunk_size",
        default=256),
    )


def _jamba(r: ConfigReader) -> dict[str, Any]:
    """JambaConfig (Lieber et al. 2024, arXiv 2403.19887, §2; Jamba-1.5, arXiv 2408.12570): Mamba layers with
    one attention layer per ``attn_layer_period`` (at ``attn_layer_offset``), an MoE MLP on every
    ``expert_layer_period``-th layer, RMSNorms on the Mamba step size, B and C. Experts must sit on layers
    period-1, 2 period-1, ... (every released Jamba: period 2, offset 1)."""
    spec = llama_fields(r, bias_keys=())
    period, offset = r.get_int("expert_layer_period", default=2), r.get_int("expert_layer_offset", default=1,
                                                                             minimum=0)
    if offset != period - 1:
        raise ConfigError(f"{WHERE}.expert_layer_offset", offset, f"must be expert_layer_period - 1 = {period - 1}")
    dt_rank = r.config.get("mamba_dt_rank", "auto")
    spec.update(num_experts=r.get_int("num_experts", default=16), top_k=r.get_int("num_experts_per_tok", default=2),
                moe_layer_interval=period, ssm="mamba", attention_layer_interval=r.get_int("attn_layer_period",
                default=8), attention_layer_offset=r.get_int("attn_layer_offset", default=4, minimum=0),
                ssm_state_size=r.get_int("mamba_d_state", default=16), ssm_expand=r.get_int("mamba_expand",
                default=2), ssm_conv_kernel=r.get_int("mamba_d_conv", default=4),
                ssm_dt_rank=0 if dt_rank == "auto" else r.get_int("mamba_dt_rank"),
                ssm_bias=r.get_bool("mamba_proj_bias", default=False),
                ssm_conv_bias=r.get_bool("mamba_conv_bias", default=True), ssm_inner_norms=True)
    return spec


_NEMOTRON_H_TYPES = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*",
                     "mlp": "-", "moe": "E"}


def _nemotron_h_pattern(r: ConfigReader) -> str:
    """``layers_block_type`` (or its legacy names), else ``hybrid_override_pattern``, else NemotronHConfig's
    default [linear_attention, moe, full_attention, mlp]."""
    types = r.config.get("layers_block_type", r.config.get("layer_types"))
    if types is None:
        pattern = r.get_str("hybrid_override_pattern", default="ME*-")
        if set(pattern) - set("ME*-"):
            raise ConfigError(f"{WHERE}.hybrid_override_pattern", pattern, "must use only M, E, * and -")
        return pattern
    if not isinstance(types, list) or not types or any(t not in _NEMOTRON_H_TYPES for t in types):
        raise ConfigError(f"{WHERE}.layers_block_type", types, "must list " + ", ".join(_NEMOTRON_H_TYPES))
    return "".join(_NEMOTRON_H_TYPES[t] for t in types)


def _nemotron_h(r: ConfigReader) -> dict[str, Any]:
    """NemotronHConfig (NVIDIA 2025, Nemotron-H, arXiv 2504.03624, §2): one block per layer, Mamba-2 (M),
    attention (*), squared-ReLU MLP (-) or squared-ReLU MoE with a shared expert (E), in the order of
    ``hybrid_override_pattern``. The latent MoE projections (``moe_latent_size``) are not described: refused."""
    if r.config.get("moe_latent_size") is not None:
        raise ConfigError(f"{WHERE}.moe_latent_size", r.config["moe_latent_size"], "is not supported (null only)")
    pattern = _nemotron_h_pattern(r)
    heads = r.get_int("num_attention_heads", default=32)
    return dict(
        num_layers=len(pattern), layer_pattern=pattern, hidden_size=r.get_int("hidden_size", default=4096),
        num_heads=heads, num_kv_heads=r.get_int("num_key_value_heads", default=8),
        head_dim=r.get_int("head_dim", default=128), ffn_hidden_size=r.get_int("intermediate_size", default=21504),
        vocab_size=r.get_int("vocab_size", default=131072), glu=False,
        activation=r.get_activation("mlp_hidden_act", default="relu2"), norm="rmsnorm",
        tied_embeddings=r.get_bool("tie_word_embeddings", default=False), **linear_biases(r),
        num_experts=r.get_int("n_routed_experts", default=8), top_k=r.get_int("num_experts_per_tok", default=2),
        expert_ffn_hidden_size=r.get_int("moe_intermediate_size", default=7688),
        num_shared_experts=r.get_int("n_shared_experts", default=1, minimum=0),
        shared_expert_ffn_hidden_size=r.get_int("moe_shared_expert_intermediate_size", default=7688),
        ssm="mamba2", ssm_state_size=r.get_int("ssm_state_size", default=128),
        ssm_num_heads=r.get_int("mamba_num_heads", default=128), ssm_head_dim=r.get_int("mamba_head_dim",
        default=64), ssm_num_groups=r.get_int("n_groups", "mamba_n_groups", default=8),
        ssm_conv_kernel=r.get_int("conv_kernel", "mamba_d_conv", default=4),
        ssm_bias=r.get_bool("use_bias", default=False),
        ssm_conv_bias=r.get_bool("use_conv_bias", "mamba_conv_bias", default=True),
        ssm_chunk_size=r.get_int("chunk_size", "mamba_chunk_size", default=128),
    )


FAMILIES = (
    ModelFamily(model_type="mamba", reader=_mamba, arch_prefixes=("Mamba",)),
    ModelFamily(model_type="mamba2", reader=_mamba2, arch_prefixes=("Mamba2",)),
    ModelFamily(model_type="jamba", reader=_jamba, arch_prefixes=("Jamba",)),
    ModelFamily(model_type="nemotron_h", reader=_nemotron_h, arch_prefixes=("NemotronH",)),
)
