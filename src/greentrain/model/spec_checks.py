"""The rules between TransformerSpec fields that no single field can check: heads and kv heads, experts and
top-k, the MLA head widths, state-space heads and groups, hybrid layer patterns. Each failure is a ConfigError
naming the field, its value and the rule."""

from __future__ import annotations

from typing import Protocol

from greentrain.config import BOUNDS, require

# layer_pattern characters (Nemotron-H hybrid_override_pattern): M state-space mixer, * attention, - MLP, E MoE
PATTERN_CHARS = ("M", "*", "-", "E")


# each size field's upper end (ranges and reasons: config.BOUNDS; the lower ends are TransformerSpec's)
_MAX = {"num_layers": "num_layers", "num_encoder_layers": "num_layers", "num_dense_layers": "num_layers",
        "num_mtp_layers": "num_layers", "hidden_size": "width", "ffn_hidden_size": "width",
        "expert_ffn_hidden_size": "width", "shared_expert_ffn_hidden_size": "width", "head_dim": "width",
        "v_head_dim": "width", "kv_lora_rank": "width", "q_lora_rank": "width", "ssm_state_size": "width",
        "ssm_head_dim": "width", "vocab_size": "vocab_size", "num_heads": "num_heads", "num_kv_heads": "num_heads",
        "ssm_num_heads": "num_heads", "num_experts": "num_experts", "top_k": "num_experts",
        "num_shared_experts": "num_experts", "max_position_embeddings": "seq_len", "sliding_window": "seq_len"}


class SpecShape(Protocol):
    """The TransformerSpec fields the rules read by name (model/spec.py), read-only; the size fields of
    ``_MAX`` are read with getattr."""

    @property
    def num_layers(self) -> int: ...
    @property
    def num_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def qk_rope_head_dim(self) -> int: ...
    @property
    def kv_lora_rank(self) -> int: ...
    @property
    def ffn_hidden_size(self) -> int: ...
    @property
    def num_experts(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def num_dense_layers(self) -> int: ...
    @property
    def is_moe(self) -> bool: ...
    @property
    def capacity_factor(self) -> float: ...
    @property
    def rope_mscale(self) -> float: ...
    @property
    def hidden_dropout(self) -> float: ...
    @property
    def attention_dropout(self) -> float: ...
    @property
    def activation_dropout(self) -> float: ...
    @property
    def attention_layer_interval(self) -> int: ...
    @property
    def attention_layer_offset(self) -> int: ...
    @property
    def ssm(self) -> str: ...
    @property
    def ssm_num_heads(self) -> int: ...
    @property
    def ssm_num_groups(self) -> int: ...
    @property
    def layer_pattern(self) -> str: ...


def check_shapes(spec: SpecShape, w: str) -> None:
    """Rules between fields (``w`` names the model in errors: ``model(<name>)``)."""
    for f, kind in _MAX.items():  # before anything iterates over layers: 1e12 layers hung the estimator
        v = getattr(spec, f)
        require(v <= BOUNDS[kind].hi, f"{w}.{f}", v, f"must be <= {BOUNDS[kind].hi:g}: {BOUNDS[kind].reason}")
    require(spec.num_heads % spec.num_kv_heads == 0, f"{w}.num_kv_heads", spec.num_kv_heads,
            f"must divide num_heads={spec.num_heads}")
    require(isinstance(spec.capacity_factor, float | int) and spec.capacity_factor >= 0, f"{w}.capacity_factor",
            spec.capacity_factor, "must be a number >= 0 (0: dropless)")
    require(isinstance(spec.rope_mscale, float | int) and not isinstance(spec.rope_mscale, bool)
            and 0 < spec.rope_mscale <= 10, f"{w}.rope_mscale", spec.rope_mscale, "must be a number in (0, 10]")
    for f in ("hidden_dropout", "attention_dropout", "activation_dropout"):
        v = getattr(spec, f)
        require(isinstance(v, float | int) and not isinstance(v, bool) and 0 <= v < 1, f"{w}.{f}", v,
                "must be a probability in [0, 1)")
    require(spec.top_k <= spec.num_experts, f"{w}.top_k", spec.top_k,
            f"must be <= num_experts={spec.num_experts}")
    require(spec.num_dense_layers <= spec.num_layers, f"{w}.num_dense_layers", spec.num_dense_layers,
            f"must be <= num_layers={spec.num_layers}")
    require(spec.qk_rope_head_dim < spec.head_dim or not spec.kv_lora_rank, f"{w}.qk_rope_head_dim",
            spec.qk_rope_head_dim, f"must be less than head_dim={spec.head_dim} (it is the rotary part)")
    require(spec.attention_layer_interval == 0 or spec.attention_layer_offset < spec.attention_layer_interval,
            f"{w}.attention_layer_offset", spec.attention_layer_offset,
            f"must be less than attention_layer_interval={spec.attention_layer_interval}")
    require(spec.ffn_hidden_size > 0 or (spec.ssm != "none" and not spec.is_moe), f"{w}.ffn_hidden_size",
            spec.ffn_hidden_size, "must be positive (0, no MLP, only for a state-space stack without experts)")
    if spec.ssm == "mamba2":
        require(spec.ssm_num_heads >= 1, f"{w}.ssm_num_heads", spec.ssm_num_heads, "must be positive")
        require(spec.ssm_num_heads % spec.ssm_num_groups == 0, f"{w}.ssm_num_groups", spec.ssm_num_groups,
                f"must divide ssm_num_heads={spec.ssm_num_heads}")
    _check_pattern(spec, w)


def _check_pattern(spec: SpecShape, w: str) -> None:
    p = spec.layer_pattern
    if not p:
        return
    require(len(p) == spec.num_layers and set(p) <= set(PATTERN_CHARS), f"{w}.layer_pattern", p,
            f"must have one of {''.join(PATTERN_CHARS)} per layer ({spec.num_layers})")
    require("M" not in p or spec.ssm != "none", f"{w}.layer_pattern", p, "has M layers but ssm is none")
    require("E" not in p or spec.is_moe, f"{w}.layer_pattern", p, "has E layers but num_experts is 1")
    require("-" not in p or spec.ffn_hidden_size > 0, f"{w}.layer_pattern", p,
            "has - (MLP) layers but ffn_hidden_size is 0")
