"""The op vocabulary every model expands into: matmuls (m, k, n), attention cores and element-wise ops, each with
its forward FLOPs and bytes (conventions: model/ops.py). Kept apart from ops.py so that the mixer modules
(model/mla.py, model/ssm.py) can build ops without importing the whole expansion."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

# A GEMM launches one kernel forward and two backward (input and weight gradients: Megatron-LM
# layers.py LinearWithGradAccumulationAndAsyncCommunication.backward, autograd's mm backward alike).
MATMUL_KERNELS = (1.0, 2.0)
# FlashAttention-2: one forward kernel; its backward runs three (flash_bwd_launch_template.h: the dot(dO, O)
# preprocess, the main dq/dk/dv kernel, the dq conversion), Dao-AILab/flash-attention csrc/flash_attn/src.
FLASH_KERNELS = (1.0, 3.0)
# A fused norm: one forward kernel, and the input gradient plus the weight-gradient reduction backward
# (Transformer Engine / Apex layer-norm backward: ln_bwd kernel and its finalize kernel).
NORM_KERNELS = (1.0, 2.0)


class OpKind(str, Enum):
    MATMUL = "matmul"
    ATTENTION = "attention"  # activation x activation batched matmul (scores, attention over values)
    ELEMENTWISE = "elementwise"


class Shard(str, Enum):
    COLUMN = "column"
    ROW = "row"
    HEADS = "heads"
    HIDDEN = "hidden"
    TOKENS = "tokens"
    VOCAB = "vocab"
    REPLICATED = "replicated"


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One forward op of one micro-batch. ``count`` independent (m x k) @ (k x n) products for matmuls."""

    name: str
    kind: OpKind
    shard: Shard
    flop: float  # forward FLOPs, all ``count`` products together
    bytes: float  # forward bytes read + written at the activation precision (weights included)
    count: float = 1.0
    m: float = 0.0
    k: float = 0.0
    n: float = 0.0
    params: int = 0  # weight parameters the op reads
    attention_core: bool = False  # what selective recomputation recomputes (Korthikanti et al. §4.2)
    expert: bool = False  # an expert's op: count = experts, spread over expert parallelism
    backward_factor: float = 2.0  # backward time / forward time (2: gradients of both operands)
    # the fraction of the backward that runs: 1 when training every weight; a frozen weight's matmul computes only
    # its input's gradient (0.5), a layer below every trainable parameter none (0) (model/finetune.py)
    backward_share: float = 1.0
    # what the op costs when a framework runs it as separate eager PyTorch kernels instead of one fused kernel
    # (model/ops.py eager_bytes_per_elt): "norm", "rope" or "glu" ("": always one kernel), and its bytes then
    eager_kind: str = ""
    eager_bytes: float = 0.0
    # attention cores of a sliding-window layer: keys per query (n = min(s_kv, window)); 0: no window. A causal
    # kernel executes s*n - n*(n-1)/2 of the s*n products counted, not half of them as for full attention.
    window: int = 0
    # the share of the op's forward that torchtitan's op-level selective checkpointing recomputes (it saves the
    # output of every other matmul and of the attention kernel, and recomputes the rest: model/ops.py op_sac)
    sac_recompute: float = 1.0
    # kernels the op launches on one device (forward, backward) as one kernel per op, and as the eager chain of
    # ``eager_kind`` (model/ops.py eager_kernels); estimate/compute.py prices each at max(roofline, floor) + gap
    kernels: tuple[float, float] = (1.0, 1.0)
    eager_kernels: tuple[float, float] = (0.0, 0.0)
    # a cross-entropy's (forward, backward) bytes under each implementation a framework may run, in the order of
    # model/loss.py LOSS_KERNELS (estimate/compute.py picks the framework's loss_kernel); () for other ops
    loss_bytes: tuple[tuple[float, float], ...] = ()
    # a GEMM in fp32 whatever the training precision (peft's fp32 LoRA adapters: model/finetune.py), at the chip's
    # fp32 peak (PyTorch leaves TF32 off for matmuls: torch.backends.cuda.matmul.allow_tf32 = False)
    fp32: bool = False


def matmul_elements(count: Any, m: Any, k: Any, n: Any) -> Any:
    """The elements ``count`` (m x k) @ (k x n) products move: both operands read, the result written (floats, or
    columns of them: estimate/compute.py prices a rank's local share with it)."""
    return count * (m * k + k * n + m * n)


def matmul(name: str, m: float, k: float, n: float, bytes_per_elt: float, shard: Shard,
           count: float = 1.0, weight: bool = True, expert: bool = False) -> Op:
    """(m x k) @ (k x n), ``count`` times. Bytes: read both operands, write the result."""
    elts = matmul_elements(count, m, k, n)
    return Op(name=name, kind=OpKind.MATMUL if weight else OpKind.ATTENTION, shard=shard,
              flop=2.0 * count * m * k * n, bytes=elts * bytes_per_elt, count=count, m=m, k=k, n=n,
              params=int(count * k * n) if weight else 0, attention_core=not weight, expert=expert,
              kernels=MATMUL_KERNELS)


def elementwise(name: str, elements: float, bytes_per_elt: float, shard: Shard,
                reads: float = 1.0, writes: float = 1.0, extra_bytes_per_elt: float = 0.0,
                attention_core: bool = False, expert: bool = False, flop: float = 0.0,
                eager_kind: str = "", eager_bytes_per_elt: float = 0.0,
                kernels: tuple[float, float] = (1.0, 1.0), eager_kernels: tuple[float, float] = (0.0, 0.0)) -> Op:
    """An element-wise op over ``elements`` values: ``reads`` inputs read, ``writes`` outputs written.
    ``flop``: model FLOPs of a memory-bound op that has some (a depthwise convolution); 0 for the rest.
    ``eager_kind`` / ``eager_bytes_per_elt`` / ``eager_kernels``: its bytes per element and its (forward, backward)
    kernels as a chain of eager PyTorch kernels; ``kernels``: as one kernel per op (a fused norm's backward is two)."""
    b = elements * ((reads + writes) * bytes_per_elt + extra_bytes_per_elt)
    return Op(name=name, kind=OpKind.ELEMENTWISE, shard=shard, flop=flop, bytes=b, count=1.0,
              attention_core=attention_core, expert=expert, eager_kind=eager_kind,
              eager_bytes=elements * eager_bytes_per_elt if eager_kind else 0.0, kernels=kernels,
              eager_kernels=eager_kernels if eager_kind else (0.0, 0.0))


# Activations whose Hugging Face implementation is a chain of eager ops (transformers.activations.NewGELUActivation),
# not one torch kernel: their time and saved tensors follow the "gelu" eager form when a framework runs Hugging Face
# modeling code (its eager_ops list "gelu").
COMPOSITE_ACTIVATIONS = ("gelu_new",)


def eager_bytes_per_elt(kind: str, e: float) -> float:
    """Bytes per element an element-wise op moves as a chain of eager PyTorch kernels (one fused kernel reads and
    writes each element once), at ``e`` bytes per activation element:
    - norm: Hugging Face's RMSNorm (LlamaRMSNorm.forward): upcast to fp32 (read e, write 4; none in fp32),
      pow(2) (4 + 4), mean (4), x * rsqrt (4 + 4), downcast (4 + e; none in fp32), * weight (e + e);
    - rope: apply_rotary_pos_emb over q and k: q * cos (e + e), the negated half (e/2 + e/2), cat (e + e),
      rotate_half(q) * sin (e + e), the sum (2e + e) = 10e (torchtitan's complex form: upcast, complex product,
      downcast = 2e + 16, the same 20 bytes at 16 bits);
    - glu: act(gate) (e + e), then * up (2e + e) = 5e per hidden element, against a fused kernel's 3e;
    - gelu: Hugging Face's ``gelu_new`` (NewGELUActivation, GPT-2's and T5 v1.1's), 0.5 x (1 + tanh(c (x + 0.044715
      x^3))) as eight ops: pow (e + e), * 0.044715 (e + e), x + (2e + e), * c (e + e), tanh (e + e), 1 + (e + e),
      0.5 * x (e + e), the product (2e + e) = 18e, against torch's one GELU kernel's 2e.
    LayerNorm is one native kernel in eager PyTorch too (torch.nn.functional.layer_norm)."""
    if kind == "norm":
        cast = 0.0 if e >= 4 else (e + 4.0) + (4.0 + e)
        return cast + 8.0 + 4.0 + 8.0 + 2 * e
    if kind == "rope":
        return 10.0 * e
    if kind == "glu":
        return 5.0 * e
    if kind == "gelu":
        return 18.0 * e
    raise ValueError(f"no eager form for {kind!r}")


# The share of an eager chain's bytes that PyTorch moves with its indexed element-wise kernels: TensorIterator
# vectorises only contiguous operands of one dtype (aten/src/ATen/native/cuda/CUDALoops.cuh, launch_vectorized_kernel);
# a broadcast, a dtype cast or a strided view takes the unrolled or offset-computing kernels, whose rate the SMs bound
# (efficiency eager_indexed_memory). RMSNorm: the two casts (12 of 36 bytes at 16 bits) and the products by the
# per-token rsqrt and the weight (12) are indexed, pow and mean (12) vectorised: 2/3. RoPE: every operand is a
# transposed view of q or k, the cos and sin broadcast: all of it. The GLU product and gelu_new's chain: contiguous,
# none. On an H100 and an H200 (BENCHMARKS.md session 26, the profiles' aten ops by shape) these shares put the
# RMSNorm and RoPE chains' summed time within 1 %; each alone less well: RoPE's forward (its strided views) priced
# 27-37 % under, the RMSNorm's 6-11 % over; one factor for forward and backward. fp32 models' norms have no casts
# (16 of 28 bytes indexed) but keep the 2/3.
EAGER_INDEXED_SHARE = {"norm": 2.0 / 3.0, "rope": 1.0, "glu": 0.0, "gelu": 0.0}


def eager_kernels(kind: str, e: float) -> tuple[float, float]:
    """(forward, backward) kernels of the eager chains of eager_bytes_per_elt, one per PyTorch op that launches:
    - norm: upcast, pow, mean, + eps, rsqrt, x * rsqrt, downcast, * weight = 8 (6 in fp32: no casts);
    - rope: q * cos, neg, cat, * sin, + per rotated tensor, q and k = 10;
    - glu: act(gate), * up = 2;
    - gelu: pow, * 0.044715, +, * c, tanh, 1 +, 0.5 * x, * = 8.
    The backward launches about two kernels per forward one (a product's gradient is two products, a cast's one);
    rope's backward is the same five element-wise products and sums per tensor (10); glu's: grad up = g * act,
    grad act = g * up, act's derivative, and the cat of the two gradients into the fused gate/up GEMM's (4)."""
    if kind == "norm":
        fwd = 6.0 if e >= 4 else 8.0
        return fwd, 2.0 * fwd
    if kind == "rope":
        return 10.0, 10.0
    if kind == "glu":
        return 2.0, 4.0
    if kind == "gelu":
        return 8.0, 16.0
    raise ValueError(f"no eager form for {kind!r}")
