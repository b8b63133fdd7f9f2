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

With ``lora_dropout`` > 0 (peft's LoraLayer and torchtune's LoRALinear: ``lora_B(lora_A(dropout(x)))``), each
adapter keeps its own dropped copy of its input and the dropout's 1-byte mask, and runs the dropout kernel
(``lora_drop``: reads and writes the values and writes the mask forward, reads the gradient and the mask and
writes the gradient backward).

The adapters' precision (``lora_dtype``; None: the framework's, estimate/efficiency.yaml ``lora_dtype``):
- ``model``: in the model's compute dtype (torchtune's LoRALinear, NeMo / Megatron Bridge, and peft's under FSDP2's,
  FSDP's or DeepSpeed's bf16 parameters): A reads the base op's 16-bit input, which every adapter on it shares;
- ``fp32``: peft's default on a bf16 model (``get_peft_model(autocast_adapter_dtype=True)`` upcasts the adapters;
  ``LoraLayer._cast_input_dtype`` casts x to their dtype): each adapter casts its input to fp32 and keeps that
  copy, its two GEMMs run in fp32 and its output is cast back;
- ``fp32-autocast``: the same adapters under ``torch.autocast(bf16)`` (Hugging Face Trainer's ``bf16=True``): the
  fp32 copy is cast back to 16 bits for the GEMM, which keeps that 16-bit copy, one per adapter.
Measured on an H200 (benchmarks/gpu_llama_step.py, BENCHMARKS.md): Llama 3 8B LoRA on every projection keeps
29.0 GB more in fp32 than in the model's dtype and runs 35 % longer.

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
from greentrain.model.primitives import Op, OpKind, Shard, elementwise, matmul
from greentrain.model.spec import TransformerSpec

FINETUNE_MODES = ("full", "freeze", "lora")
FREEZABLE = ("embeddings", "encoder", "decoder")
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
LORA_DTYPES = ("model", "fp32", "fp32-autocast")
MAX_LORA_RANK = 65536


@dataclass(frozen=True, slots=True, kw_only=True)
class Finetune:
    """Which parameters train (field names are the workload's: workload.finetune, ...)."""

    mode: str = "full"
    freeze: tuple[str, ...] = ()
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q", "v")
    lora_dtype: str | None = None  # the adapters' precision (LORA_DTYPES); None: the framework's
    lora_dropout: float = 0.0  # dropout on each adapter's input (peft's and torchtune's lora_dropout)

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
        require(self.lora_dtype is None or self.lora_dtype in LORA_DTYPES, "workload.lora_dtype", self.lora_dtype,
                f"must be one of {', '.join(LORA_DTYPES)}")
        require(0.0 <= self.lora_dropout < 1.0, "workload.lora_dropout", self.lora_dropout, "must be >= 0 and < 1")

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
    B (T, r) @ (r, d_out), per adapted projection, and their element-wise ops (adapter_elementwise). TP splits them
    as Megatron Bridge's ParallelLinearAdapter does (peft/utils.py): beside a column-parallel base op, A over its
    rank (ColumnParallelLinear, gather_output) and B over its output; beside a row-parallel one, A over its input
    (RowParallelLinear) and B over its output, gathered. On MoE, each routed expert has its own adapters, on that
    expert's tokens (``count`` experts, split over expert parallelism as the experts are: Megatron Bridge's LoRA on
    TEGroupedLinear, peft's on each expert's projections), and each shared expert its."""
    suffix = op.name.rsplit(".", 1)[-1]
    if ft.mode != "lora" or op.kind is not OpKind.MATMUL or suffix not in _BASE_OPS \
            or op.name.startswith(("mtp.", "lm_head")):
        return []
    r, tokens, n = ft.lora_rank, op.m, op.count
    dtype = ft.lora_dtype if ft.lora_dtype and e < 4 else "model"  # fp32 training: peft's cast is a no-op
    g = 4.0 if dtype == "fp32" else e  # the adapters' GEMM operands
    out: list[Op] = []
    for target, d_in, d_out in _adapter_shapes(spec, op, suffix, ft.lora_targets):
        split = op.shard in (Shard.COLUMN, Shard.ROW)
        a_shard = op.shard if split else Shard.REPLICATED
        b_shard = Shard.COLUMN if split else Shard.REPLICATED
        out += [replace(matmul(f"{op.name}.lora_a.{target}", tokens, d_in, r, g, a_shard, count=n, expert=op.expert),
                        fp32=dtype == "fp32"),
                replace(matmul(f"{op.name}.lora_b.{target}", tokens, r, d_out, g, b_shard, count=n, expert=op.expert),
                        fp32=dtype == "fp32")]
        out += adapter_elementwise(f"{op.name}.%s.{target}", tokens * n, d_in, d_out, e, dtype, op.shard, op.expert)
        if ft.lora_dropout > 0:  # after the cast: on fp32 values in the fp32 precisions
            c = e if dtype == "model" else 4.0
            out.append(_elementwise_op(f"{op.name}.lora_drop.{target}", tokens * n * d_in, 2 * c + 1, 2 * c + 1,
                                       Shard.HIDDEN if op.shard is Shard.ROW else Shard.REPLICATED, op.expert,
                                       (1.0, 1.0)))
    return out


def adapter_elementwise(name: str, tokens: float, d_in: float, d_out: float, e: float, dtype: str, shard: Shard,
                        expert: bool) -> list[Op]:
    """One adapter's eager element-wise kernels around its GEMMs, per token (peft's LoraLayer.forward: ``result +
    lora_B(lora_A(x)) * scaling``), bytes read + written at ``e`` bytes per 16-bit element:
    - ``lora_add`` over d_out: the scaling (2e forward, 2e backward) and the sum (3e forward; backward passes the
      gradient on); in fp32 the scaling moves 8, the sum reads the 16-bit result and the fp32 branch (e + 8) and the
      cast back e + 4 (forward 20 + 2e), and backward the cast's gradient (e + 4), the 16-bit result's (4 + e) and
      the scaling's (8): 16 + 2e. With no cast, the adapter's input gradient joins x's (3e over d_in, backward);
    - ``lora_cast`` over d_in (fp32, fp32-autocast): x to fp32 (e + 4) forward and the gradient back (4 + e) plus
      its sum into x's gradient (3e); under autocast also the fp32 copy back to 16 bits (4 + e) forward and its
      gradient (e + 4) backward. Kernels, forward and backward: lora_add's scaling and sum (2, and the scaling's
      gradient 1; with no cast the input gradient's sum 1 more; in fp32 the cast back and its gradient 1 more each),
      lora_cast's casts (1 or 2, and as many back plus the sum into x's gradient).
    Each follows its side's split under TP (a column-parallel base op's output, a row-parallel one's input; the
    input gradient's sum without a cast goes with the output's). The names' %s is the op's."""
    cast = dtype != "model"
    out_shard = Shard.HIDDEN if shard is Shard.COLUMN else Shard.REPLICATED
    in_shard = Shard.HIDDEN if shard is Shard.ROW else Shard.REPLICATED
    add_f, add_b = (20.0 + 2 * e, 16.0 + 2 * e) if dtype == "fp32" else (5.0 * e, 2.0 * e)
    in_b = 0.0 if cast else 3.0 * e * d_in / d_out  # the input gradient's sum, over d_in, priced on this op
    ops = [_elementwise_op(name % "lora_add", tokens * d_out, add_f, add_b + in_b, out_shard, expert,
                           (3.0 if dtype == "fp32" else 2.0, 3.0 if dtype == "fp32" else (1.0 if cast else 2.0)))]
    if cast:
        casts = 2.0 if dtype == "fp32-autocast" else 1.0
        ops.append(_elementwise_op(name % "lora_cast", tokens * d_in, (e + 4.0) * casts, (4.0 + e) * casts + 3.0 * e,
                                   in_shard, expert, (casts, casts + 1.0)))
    return ops


def _elementwise_op(name: str, elements: float, fwd_bytes: float, bwd_bytes: float, shard: Shard, expert: bool,
                    kernels: tuple[float, float]) -> Op:
    """An element-wise op moving ``fwd_bytes`` per element forward and ``bwd_bytes`` backward."""
    return replace(elementwise(name, elements, 1.0, shard, reads=0.0, writes=0.0, extra_bytes_per_elt=fwd_bytes,
                               expert=expert, kernels=kernels), backward_factor=bwd_bytes / fwd_bytes)


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
