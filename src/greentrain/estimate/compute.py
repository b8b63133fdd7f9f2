"""Compute time of ops on one device: the op is first cut to its local shard by the strategy, then costed
with a roofline: time = max(flop / (peak x eff_matmul(m, k, n)), bytes / (memory bandwidth x eff_memory)).

Roofline: Williams, Waterman & Patterson 2009 ("Roofline", CACM 52(4)). Local shapes follow Megatron-LM
tensor parallelism (Shoeybi et al. 2019 §3: column-parallel first GEMM, row-parallel second), sequence
parallelism (Korthikanti et al. 2022 §4.2.2), context parallelism (tokens split over cp ranks, each
rank's queries attend to all keys: ring attention, Liu et al. 2023) and expert parallelism (Lepikhin et al.
2020, GShard: each rank holds num_experts/ep experts and receives the tokens routed to them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from greentrain.estimate import fp8
from greentrain.estimate.efficiency import Efficiency
from greentrain.estimate.recompute import modules_mask, op_module_masks
from greentrain.hardware.chip import Chip
from greentrain.model.loss import LOSS_KERNELS
from greentrain.model.ops import Op, OpKind, Shard
from greentrain.model.primitives import EAGER_INDEXED_SHARE, matmul_elements
from greentrain.model.routing import (
    EXPERT_ACT,
    EXPERT_BIAS,
    EXPERT_CLAMP,
    EXPERT_DOWN,
    EXPERT_UP,
    FP32_PROBS_BYTES,
    PERMUTE_OPS,
    RECEIVER_ONLY_SHARE,
)
from greentrain.num import maximum, where

Num = Any  # a float, or a column of floats (ndarray) when estimate/vector.py costs many strategies at once


@dataclass(frozen=True, slots=True, kw_only=True)
class Peaks:
    """Dense peak FLOP/s each kind of op runs at, for a training precision."""

    matmul: float  # the transformer layers' weight GEMMs
    attention: float  # activation x activation batched matmuls (scores, attention over values)
    ends: float  # embedding and LM head
    # bytes an fp8 recipe's quantization moves per element of each fp8 GEMM's input (forward) and output
    # gradient (backward): estimate/fp8.py; 0 unless fp8
    cast_bytes_per_elt: float = 0.0
    cast_kernels: float = 0.0  # the kernels that quantization launches per quantized operand (fp8.yaml)
    fp32: float = 0.0  # an fp32 GEMM's (Op.fp32); 0: the matmul peak

    def at_ends(self) -> Peaks:
        """The embedding's and LM head's peak for every op (they stay 16-bit under fp8), no quantization."""
        return Peaks(matmul=self.ends, attention=self.ends, ends=self.ends, fp32=self.fp32)


_PEAKS: dict[tuple[int, str, str], tuple[Chip, Peaks]] = {}


def compute_peaks(chip: Chip, precision: str, fp8_recipe: str = fp8.DEFAULT_RECIPE) -> Peaks:
    """_compute_peaks, once per chip, precision and fp8 recipe (keyed by identity, the chip kept alive: every
    estimate asks)."""
    key = (id(chip), precision, fp8_recipe)
    hit = _PEAKS.get(key)
    if hit is not None and hit[0] is chip:
        return hit[1]
    peaks = _compute_peaks(chip, precision, fp8_recipe or fp8.DEFAULT_RECIPE)
    if len(_PEAKS) > 1024:
        _PEAKS.clear()
    _PEAKS[key] = (chip, peaks)
    return peaks


def _compute_peaks(chip: Chip, precision: str, fp8_recipe: str) -> Peaks:
    """fp8 training runs only the transformer layers' linear GEMMs in fp8: NVIDIA Transformer Engine's
    ``fp8_autocast`` covers te.Linear / LayerNormLinear / LayerNormMLP, while DotProductAttention computes in
    bf16 unless ``fp8_dpa`` is set (TE user guide, "Using FP8 with Transformer Engine"; FP8 attention is
    off by default), and Megatron-LM's output layer is not a TE module. Other precisions: one peak. Every peak
    is the sustained one: x the chip's compute_clock_ratio under a power limit below the die's full one."""
    clock = chip.compute_clock_ratio  # a board run below its die's full power limit (hardware/chip.py)
    peak = chip.peak_flop_per_s(precision) * clock
    fp32 = chip.peak_fp32_flop_per_s * clock  # 0 (a TPU's catalog entry): the matmul peak
    if precision.lower() != "fp8":
        return Peaks(matmul=peak, attention=peak, ends=peak, fp32=fp32)
    half = chip.peak_flop_per_s("bf16") * clock
    recipe = fp8.recipe(fp8.check_chip(fp8_recipe, chip.name))
    # fp8 GEMMs reach a different fraction of their peak than bf16 ones (fp8.gemm_ratio: MAMF fp8 / bf16), and
    # the recipe's scales may slow them (fp8.yaml gemm_factor: rowwise)
    return Peaks(matmul=peak * fp8.gemm_ratio(chip.name) * recipe.gemm_factor, attention=half, ends=half,
                 cast_bytes_per_elt=fp8.cast_bytes_per_element(precision, 2.0, recipe.name),
                 cast_kernels=recipe.kernels, fp32=fp32)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sharding:
    """The strategy's degrees that change an op's local shape: one strategy's, or a column per strategy
    (estimate/vector.py; the micro-batch is then the same for all)."""

    tp: Num = 1
    cp: Num = 1
    ep: Num = 1
    etp: Num = 0  # experts' tensor parallelism (0: tp)
    sp: Num = False  # sequence parallelism in effect


def expert_tp(sh: Sharding) -> Num:
    """The experts' tensor-parallel degree (etp, or tp where it is 0)."""
    if isinstance(sh.etp, np.ndarray):
        return np.where(sh.etp > 0, sh.etp, sh.tp)
    return sh.etp or sh.tp


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalOp:
    flop: float
    bytes: float
    m: float
    k: float
    n: float


def _local(op: Op, sh: Sharding) -> tuple[Num, Num, Num, Num, Num]:
    """(flop, bytes, m, k, n) of the part of ``op`` one device computes (forward)."""
    t = expert_tp(sh) if op.expert else sh.tp  # an expert's matrices: over the expert-tensor-parallel ranks
    if op.kind is OpKind.ELEMENTWISE:
        if op.expert:  # the tp ranks share the experts' work: tokens over tp/etp shards, widths over etp
            split = sh.tp
        elif op.shard in (Shard.HIDDEN, Shard.HEADS, Shard.VOCAB):
            split = t
        else:  # a token-wise op is split with sequence parallelism only
            split = where(sh.sp, t, 1) if op.shard is Shard.TOKENS else 1
        return 0.0, op.bytes / split / sh.cp, 0.0, 0.0, 0.0
    m, k, n, count = op.m / sh.cp, op.k, op.n, op.count
    if op.expert:  # fewer experts per rank, each with the tokens of ep ranks; with etp < tp each of the tp/etp
        # expert-tp groups of a tensor-parallel group gets its own sequence shard (Megatron Core folds tp into ep)
        count, m = count / sh.ep, m * sh.ep * t / sh.tp
    if op.shard in (Shard.COLUMN, Shard.VOCAB):
        n = n / t
    elif op.shard is Shard.ROW:
        k = k / t
    elif op.shard is Shard.HEADS:
        count = count / t
    # the local share of the op's FLOPs (a fused attention op counts two products: scores and values)
    scale = (count / op.count) * (m / op.m) * (k / op.k) * (n / op.n) if op.flop else 0.0
    if op.kind is OpKind.MATMUL:
        # a GEMM moves its local operands (primitives.matmul: both read, the result written, at one width): the
        # rank's rows of the input, its slice of the weights -- of its own count / ep experts only -- and its
        # output. (A share of op.bytes in the FLOPs' proportion kept all num_experts' weights under ep, where each
        # rank holds 1/ep of them, and divided the weights by cp, which replicates them.)
        width = op.bytes / matmul_elements(op.count, op.m, op.k, op.n)
        return op.flop * scale, width * matmul_elements(count, m, k, n), m, k, n
    return op.flop * scale, op.bytes * scale, m, k, n


def local_op(op: Op, sh: Sharding) -> LocalOp:
    """The part of ``op`` one device computes (forward)."""
    flop, nbytes, m, k, n = _local(op, sh)
    return LocalOp(flop=flop, bytes=nbytes, m=m, k=k, n=n)


def is_causal(op: Op) -> bool:
    """A decoder's self-attention is causal (masked); an encoder's and cross-attention are not. model/ops.py
    names them "attn.*", "enc.attn.*" and "xattn.*"."""
    return op.name.startswith("attn.")


def causal_fraction(op: Op) -> float:
    """The share of a causal attention core's counted FLOPs its kernel executes (0: not causal): half for
    full attention; a sliding window of n keys per query executes s*n - n*(n-1)/2 of the s*n counted
    (model/primitives.Op.window)."""
    if not is_causal(op):
        return 0.0
    if op.window and op.m:
        return 1.0 - (op.n - 1) / (2.0 * op.m)
    return 0.5


def _roofline(flop: Num, nbytes: Num, m: Num, k: Num, n: Num, peak_flop_per_s: float,
              memory_bytes_per_s: float, eff: Efficiency, fused_attention: bool, causal: float,
              cuda_cores: bool = False) -> Num:
    """``causal``: the fraction of the counted FLOPs a causal kernel executes (0: not causal). Over columns
    (``flop`` an ndarray) every op has FLOPs; an attention kernel's k and n are the same for all. The framework's
    kernel_efficiency scales the GEMM and attention kernels; memory-bound time is bytes over the chip's streaming
    bandwidth (its fixed per-kernel costs are kernel_s's). ``cuda_cores``: an fp32 GEMM on the CUDA cores
    (Op.fp32), at matmul_max of its peak: the shape factor is the tensor cores' tile quantisation (matmul_half_dim,
    fitted on tensor-core MAMF); measured on an H200, peft's rank-16 fp32 adapters' GEMMs ran 136 ms a step where
    the tensor-core curve priced 0.6 s (BENCHMARKS.md, session 24)."""
    ke = eff.kernel_efficiency
    mem_s = nbytes / (memory_bytes_per_s * eff.memory)
    if not isinstance(flop, np.ndarray) and flop <= 0:
        return mem_s
    if fused_attention:  # local op: m = queries, k = head dim, n = keys
        executed = flop * (causal or 1.0)
        return maximum(executed / (peak_flop_per_s * eff.attention(k, n, causal > 0) * ke), mem_s)
    shape = eff.matmul_max if cuda_cores else eff.matmul(m, k, n)
    return maximum(flop / (peak_flop_per_s * shape * ke), mem_s)


def kernels_s(roofline_s: Num, kernels: float, eff: Efficiency) -> Num:
    """``kernels`` kernels that together take ``roofline_s``: each at least the chip's floor, plus the launch gap
    between kernels (efficiency.yaml kernel_floor_s, kernel_gap_s; none under CUDA graphs)."""
    if kernels <= 0:
        return roofline_s
    return maximum(roofline_s, kernels * eff.kernel_floor_s) + kernels * eff.launch_gap_s


def is_eager(op: Op, eff: Efficiency) -> bool:
    """Whether the framework runs ``op`` as its eager chain (efficiency eager_ops), but a routed expert's op of a
    kind its own MoE models fuse (moe_fused_ops: NeMo AutoModel's fused SwiGLU; its dense MLPs stay eager)."""
    return bool(op.eager_kind) and op.eager_kind in eff.eager_ops and not (op.expert and
                                                                           op.eager_kind in eff.moe_fused_ops)


def op_kernels(op: Op, eff: Efficiency, after_elementwise: bool) -> tuple[float, float]:
    """(forward, backward) kernels ``op`` launches under the framework: its eager chain (efficiency eager_ops),
    none when torch.compile fuses it into the element-wise op before it (fuse_elementwise), else one kernel per
    op (model/primitives.py). A grouped expert GEMM counts once: its per-expert launches are estimate/moe.py's."""
    if is_eager(op, eff):
        return op.eager_kernels
    if eff.fuse_elementwise and after_elementwise and op.kind is OpKind.ELEMENTWISE:
        return 0.0, 0.0
    return op.kernels


def op_time_s(op: LocalOp, peak_flop_per_s: float, memory_bytes_per_s: float, eff: Efficiency,
              fused_attention: bool = False, causal: bool = False) -> float:
    """Roofline time of one local op. A fused (flash) attention kernel runs at the chip's measured attention
    throughput (efficiency.yaml), on the FLOPs it executes: half the score products when causal
    (FlashAttention-2, Dao 2023 §3.1; its benchmark counts causal FLOPs halved)."""
    return _roofline(op.flop, op.bytes, op.m, op.k, op.n, peak_flop_per_s, memory_bytes_per_s, eff,
                     fused_attention, 0.5 if causal else 0.0)


def loss_traffic_scale(op: Op, eff: Efficiency) -> tuple[float, float]:
    """(bytes scale over op.bytes, backward / forward time) of a cross-entropy op under the framework's loss kernel
    (model/loss.py); (1, op.backward_factor) for any other op."""
    if not op.loss_bytes:
        return 1.0, op.backward_factor
    fwd, bwd = op.loss_bytes[LOSS_KERNELS.index(eff.loss_kernel)]
    return fwd / op.bytes, bwd / fwd


@dataclass(frozen=True, slots=True, kw_only=True)
class OpsTime:
    """Forward time of a list of ops, split by what recomputation needs to know (floats, or columns)."""

    forward_s: Num
    attention_core_s: Num  # the part selective recomputation recomputes
    backward_s: Num  # 0: a layer below every trainable parameter (fine-tuning), which saves nothing
    op_sac_s: Num = 0.0  # the part torchtitan's op-level selective checkpointing recomputes (Op.sac_recompute)
    # the forward time of the ops each set of Megatron Core recompute modules repeats: (module mask, seconds)
    # pairs (estimate/recompute.py op_module_masks), for the modules of the framework's selective mode
    module_s: tuple[tuple[int, Num], ...] = ()


# per op: (bytes scale, backward / forward time, an attention op, a fused attention kernel, its causal fraction,
# an fp8 recipe quantizes its input in a kernel of its own (forward), and its output gradient (backward), forward
# floor, forward gaps, backward floor, backward gaps, Megatron module mask)
_Fixed = tuple[float, float, bool, bool, float, bool, bool, float, float, float, float, int]
_KERNELS: dict[tuple[int, int], tuple[tuple[Op, ...], Efficiency, tuple[_Fixed, ...]]] = {}


def _fixed(ops: tuple[Op, ...], eff: Efficiency) -> tuple[_Fixed, ...]:
    """What ops_time needs of each op that depends on the op and the framework only (its kernels: op_kernels; the
    bytes of its eager chain, of its cross-entropy implementation, loss_kernel: model/loss.py, or of a MoE layer's
    token permutations, moe_sender_permutes: model/routing.py), once per op group
    and efficiency (keyed by identity, both kept alive: every estimate asks). A layer's first op follows the
    previous layer's last."""
    hit = _KERNELS.get((id(ops), id(eff)))
    if hit is not None and hit[0] is ops and hit[1] is eff:
        return hit[2]
    floor, gap, out = eff.kernel_floor_s, eff.launch_gap_s, []
    prev = ops[-1] if len(ops) > 1 else None
    selected = modules_mask(eff.selective_recompute)  # only the framework's recompute modules are summed
    for op, mask in zip(ops, op_module_masks(ops), strict=True):
        kf, kb = op_kernels(op, eff, prev is not None and prev.kind is OpKind.ELEMENTWISE)
        kb *= op.backward_share  # a frozen weight's GEMM runs its input gradient only
        eager = is_eager(op, eff)
        scale, backward = loss_traffic_scale(op, eff)  # a cross-entropy as the framework's kernel moves it
        if eff.moe_node_forwarding and op.name.endswith(EXPERT_BIAS):  # DeepEP, HybridEP: fp32 probabilities
            scale, backward = FP32_PROBS_BYTES[0], backward * FP32_PROBS_BYTES[1] / FP32_PROBS_BYTES[0]
        if eager:  # its bytes; the indexed kernels' share at their own bandwidth (model/primitives.py)
            slow = EAGER_INDEXED_SHARE[op.eager_kind] * max(eff.memory / eff.eager_indexed_memory - 1.0, 0.0) \
                if eff.eager_indexed and eff.eager_indexed_memory else 0.0  # never faster than the triad
            scale = op.eager_bytes / op.bytes * (1.0 + slow)
        if not eff.moe_sender_permutes and op.name.endswith(PERMUTE_OPS):  # only the receiver permutes
            scale *= RECEIVER_ONLY_SHARE
        attention = op.kind is OpKind.ATTENTION
        fused = attention and op.name.endswith(".flash")
        # the router and LoRA adapters stay 16-bit modules beside fp8 GEMMs (peft's, Megatron's ParallelLinearAdapter)
        cast_fwd = cast_bwd = op.kind is OpKind.MATMUL and not op.name.endswith(".router") and ".lora_" not in op.name
        if eff.moe_fused_act and op.expert:  # act and its casts in the grouped GEMMs' epilogues
            if op.name.endswith((EXPERT_ACT, EXPERT_CLAMP, EXPERT_BIAS)):  # GPT-OSS's clamp and bias with it
                scale, kf, kb = 0.0, 0.0, 0.0
            cast_fwd = cast_fwd and not op.name.endswith(EXPERT_DOWN)  # its input: the act's quantized output
            cast_bwd = cast_bwd and not op.name.endswith(EXPERT_UP)  # its output gradient: the act's gradient
        out.append((scale, backward, attention, fused, causal_fraction(op) if fused else 0.0, cast_fwd, cast_bwd,
                    kf * floor, kf * gap, kb * floor, kb * gap, mask & selected))
        prev = op
    if len(_KERNELS) > 4096:
        _KERNELS.clear()
    _KERNELS[(id(ops), id(eff))] = (ops, eff, tuple(out))
    return tuple(out)


def ops_time(ops: tuple[Op, ...], sh: Sharding, peaks: Peaks, memory_bytes_per_s: float, eff: Efficiency) -> OpsTime:
    """Each op at its peak of ``peaks`` (compute_peaks: the ATTENTION ops at ``attention``, an fp32 GEMM at
    ``fp32``, the rest at ``matmul``). An element-wise op the framework runs as eager kernels (efficiency.eager_ops)
    moves its eager bytes (model/ops.py). Every kernel costs max(roofline, floor) + gap (kernels_s, op_kernels); an
    fp8 recipe's ``cast_kernels`` quantize kernels per fp8 GEMM operand too. ``sh`` may hold columns
    (estimate/vector.py): the times are then columns."""
    fwd: Num = 0.0
    core: Num = 0.0
    bwd: Num = 0.0
    sac: Num = 0.0
    modules: dict[int, Num] = {}
    columns = (isinstance(sh.tp, np.ndarray) or isinstance(sh.cp, np.ndarray) or isinstance(sh.ep, np.ndarray)
               or isinstance(sh.etp, np.ndarray) or isinstance(sh.sp, np.ndarray))
    peak_flop_per_s, attention_peak, cast_kernels = peaks.matmul, peaks.attention or peaks.matmul, peaks.cast_kernels
    cast_per_elt = peaks.cast_bytes_per_elt / (2.0 * memory_bytes_per_s * eff.memory)
    for op, (scale, backward, attention, fused, causal, cast_fwd, cast_bwd, f_floor, f_gap, b_floor, b_gap,
             mask) in zip(ops, _fixed(ops, eff), strict=True):
        flop, nbytes, m, k, n = _local(op, sh)
        peak = attention_peak if attention else (peaks.fp32 or peak_flop_per_s) if op.fp32 else peak_flop_per_s
        t = _roofline(flop, nbytes * scale, m, k, n, peak, memory_bytes_per_s, eff, fused, causal, op.fp32)
        share = op.backward_share
        # fp8 recipe: quantize the input (flop / 2n elements) forward and the output gradient (flop / 2k)
        # backward, memory bound (estimate/fp8.py), in the recipe's kernels
        if cast_per_elt and cast_fwd:
            fwd += kernels_s(cast_per_elt * flop / n, cast_kernels, eff)
        if cast_per_elt and cast_bwd and share > 0:
            bwd += kernels_s(cast_per_elt * flop / k, cast_kernels, eff)
        t_bwd = t * backward * share
        if columns:
            t_fwd, t_bwd = maximum(t, f_floor) + f_gap, maximum(t_bwd, b_floor) + b_gap
        else:  # one strategy: plain floats (the search's columns take the branch above)
            t_fwd = (t if t > f_floor else f_floor) + f_gap
            t_bwd = (t_bwd if t_bwd > b_floor else b_floor) + b_gap
        fwd += t_fwd
        if share > 0:
            bwd += t_bwd
        sac += t_fwd * op.sac_recompute
        if op.attention_core:
            core += t_fwd
        if mask:
            modules[mask] = modules.get(mask, 0.0) + t_fwd
    return OpsTime(forward_s=fwd, attention_core_s=core, backward_s=bwd, op_sac_s=sac,
                   module_s=tuple(modules.items()))
