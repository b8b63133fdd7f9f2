"""The kernels issue 23 asks a lent GPU to time beside bench_gpu_kernels.py's MAMF/SDPA/triad: fp8 GEMMs
(tensorwise and rowwise scaling, and the quantize kernel that precedes them), each SDPA attention backend, and
MoE expert GEMMs issued one kernel per expert or as one grouped GEMM. Called from bench_gpu_kernels.main;
every figure is raw (time, FLOP/s, bytes/s), a fraction of the catalog chip's datasheet peak where one applies.

- fp8: ``torch._scaled_mm`` on e4m3 operands, bf16 output (the cuBLASLt path torchao and torchtitan's float8
  training use), on transformer-layer shapes; the quantize kernel is amax + scale + cast of a bf16 tensor
  (torchao float8 ``hp_tensor_to_float8_dynamic``: one read for the amax, one read and a 1-byte write for the
  cast).
- attention backends: ``torch.nn.attention.sdpa_kernel`` with FLASH_ATTENTION, CUDNN_ATTENTION,
  EFFICIENT_ATTENTION and MATH in turn, forward + backward on FlashAttention-2's FLOP count; a backend that
  refuses the shape is recorded with its error.
- grouped GEMM at MoE shapes (Qwen3-30B-A3B, Mixtral 8x7B, GPT-OSS-20B with their tokens per expert): a loop of
  ``torch.mm`` per expert against ``torch._grouped_mm`` (torchtitan's MoE path); the per-expert overhead is the
  loop's time less the grouped kernel's, per expert.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Timer = Callable[[Callable[[], Any], str, int, int], float]

# (name, experts, tokens per expert, hidden, expert ffn): a 16k-token micro-batch routed evenly (top-k / E)
MOE_SHAPES = (("qwen3-30b-a3b", 128, 1024, 2048, 768), ("mixtral-8x7b", 8, 4096, 4096, 14336),
              ("gpt-oss-20b", 32, 2048, 2880, 2880))


def fp8_shapes(quick: bool) -> list[tuple[int, int, int]]:
    if quick:
        return [(64, 64, 64)]
    return [(s, s, s) for s in (2048, 4096, 8192, 16384)] + [(16384, h, f * h) for h in (2048, 4096, 8192)
                                                             for f in (1, 3)]


def bench_fp8(device: str, quick: bool, peak_fp8: float, timer: Timer) -> dict[str, Any]:
    """fp8 GEMM fractions of the fp8 peak per scaling, and the quantize kernel's bytes/s; CUDA only."""
    if device != "cuda" or not hasattr(torch, "_scaled_mm"):
        return {"skipped": "fp8 GEMMs need CUDA and torch._scaled_mm"}
    e4m3 = torch.float8_e4m3fn
    gemms = []
    for m, k, n in fp8_shapes(quick):
        a = torch.randn(m, k, device=device).to(e4m3)
        b = torch.randn(n, k, device=device).to(e4m3).t()  # column-major, as cuBLASLt wants the second operand
        scales = {"tensorwise": (torch.tensor(1.0, device=device), torch.tensor(1.0, device=device)),
                  "rowwise": (torch.ones(m, 1, device=device), torch.ones(1, n, device=device))}
        for scaling, (sa, sb) in scales.items():
            try:
                t = timer(lambda a=a, b=b, sa=sa, sb=sb: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb,
                                                                          out_dtype=torch.bfloat16),
                          device, 3 if quick else 10, 3 if quick else 20)
                gemms.append({"m": m, "k": k, "n": n, "scaling": scaling, "time_s": t,
                              "fraction": 2.0 * m * k * n / t / peak_fp8})
            except RuntimeError as e:
                gemms.append({"m": m, "k": k, "n": n, "scaling": scaling, "error": str(e).splitlines()[0]})
    x = torch.randn(16384, 8192, device=device, dtype=torch.bfloat16)

    def quantize() -> torch.Tensor:
        scale = 448.0 / x.abs().amax().float().clamp(min=1e-12)
        return (x * scale).to(e4m3)

    t = timer(quantize, device, 3, 10)
    return {"gemm": gemms, "quantize": {"elements": x.numel(), "time_s": t,
                                        "bytes_per_s": x.numel() * (2 + 2 + 1) / t}}


def attention_flop(b: int, heads: int, s: int, d: int, causal: bool) -> float:
    """FlashAttention-2's count (Dao 2023 §4), as bench_gpu_kernels.attention_flop."""
    return 3.5 * 4.0 * b * heads * s * s * d * (0.5 if causal else 1.0)


def bench_attention_backends(device: str, quick: bool, peak: float, timer: Timer) -> list[dict[str, Any]]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
    d, heads = (64, 2) if quick else (128, 16)
    out: list[dict[str, Any]] = []
    for name in backends:
        for s in ((64, 128) if quick else (1024, 4096, 8192)):
            if name == "MATH" and s > 4096:
                continue  # the s x s scores in memory: the point is made at 4k
            b = 1 if quick else max(1, 16384 // s)
            for causal in (False, True):
                q, k, v = (torch.randn(b, heads, s, d, device=device, dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))

                def step(q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v, causal: bool = causal,
                         name: str = name) -> None:
                    with sdpa_kernel(getattr(SDPBackend, name)):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()

                row: dict[str, Any] = {"backend": name, "head_dim": d, "seq": s, "causal": causal, "batch": b,
                                       "heads": heads}
                try:
                    t = timer(step, device, 2 if quick else 5, 3 if quick else 10)
                    row.update(time_s=t, fraction=attention_flop(b, heads, s, d, causal) / t / peak)
                except RuntimeError as e:
                    row["error"] = str(e).splitlines()[0][:200]
                out.append(row)
    return out


def bench_grouped_gemm(device: str, quick: bool, peak: float, timer: Timer) -> list[dict[str, Any]]:
    """Per-expert GEMMs as a loop of torch.mm and as one torch._grouped_mm (bf16; grouped where available)."""
    shapes = (("tiny", 4, 32, 64, 32),) if quick else MOE_SHAPES
    out: list[dict[str, Any]] = []
    for name, experts, tokens, hidden, ffn in shapes:
        x = torch.randn(experts * tokens, hidden, device=device, dtype=torch.bfloat16)
        w = torch.randn(experts, ffn, hidden, device=device, dtype=torch.bfloat16)  # (out, in) per expert
        parts = x.split(tokens)
        loop_s = timer(lambda x=x, w=w, parts=parts: [torch.mm(p, w[e].t()) for e, p in enumerate(parts)],
                       device, 2 if quick else 5, 3 if quick else 20)
        flop = 2.0 * experts * tokens * hidden * ffn
        row: dict[str, Any] = {"model": name, "experts": experts, "tokens_per_expert": tokens, "hidden": hidden,
                               "ffn": ffn, "loop_time_s": loop_s, "loop_fraction": flop / loop_s / peak}
        offs = torch.arange(tokens, experts * tokens + 1, tokens, device=device, dtype=torch.int32)
        try:
            grouped_s = timer(lambda x=x, w=w, offs=offs: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs),
                              device, 2 if quick else 5, 3 if quick else 20)
            row.update(grouped_time_s=grouped_s, grouped_fraction=flop / grouped_s / peak,
                       per_expert_overhead_s=(loop_s - grouped_s) / experts)
        except (RuntimeError, AttributeError, NotImplementedError) as e:
            row["grouped_error"] = str(e).splitlines()[0][:200]
        out.append(row)
    return out
