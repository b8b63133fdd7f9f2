"""TransformerSpec: the one description of a model in greentrain.

Decoder-only or encoder-decoder; MHA (num_kv_heads == num_heads), GQA (1 < num_kv_heads < num_heads) or
MQA (num_kv_heads == 1); GLU (SwiGLU/GeGLU: three FFN matrices) or a plain two-matrix MLP (squared ReLU:
``activation: relu2``); dense or MoE (num_experts, top_k, expert FFN size, shared experts, every
``moe_layer_interval``-th layer, the first ``num_dense_layers`` dense); tied or untied embeddings.
Newer layers: multi-head latent attention (``kv_lora_rank`` > 0, model/mla.py), sliding-window layers
interleaved with full ones, attention sinks, QK-norm, sandwich norms, Mamba / Mamba-2 state-space mixers
interleaved with attention (model/ssm.py) and multi-token-prediction modules; dropout as trained. Each layer is
one :class:`LayerKind` (mixer and MLP); ops and parameters are made of the counts of each kind. Presets, YAML
files and Hugging Face config.json files all become one of these.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

from greentrain.config import as_bool, as_choice, as_float, as_int, check_keys, require
from greentrain.errors import did_you_mean
from greentrain.model.mla import mla_params
from greentrain.model.spec_checks import check_shapes
from greentrain.model.ssm import ssm_params

ARCHS = ("decoder", "encoder-decoder")
NORMS = ("layernorm", "rmsnorm")
QK_NORMS = ("none", "head", "full")  # head: one norm of head_dim (Qwen3, Gemma 3); full: of q/kv width (OLMo 2)
SSMS = ("none", "mamba", "mamba2")
# The activation names transformers knows (transformers.activations.ACT2CLS, v5.23), which is also every name
# a Hugging Face config.json can carry in hidden_act / activation_function; the FLOP and byte counts do not
# depend on which one it is (an element-wise op), but a name outside this set is a typo, not a model.
ACTIVATIONS = ("gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python", "gelu_python_tanh",
               "gelu_pytorch_tanh", "hardswish", "laplace", "leaky_relu", "linear", "mish", "prelu", "quick_gelu",
               "relu", "relu2", "relu6", "sigmoid", "silu", "sqrtsoftplus", "swish", "tanh", "xielu")
_CHOICES = {"arch": ARCHS, "norm": NORMS, "activation": ACTIVATIONS, "qk_norm": QK_NORMS, "ssm": SSMS}


@dataclass(frozen=True, slots=True)
class LayerKind:
    """What one decoder layer holds: its token mixer and its MLP.

    mixer: "attention" (every earlier token), "sliding" (the last ``sliding_window`` tokens), "mamba" or
    "mamba2" (a state-space mixer), "none" (an MLP-only layer of a Nemotron-H pattern); mlp: "dense", "moe" or
    "none" (a pure Mamba-2 stack, a mixer-only layer).
    """

    mixer: str
    mlp: str

    @property
    def name(self) -> str:
        """decoder, decoder-moe (the names of plain attention layers) or decoder-<mixer>-<mlp>."""
        if self.mixer == "attention" and self.mlp in ("dense", "moe"):
            return "decoder" if self.mlp == "dense" else "decoder-moe"
        return f"decoder-{self.mixer}-{self.mlp}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerSpec:
    name: str
    num_layers: int  # decoder layers (all layers of a decoder-only model)
    hidden_size: int  # d_model
    num_heads: int
    ffn_hidden_size: int  # d_ffn of the dense MLP (per GLU branch); 0: no MLP (a pure Mamba-2 stack)
    vocab_size: int
    arch: str = "decoder"
    num_encoder_layers: int = 0
    num_kv_heads: int = 0  # 0: same as num_heads (MHA)
    head_dim: int = 0  # 0: hidden_size // num_heads (MLA: the q/k head width, rotary part included)
    glu: bool = False
    activation: str = "gelu"
    tied_embeddings: bool = True
    max_position_embeddings: int = 0  # rows of a learned position table (0: rotary/relative, no table)
    rotary: bool = False  # rotary position embeddings rotate q and k in every attention layer (Su et al. 2021)
    rope_mscale: float = 1.0  # YaRN's attention factor on cos and sin (Peng et al. 2023 §3.4: 0.1 ln s + 1)
    position_offset: int = 0  # rows of that table no position uses (the fairseq padding offset of OPT/BART: 2)
    linear_bias: bool = False  # a bias on every linear layer
    attention_bias: bool = False  # biases on the attention projections only (GPT-OSS)
    qkv_bias: bool = False  # biases on q, k and v only (Qwen2)
    norm: str = "layernorm"
    post_norms: bool = False  # Gemma 2/3: a norm after attention and after the MLP too (4 per layer)
    qk_norm: str = "none"
    parallel_block: bool = False  # GPT-J/NeoX: attention and MLP read the same input
    # ---- attention variants
    sliding_window: int = 0  # keys a windowed layer attends to (0: every layer attends to the whole sequence)
    full_attention_interval: int = 0  # with a window, every k-th layer is full (Gemma 2: 2, Gemma 3: 6); 0: none
    attention_sinks: bool = False  # one learned sink logit per head (GPT-OSS; Xiao et al. 2023)
    logit_softcap: bool = False  # tanh soft-capping of scores and logits (Gemma 2): element-wise, cost only
    hidden_dropout: float = 0.0  # > 0: 1-byte masks (Korthikanti et al. 2022 §4.1); 0 keeps none (estimate/memory)
    attention_dropout: float = 0.0  # on the attention weights: a mask per score where a kernel writes them
    activation_dropout: float = 0.0  # inside the MLP, on the activation's output (T5, BART, Pegasus)
    # ---- multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, §2.1; DeepSeek-V3 §2.1.1)
    kv_lora_rank: int = 0  # > 0: MLA, keys and values decompressed from a latent of this width
    q_lora_rank: int = 0  # MLA queries from a latent of this width (0: a direct projection)
    qk_rope_head_dim: int = 0  # MLA: the decoupled rotary part of each q/k head (inside head_dim)
    v_head_dim: int = 0  # 0: head_dim
    # ---- mixture of experts
    num_experts: int = 1  # 1: dense
    top_k: int = 1
    expert_ffn_hidden_size: int = 0  # 0: ffn_hidden_size
    num_shared_experts: int = 0
    shared_expert_ffn_hidden_size: int = 0  # 0: expert_ffn_hidden_size (Nemotron-H: its own width)
    shared_expert_gate: bool = False  # a sigmoid gate (d -> 1) on the shared experts' output (Qwen2-MoE)
    moe_layer_interval: int = 1  # every k-th layer is MoE (1: all of them)
    num_dense_layers: int = 0  # the first k layers keep the dense MLP (DeepSeek first_k_dense_replace)
    expert_bias: bool = False  # biases inside each expert (GPT-OSS)
    glu_clamp: bool = False  # the experts' GLU inputs clamped before the activation (GPT-OSS swiglu_limit)
    router_bias: bool = False
    # > 0: each expert computes capacity_factor x its balanced share of tokens, padded or dropped (GShard,
    # Lepikhin et al. 2020 §2.2; Switch Transformer, Fedus et al. 2021 §2.2); 0: dropless (every routed token)
    capacity_factor: float = 0.0
    # ---- state-space mixers (model/ssm.py)
    ssm: str = "none"  # mamba: Gu & Dao 2023 (Jamba's mixer); mamba2: Dao & Gu 2024 (SSD)
    attention_layer_interval: int = 1  # with an ssm: layer i attends iff i % interval == offset (0: never)
    attention_layer_offset: int = 0
    ssm_state_size: int = 16  # N
    ssm_expand: int = 2  # inner width = expand * hidden_size
    ssm_conv_kernel: int = 4
    ssm_num_heads: int = 0  # Mamba-2 heads
    ssm_head_dim: int = 0  # Mamba-2 head width (0: ssm_expand * hidden_size / ssm_num_heads)
    ssm_num_groups: int = 1  # Mamba-2 B/C groups
    ssm_dt_rank: int = 0  # Mamba: width of the step-size projection (0: ceil(hidden_size / 16))
    ssm_bias: bool = False  # biases on the in/out projections
    ssm_conv_bias: bool = True
    ssm_inner_norms: bool = False  # Jamba: RMSNorms on the step size, B and C
    ssm_chunk_size: int = 256  # Mamba-2 SSD chunk length (FLOPs of the chunked scan)
    # one character per layer (Nemotron-H hybrid_override_pattern): M the ssm mixer, * attention, - dense
    # MLP, E MoE, each a layer of its own; "" : every layer has a mixer and an MLP (the fields above)
    layer_pattern: str = ""
    # ---- multi-token prediction (DeepSeek-V3, arXiv 2412.19437, §2.2)
    num_mtp_layers: int = 0  # extra modules predicting token t+1+k, each one layer deep
    family: str = "custom"
    source: str = ""

    def __post_init__(self) -> None:
        w = f"model({self.name})"
        for f in ("num_layers", "hidden_size", "num_heads", "vocab_size", "top_k", "num_experts",
                  "moe_layer_interval", "ssm_state_size", "ssm_expand", "ssm_conv_kernel", "ssm_num_groups",
                  "ssm_chunk_size"):
            v = getattr(self, f)
            require(isinstance(v, int) and v >= 1, f"{w}.{f}", v, "must be a positive integer")
        for f in ("num_encoder_layers", "num_kv_heads", "head_dim", "expert_ffn_hidden_size", "ffn_hidden_size",
                  "num_shared_experts", "max_position_embeddings", "position_offset", "sliding_window",
                  "full_attention_interval", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
                  "num_dense_layers", "attention_layer_interval", "attention_layer_offset", "ssm_num_heads",
                  "ssm_dt_rank", "num_mtp_layers", "shared_expert_ffn_hidden_size", "ssm_head_dim"):
            v = getattr(self, f)
            require(isinstance(v, int) and v >= 0, f"{w}.{f}", v, "must be a non-negative integer")
        for f, choices in _CHOICES.items():
            v = getattr(self, f)
            rule = "unknown activation" if f == "activation" else f"must be one of {', '.join(choices)}"
            require(v in choices, f"{w}.{f}", v, rule + did_you_mean(v, choices))
        require(self.position_offset == 0 or self.position_offset < self.max_position_embeddings,
                f"{w}.position_offset", self.position_offset,
                f"must be less than max_position_embeddings={self.max_position_embeddings}")
        if self.arch == "decoder":
            require(self.num_encoder_layers == 0, f"{w}.num_encoder_layers", self.num_encoder_layers,
                    "must be 0 for a decoder-only model")
        else:
            require(self.num_encoder_layers >= 1, f"{w}.num_encoder_layers", self.num_encoder_layers,
                    "an encoder-decoder model needs at least one encoder layer")
            require(self.ssm == "none" and not self.sliding_window and not self.kv_lora_rank, f"{w}.arch",
                    self.arch, "an encoder-decoder model has plain attention (no ssm, window or MLA)")
        self._fill_defaults(w)
        check_shapes(self, w)

    def _fill_defaults(self, w: str) -> None:
        if self.num_kv_heads == 0 or self.kv_lora_rank:  # MLA: every head has its own decompressed K and V
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        if self.head_dim == 0:
            require(not self.kv_lora_rank, f"{w}.head_dim", 0, "is required with MLA (kv_lora_rank > 0)")
            require(self.hidden_size % self.num_heads == 0, f"{w}.num_heads", self.num_heads,
                    f"must divide hidden_size={self.hidden_size} when head_dim is not given")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.v_head_dim == 0:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        if self.expert_ffn_hidden_size == 0:
            object.__setattr__(self, "expert_ffn_hidden_size", self.ffn_hidden_size)
        if self.shared_expert_ffn_hidden_size == 0:
            object.__setattr__(self, "shared_expert_ffn_hidden_size", self.expert_ffn_hidden_size)
        if self.ssm == "mamba" and self.ssm_dt_rank == 0:  # MambaConfig: time_step_rank "auto"
            object.__setattr__(self, "ssm_dt_rank", -(-self.hidden_size // 16))
        if self.ssm == "mamba2" and self.ssm_head_dim == 0:  # Mamba2Mixer: heads split expand * hidden_size
            inner = self.ssm_expand * self.hidden_size
            require(self.ssm_num_heads >= 1 and inner % self.ssm_num_heads == 0, f"{w}.ssm_num_heads",
                    self.ssm_num_heads, f"must be a positive divisor of ssm_expand * hidden_size = {inner} "
                    "(or give ssm_head_dim)")
            object.__setattr__(self, "ssm_head_dim", inner // self.ssm_num_heads)

    # ---- shape facts -------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def max_seq_len(self) -> int:
        """The longest sequence a learned position table can embed (0: no limit; rotary, ALiBi, relative and
        sinusoidal positions have no table to run past)."""
        return self.max_position_embeddings - self.position_offset if self.max_position_embeddings else 0

    @property
    def q_width(self) -> int:
        """Width of the query projection: num_heads * head_dim."""
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def attn_out_width(self) -> int:
        """Width of the attention output (the output projection's input): num_heads * v_head_dim."""
        return self.num_heads * self.v_head_dim

    @property
    def ssm_inner(self) -> int:
        """Inner width of a state-space mixer: Mamba-2 heads x head width, Mamba expand x hidden_size."""
        return self.ssm_num_heads * self.ssm_head_dim if self.ssm == "mamba2" else self.ssm_expand * self.hidden_size

    @property
    def ffn_matrices(self) -> int:
        """Matrices in one MLP: 3 with GLU (gate, up, down), else 2."""
        return 3 if self.glu else 2

    @property
    def total_layers(self) -> int:
        return self.num_layers + self.num_encoder_layers

    def layer_kind(self, i: int) -> LayerKind:
        """The kind of decoder layer ``i`` (0-based), as transformers builds it.

        Mixer: JambaConfig.layers_block_type (attention iff i % attn_layer_period == attn_layer_offset);
        Gemma2/3 and GPT-OSS layer_types (full iff (i + 1) % interval == 0). MLP: DeepSeek-V3 dense below
        first_k_dense_replace; Mixtral/Qwen3-MoE/Jamba MoE iff (i + 1) % interval == 0.
        """
        if self.layer_pattern:
            c = self.layer_pattern[i]
            mixer = {"M": self.ssm, "*": "attention"}.get(c, "none")
            return LayerKind(mixer=mixer, mlp={"-": "dense", "E": "moe"}.get(c, "none"))
        attends = self.ssm == "none" or (self.attention_layer_interval > 0
                                         and i % self.attention_layer_interval == self.attention_layer_offset)
        if not attends:
            mixer = self.ssm
        elif self.sliding_window and not (self.full_attention_interval
                                          and (i + 1) % self.full_attention_interval == 0):
            mixer = "sliding"
        else:
            mixer = "attention"
        if self.ffn_hidden_size == 0:
            mlp = "none"
        elif self.is_moe and i >= self.num_dense_layers and (i + 1) % self.moe_layer_interval == 0:
            mlp = "moe"
        else:
            mlp = "dense"
        return LayerKind(mixer=mixer, mlp=mlp)

    def layer_kinds(self, num_layers: int | None = None) -> tuple[tuple[LayerKind, int], ...]:
        """(kind, count) of the first ``num_layers`` decoder layers, kinds in order of first appearance."""
        return _layer_kinds(self, self.num_layers if num_layers is None else num_layers)

    def num_moe_layers(self, num_layers: int | None = None) -> int:
        return sum(c for k, c in self.layer_kinds(num_layers) if k.mlp == "moe")

    # ---- parameter counts (exact, biases and norms included) ---------------------------------------
    def attention_params(self) -> int:
        """One self-attention block: projections, their biases, QK-norm weights and sink logits."""
        if self.is_mla:
            core = mla_params(self)
        else:
            d, q, kv = self.hidden_size, self.q_width, self.kv_width
            weights = d * q + 2 * d * kv + q * d
            bias = (q + 2 * kv + d) if self.linear_bias or self.attention_bias else (q + 2 * kv) * self.qkv_bias
            core = weights + bias
        per_norm = self.norm_params() // self.hidden_size  # 1 (RMSNorm) or 2 (LayerNorm) per element
        qk_norm = {"none": 0, "head": 2 * self.head_dim, "full": self.q_width + self.kv_width}[self.qk_norm]
        sinks = self.num_heads if self.attention_sinks else 0  # GptOssAttention.sinks
        return core + per_norm * qk_norm + sinks

    def mlp_params(self, ffn: int | None = None) -> int:
        f = self.ffn_hidden_size if ffn is None else ffn
        d = self.hidden_size
        weights = self.ffn_matrices * d * f
        biases = ((self.ffn_matrices - 1) * f + d) if self.linear_bias else 0
        return weights + biases

    def expert_params(self) -> int:
        """One routed expert: its MLP and, for GPT-OSS, its own biases (GptOssExperts.*_bias)."""
        f = self.expert_ffn_hidden_size
        own_bias = ((self.ffn_matrices - 1) * f + self.hidden_size) if self.expert_bias and not self.linear_bias \
            else 0
        return self.mlp_params(f) + own_bias

    def router_params(self) -> int:
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_bias else 0)

    def moe_params(self, active_only: bool = False) -> int:
        experts = self.top_k if active_only else self.num_experts
        shared = self.num_shared_experts * self.mlp_params(self.shared_expert_ffn_hidden_size)
        shared += self.hidden_size * self.shared_expert_gate  # Qwen2MoeSparseMoeBlock.shared_expert_gate
        return experts * self.expert_params() + shared + self.router_params()

    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def layer_params(self, *, moe: bool, cross_attention: bool, active_only: bool = False) -> int:
        """An attention layer (with cross-attention in an encoder-decoder's decoder)."""
        mlp = self.moe_params(active_only) if moe else self.mlp_params()
        attn = self.attention_params() * (2 if cross_attention else 1)
        norms = self.norm_params() * (3 if cross_attention else 2 + (2 if self.post_norms else 0))
        return attn + mlp + norms

    def kind_params(self, kind: LayerKind, active_only: bool = False) -> int:
        """One decoder layer of ``kind``: mixer, MLP and their norms."""
        mixers = {"mamba": ssm_params, "mamba2": ssm_params, "none": lambda _: 0}
        mixer = mixers.get(kind.mixer, TransformerSpec.attention_params)(self)
        mlps = {"moe": self.moe_params(active_only) if kind.mlp == "moe" else 0,
                "dense": self.mlp_params() if kind.mlp == "dense" else 0}
        mlp = mlps.get(kind.mlp, 0)
        blocks = (kind.mixer != "none") + (kind.mlp != "none")
        norms = self.norm_params() * blocks * (2 if self.post_norms else 1)
        return mixer + mlp + norms

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
        if self.arch == "encoder-decoder":
            n_moe = self.num_moe_layers()
            return ((self.num_layers - n_moe) * self.layer_params(moe=False, cross_attention=True)
                    + n_moe * self.layer_params(moe=True, cross_attention=True, active_only=active_only))
        return sum(n * self.kind_params(k, active_only) for k, n in self.layer_kinds())

    def mtp_params(self, active_only: bool = False) -> int:
        """Multi-token prediction modules (DeepSeek-V3 §2.2, eq. 21-22): RMSNorms on the hidden state and on
        the next token's embedding, the projection M (2d -> d), one transformer layer (MoE when the model is)
        and the norm before the output head. Embedding table and output head are shared with the model."""
        d = self.hidden_size
        layer = self.kind_params(LayerKind(mixer="attention", mlp="moe" if self.is_moe else "dense"), active_only)
        return self.num_mtp_layers * (3 * self.norm_params() + 2 * d * d + layer)

    def num_params(self, active_only: bool = False) -> int:
        """All parameters (or the ones one token activates, for MoE), multi-token-prediction modules
        included."""
        enc = self.num_encoder_layers * self.layer_params(moe=False, cross_attention=False)
        return (enc + self.decoder_layer_params(active_only) + self.embedding_params() + self.output_params()
                + self.mtp_params(active_only))

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
            if ftype == "int":  # its range is __post_init__'s rule (>= 1 or >= 0), stated whole there
                kwargs[key] = as_int(value, field)
            elif ftype == "bool":
                kwargs[key] = as_bool(value, field)
            elif ftype == "float":
                kwargs[key] = as_float(value, field, minimum=0.0)
            elif key in _CHOICES:
                kwargs[key] = as_choice(value, field, _CHOICES[key])
            else:
                kwargs[key] = str(value)
        kwargs.setdefault("name", "custom")
        for req in ("num_layers", "hidden_size", "num_heads", "ffn_hidden_size", "vocab_size"):
            require(req in kwargs, f"{where}.{req}", None, "is required")
        return cls(**kwargs)


@cache
def _layer_kinds(spec: TransformerSpec, n: int) -> tuple[tuple[LayerKind, int], ...]:
    return tuple(Counter(spec.layer_kind(i) for i in range(n)).items())
