"""Fine-tuning: which parameters train, and what that changes in a model's ops.

Three modes (``Finetune.mode``):
- ``full``: every parameter trains (pre-training arithmetic);
- ``freeze``: the parts named in ``freeze`` keep their weights. Parts follow Hugging Face's accessors, which
  is what a fine-tuning script freezes: ``embeddings`` (``get_input_embeddings()``: the token table, and the
  LM head when it is tied to it), ``encoder`` (``get_encoder()``: the encoder layers and the shared token
  table an encoder-decoder model keeps in it) and ``decoder`` (``get_decoder()``: the decoder layers, the
  token table and the final norm; the LM head stays trainable unless tied);
- ``lora``: every base weight is frozen; rank-r adapters W + B A (Hu et al. 2021, LoRA, §4.1: A is r x d_in,
  B is d_out x r) train on the named projections of every attention and MLP block (``lora_targets``, peft's
  names without ``_proj``; peft's default for Llama, T5 and BART is q and v).

What autograd then does (PyTorch computes a gradient only for inputs that require one: ``should_compute_output``
in the generated backward functions): a frozen matmul whose input requires a gradient computes the input
gradient only (half of the 4*m*k*n backward FLOPs); a trainable one whose input does not (the first trainable
layer above frozen embeddings) the weight gradient only; a layer below every trainable parameter has no
backward at all and saves no activations. ``Op.backward_share`` carries the fraction of each op's backward
that runs; ``LayerGroup.frozen_params`` the parameters that carry no gradient or optimizer state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from greentrain.config import require
from greentrain.model.primitives import Op, OpKind, Shard, matmul
from greentrain.model.spec import TransformerSpec

FINETUNE_MODES = ("full", "freeze", "lora")
FREEZABLE = ("embeddings", "encoder", "decoder")
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
MAX_LORA_RANK = 65536


@dataclass(frozen=True, slots=True, kw_only=True)
class Finetune:
    """Which parameters train (field names are the workload's: workload.finetune, ...)."""

    mode: str = "full"
    freeze: tuple[str, ...] = ()
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q", "v")

    def __post_init__(self) -> None:
        require(self.mode in FINETUNE_MODES, "workload.finetune", self.mode,
                f"must be one of {', '.join(FINETUNE_MODES)}")
        for part in self.freeze:
            require(part in FREEZABLE, "workload.freeze", part, f"must be one of {', '.join(FREEZABLE)}")
        require(self.mode == "freeze" or not self.freeze, "workload.freeze", list(self.freeze),
                f"applies to finetune: freeze only (finetune is {self.mode})")
        require(self.mode != "freeze" or bool(self.freeze), "workload.freeze", [],
                f"must name at least one of {', '.join(FREEZABLE)} with finetune: freeze")
        require(1 <= self.lora_rank <= MAX_LORA_RANK, "workload.lora_rank", self.lora_rank,
                f"must be between 1 and {MAX_LORA_RANK}")
        require(len(self.lora_targets) > 0, "workload.lora_targets", [], "must name at least one projection")
        for t in self.lora_targets:
            require(t in LORA_TARGETS, "workload.lora_targets", t, f"must be one of {', '.join(LORA_TARGETS)}")

    def check(self, spec: TransformerSpec) -> None:
        """Refuse what this model cannot do (field-named errors)."""
        if self.mode == "freeze":
            require(spec.arch == "encoder-decoder" or "encoder" not in self.freeze, "workload.freeze", "encoder",
                    f"needs an encoder-decoder model ({spec.name} is decoder-only)")
            stacks = {"encoder", "decoder"} if spec.arch == "encoder-decoder" else {"decoder"}
            require(not stacks <= set(self.freeze) or self.trains_head(spec), "workload.freeze",
                    list(self.freeze), f"leaves nothing of {spec.name} to train (its LM head is tied)")
        if self.mode == "lora":
            require(not spec.is_mla or not {"q", "k", "v"} & set(self.lora_targets), "workload.lora_targets",
                    list(self.lora_targets), f"q, k and v are not modelled on MLA attention ({spec.name})")
            require(spec.glu or "gate" not in self.lora_targets, "workload.lora_targets", "gate",
                    f"{spec.name} has no gate projection (not a GLU)")

    @property
    def trains_embeddings(self) -> bool:
        """Every freezable part holds the token table (Hugging Face keeps it in the encoder and decoder stacks)."""
        return self.mode == "full"

    def trains_head(self, spec: TransformerSpec) -> bool:
        """The LM head: tied to the token table, or its own matrix (frozen only by lora)."""
        return self.trains_embeddings if spec.tied_embeddings else self.mode != "lora"

    def trains_layers(self, encoder: bool) -> bool:
        """The base weights of the encoder's (``encoder``) or the decoder's layers."""
        if self.mode == "lora":
            return False
        return self.mode == "full" or ("encoder" if encoder else "decoder") not in self.freeze


FULL = Finetune()

# Base op (its name's last part, model/ops.py) -> the targets whose adapters sit beside it: a fused op (qkv, kv,
# gate+up) holds several; each adapter's (d_in, d_out) comes from the spec, an MLP's (a dense one, each routed or
# shared expert) from its base op (_adapter_shapes).
_BASE_OPS = {"qkv": ("q", "k", "v"), "q": ("q",), "kv": ("k", "v"), "out": ("o",), "up": ("gate", "up"),
             "down": ("down",)}


def _adapter_shapes(spec: TransformerSpec, op: Op, suffix: str, targets: tuple[str, ...]) -> list[tuple[str, int, int]]:
    """(target, d_in, d_out) of the adapters beside the base op ``op`` (its name's last part ``suffix``)."""
    d, q, kv, out = spec.hidden_size, spec.q_width, spec.kv_width, spec.attn_out_width
    width = int(op.n) // (2 if spec.glu else 1) if suffix == "up" else int(op.n)  # gate and up fused under GLU
    dims = {"q": (d, q), "k": (d, kv), "v": (d, kv), "o": (out, d), "gate": (int(op.k), width),
            "up": (int(op.k), width), "down": (int(op.k), width)}
    held = _BASE_OPS[suffix] if (suffix != "up" or spec.glu) else ("up",)
    return [(t, *dims[t]) for t in held if t in targets]


def lora_adapters(spec: TransformerSpec, op: Op, ft: Finetune, e: float) -> list[Op]:
    """The adapters beside base op ``op`` (none if it is not a target): A (T, d_in) @ (d_in, r), then
    B (T, r) @ (r, d_out), per adapted projection. TP splits B with the base op's output (column) or A with
    its input (row); the small other factor is replicated and counted whole. On MoE, each routed expert has its
    own adapters, on that expert's tokens (``count`` experts, split over expert parallelism as the experts are:
    Megatron Bridge's LoRA on TEGroupedLinear, peft's on each expert's projections), and each shared expert its."""
    suffix = op.name.rsplit(".", 1)[-1]
    if ft.mode != "lora" or op.kind is not OpKind.MATMUL or suffix not in _BASE_OPS \
            or op.name.startswith(("mtp.", "lm_head")):
        return []
    r, tokens, n = ft.lora_rank, op.m, op.count
    out: list[Op] = []
    for target, d_in, d_out in _adapter_shapes(spec, op, suffix, ft.lora_targets):
        a_shard = Shard.ROW if op.shard is Shard.ROW else Shard.REPLICATED
        b_shard = Shard.COLUMN if op.shard is Shard.COLUMN else Shard.REPLICATED
        out += [matmul(f"{op.name}.lora_a.{target}", tokens, d_in, r, e, a_shard, count=n, expert=op.expert),
                matmul(f"{op.name}.lora_b.{target}", tokens, r, d_out, e, b_shard, count=n, expert=op.expert)]
    return out


def expert_adapter_params(ops: tuple[Op, ...]) -> int:
    """Parameters of the routed experts' own LoRA adapters among ``ops`` (split over expert parallelism)."""
    return sum(op.params for op in ops if op.expert and ".lora_" in op.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Flow:
    """Whether the decoder's (or the encoder's) hidden stream requires a gradient at a point of the forward."""

    stream: bool
    encoder_out: bool = False  # the encoder's output (cross-attention keys and values read it)


def layer_ops(spec: TransformerSpec, ops: tuple[Op, ...], ft: Finetune, *, trainable: bool, flow: Flow,
              e: float, norms_train: bool | None = None) -> tuple[tuple[Op, ...], bool, int]:
    """One layer's ops with their backward share and LoRA adapters, in forward order; the stream's flow after
    the layer, and the adapters' parameters. A chain: an op's input requires a gradient once any trainable
    weight (a norm's scale included: ``norms_train``, default ``trainable``; or the encoder's output, for
    cross-attention K/V) came before it; inside attention, Q, K and V each (scores: dQ and dK; attention over
    values: dP and dV)."""
    norms_train = trainable if norms_train is None else norms_train
    out: list[Op] = []
    flowing, adapter_params = flow.stream, 0
    qkv = {"q": flowing, "k": flowing, "v": flowing}  # which of Q, K, V require a gradient
    for op in ops:
        suffix = op.name.rsplit(".", 1)[-1]
        reads_encoder = op.name.startswith("xattn.") and suffix == "kv"
        grad_in = flow.encoder_out if reads_encoder else flowing
        if op.kind is OpKind.MATMUL and op.params:
            adapters = lora_adapters(spec, op, ft, e)
            out.append(replace(op, backward_share=(float(grad_in) + float(trainable)) / 2.0))
            for a in adapters:  # A reads the op's input; B the output of A, which requires a gradient
                a_in = grad_in if ".lora_a." in a.name else True
                out.append(replace(a, backward_share=(float(a_in) + 1.0) / 2.0))
                adapter_params += a.params
            adapted = {a.name.rsplit(".", 1)[-1] for a in adapters}
            for t in _BASE_OPS.get(suffix, ()) if suffix in ("qkv", "q", "kv") else ():
                qkv[t] = grad_in or trainable or t in adapted
            flowing = flowing or trainable or bool(adapters) or (reads_encoder and flow.encoder_out)
        elif norms_train and suffix.endswith("norm"):  # a trainable scale: its gradient, and the stream flows
            out.append(replace(op, backward_share=1.0))
            flowing = True
            qkv = {t: g or suffix == "norm" for t, g in qkv.items()}  # the block's input norm feeds Q, K, V
        else:
            out.append(replace(op, backward_share=_core_share(op, qkv, flowing)))
            if op.attention_core:
                flowing = flowing or any(qkv.values())
    return tuple(out), flowing, adapter_params


def _core_share(op: Op, qkv: dict[str, bool], flowing: bool) -> float:
    """The backward share of an op without weights: the attention core's from Q, K and V (scores: dQ, dK;
    softmax: dP; values: dP, dV; a fused kernel computes all three); any other from the stream."""
    if not op.attention_core:
        return float(flowing)
    p = qkv["q"] or qkv["k"]
    if op.name.endswith(".scores"):
        return (float(qkv["q"]) + float(qkv["k"])) / 2.0
    if op.name.endswith(".values"):
        return (float(p) + float(qkv["v"])) / 2.0
    return float(p or qkv["v"]) if op.name.endswith(".flash") else float(p)
