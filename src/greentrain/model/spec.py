"""TransformerSpec: the one description of a model in greentrain.

Decoder-only or encoder-decoder; MHA (num_kv_heads == num_heads), GQA (1 < num_kv_heads < num_heads) or
MQA (num_kv_heads == 1); GLU (SwiGLU/GeGLU: three FFN matrices) or a plain two-matrix MLP; dense or MoE
(num_experts, top_k, expert FFN size, shared experts, every ``moe_layer_interval``-th layer); tied or untied
embeddings. Presets, YAML files and Hugging Face config.json files all become one of these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from greentrain.config import (
    as_bool,
    as_choice,
    as_int,
    check_keys,
    require,
)
from greentrain.errors import did_you_mean

ARCHS = ("decoder", "encoder-decoder")
NORMS = ("layernorm", "rmsnorm")
# The activation names transformers knows (transformers.activations.ACT2CLS, v5.23), which is also every name
# a Hugging Face config.json can carry in hidden_act / activation_function; the FLOP and byte counts do not
# depend on which one it is (an element-wise op), but a name outside this set is a typo, not a model.
ACTIVATIONS = ("gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python", "gelu_python_tanh",
               "gelu_pytorch_tanh", "hardswish", "laplace", "leaky_relu", "linear", "mish", "prelu", "quick_gelu",
               "relu", "relu2", "relu6", "sigmoid", "silu", "sqrtsoftplus", "swish", "tanh", "xielu")


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerSpec:
    name: str
    num_layers: int  # decoder layers (all layers of a decoder-only model)
    hidden_size: int  # d_model
    num_heads: int
    ffn_hidden_size: int  # d_ffn of the dense MLP (per GLU branch)
    vocab_size: int
    arch: str = "decoder"
    num_encoder_layers: int = 0
    num_kv_heads: int = 0  # 0: same as num_heads (MHA)
    head_dim: int = 0  # 0: hidden_size // num_heads
    glu: bool = False
    activation: str = "gelu"
    tied_embeddings: bool = True
    max_position_embeddings: int = 0  # rows of a learned position table (0: rotary/relative, no table)
    position_offset: int = 0  # rows of that table no position uses (the fairseq padding offset of OPT/BART: 2)
    linear_bias: bool = False
    norm: str = "layernorm"
    parallel_block: bool = False  # GPT-J/NeoX: attention and MLP read the same input
    num_experts: int = 1  # 1: dense
    top_k: int = 1
    expert_ffn_hidden_size: int = 0  # 0: ffn_hidden_size
    num_shared_experts: int = 0
    moe_layer_interval: int = 1  # every k-th layer is MoE (1: all of them)
    family: str = "custom"
    source: str = ""

    def __post_init__(self) -> None:
        w = f"model({self.name})"
        for f in ("num_layers", "hidden_size", "num_heads", "ffn_hidden_size", "vocab_size", "top_k",
                  "num_experts", "moe_layer_interval"):
            v = getattr(self, f)
            require(isinstance(v, int) and v >= 1, f"{w}.{f}", v, "must be a positive integer")
        for f in ("num_encoder_layers", "num_kv_heads", "head_dim", "expert_ffn_hidden_size",
                  "num_shared_experts", "max_position_embeddings", "position_offset"):
            v = getattr(self, f)
            require(isinstance(v, int) and v >= 0, f"{w}.{f}", v, "must be a non-negative integer")
        require(self.arch in ARCHS, f"{w}.arch", self.arch, f"must be one of {', '.join(ARCHS)}")
        require(self.norm in NORMS, f"{w}.norm", self.norm, f"must be one of {', '.join(NORMS)}")
        require(self.activation in ACTIVATIONS, f"{w}.activation", self.activation,
                "unknown activation" + did_you_mean(self.activation, ACTIVATIONS))
        require(self.position_offset == 0 or self.position_offset < self.max_position_embeddings,
                f"{w}.position_offset", self.position_offset,
                f"must be less than max_position_embeddings={self.max_position_embeddings}")
        if self.arch == "decoder":
            require(self.num_encoder_layers == 0, f"{w}.num_encoder_layers", self.num_encoder_layers,
                    "must be 0 for a decoder-only model")
        else:
            require(self.num_encoder_layers >= 1, f"{w}.num_encoder_layers", self.num_encoder_layers,
                    "an encoder-decoder model needs at least one encoder layer")
        if self.num_kv_heads == 0:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        if self.head_dim == 0:
            require(self.hidden_size % self.num_heads == 0, f"{w}.num_heads", self.num_heads,
                    f"must divide hidden_size={self.hidden_size} when head_dim is not given")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.expert_ffn_hidden_size == 0:
            object.__setattr__(self, "expert_ffn_hidden_size", self.ffn_hidden_size)
        require(self.num_heads % self.num_kv_heads == 0, f"{w}.num_kv_heads", self.num_kv_heads,
                f"must divide num_heads={self.num_heads}")
        require(self.top_k <= self.num_experts, f"{w}.top_k", self.top_k,
                f"must be <= num_experts={self.num_experts}")

    # ---- shape facts -------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def max_seq_len(self) -> int:
        """The longest sequence a learned position table can embed (0: no limit; rotary, ALiBi, relative and
        sinusoidal positions have no table to run past)."""
        return self.max_position_embeddings - self.position_offset if self.max_position_embeddings else 0

    @property
    def q_width(self) -> int:
        """Width of the attention projection: num_heads * head_dim."""
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def ffn_matrices(self) -> int:
        """Matrices in one MLP: 3 with GLU (gate, up, down), else 2."""
        return 3 if self.glu else 2

    @property
    def total_layers(self) -> int:
        return self.num_layers + self.num_encoder_layers

    def num_moe_layers(self, num_layers: int | None = None) -> int:
        n = self.num_layers if num_layers is None else num_layers
        return n // self.moe_layer_interval if self.is_moe else 0

    # ---- parameter counts (exact, biases and norms included) ---------------------------------------
    def attention_params(self) -> int:
        d, q, kv = self.hidden_size, self.q_width, self.kv_width
        weights = d * q + 2 * d * kv + q * d
        biases = (q + 2 * kv + d) if self.linear_bias else 0
        return weights + biases

    def mlp_params(self, ffn: int | None = None) -> int:
        f = self.ffn_hidden_size if ffn is None else ffn
        d = self.hidden_size
        weights = self.ffn_matrices * d * f
        biases = ((self.ffn_matrices - 1) * f + d) if self.linear_bias else 0
        return weights + biases

    def moe_params(self, active_only: bool = False) -> int:
        experts = self.top_k if active_only else self.num_experts
        router = self.hidden_size * self.num_experts
        return (experts + self.num_shared_experts) * self.mlp_params(self.expert_ffn_hidden_size) + router

    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def layer_params(self, *, moe: bool, cross_attention: bool, active_only: bool = False) -> int:
        mlp = self.moe_params(active_only) if moe else self.mlp_params()
        attn = self.attention_params() * (2 if cross_attention else 1)
        norms = self.norm_params() * (3 if cross_attention else 2)
        return attn + mlp + norms

    def embedding_params(self) -> int:
        table = self.vocab_size * self.hidden_size
        positions = self.max_position_embeddings * self.hidden_size
        stacks = 2 if self.arch == "encoder-decoder" else 1
        return table + positions * stacks

    def output_params(self) -> int:
        """The LM head (0 when tied to the embedding table) and the final norm(s)."""
        stacks = 2 if self.arch == "encoder-decoder" else 1
        head = 0 if self.tied_embeddings else self.vocab_size * self.hidden_size
        return head + self.norm_params() * stacks

    def decoder_layer_params(self, active_only: bool = False) -> int:
        cross = self.arch == "encoder-decoder"
        n_moe = self.num_moe_layers()
        dense = self.num_layers - n_moe
        return (dense * self.layer_params(moe=False, cross_attention=cross)
                + n_moe * self.layer_params(moe=True, cross_attention=cross, active_only=active_only))

    def num_params(self, active_only: bool = False) -> int:
        """All parameters (or the ones one token activates, for MoE)."""
        enc = self.num_encoder_layers * self.layer_params(moe=False, cross_attention=False)
        return enc + self.decoder_layer_params(active_only) + self.embedding_params() + self.output_params()

    def num_active_params(self) -> int:
        return self.num_params(active_only=True)

    # ---- YAML --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "model") -> TransformerSpec:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        check_keys(data, fields, where)
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            field = f"{where}.{key}"
            ftype = str(fields[key].type)
            if ftype == "int":
                kwargs[key] = as_int(value, field, minimum=0)
            elif ftype == "bool":
                kwargs[key] = as_bool(value, field)
            elif key == "arch":
                kwargs[key] = as_choice(value, field, ARCHS)
            elif key == "norm":
                kwargs[key] = as_choice(value, field, NORMS)
            elif key == "activation":
                kwargs[key] = as_choice(value, field, ACTIVATIONS)
            else:
                kwargs[key] = str(value)
        kwargs.setdefault("name", "custom")
        for req in ("num_layers", "hidden_size", "num_heads", "ffn_hidden_size", "vocab_size"):
            require(req in kwargs, f"{where}.{req}", None, "is required")
        return cls(**kwargs)
