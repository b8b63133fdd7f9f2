"""Per-chip kernel microbenchmarks for estimate/efficiency.yaml (issue 13's GPU part) and the host link (issue
14's): run on a lent GPU; writes the raw figures (results.json) and the chip's entry in efficiency.yaml's format
(efficiency-chip.yaml, to review and paste, the source saying what was measured).

    .venv/bin/python benchmarks/bench_gpu_kernels.py --chip h100-sxm --out out/h100      # on the GPU
    .venv/bin/python benchmarks/bench_gpu_kernels.py --device cpu --quick --out /tmp/kb   # the code path only

Methods (each figure a fraction of the catalog chip's datasheet peak, as efficiency.yaml keeps them):
- matmul: the maximum achievable matmul FLOP/s (MAMF, stas00/ml-engineering
  compute/accelerator/benchmarks/mamf-finder.py): torch.mm in bf16 over square and transformer-like shapes, the
  best of the timed repeats after a warm-up; matmul_max = the best shape's fraction; matmul_half_dim fitted to
  efficiency.Efficiency.matmul's saturating model over every shape.
- attention: F.scaled_dot_product_attention forward + backward on the FLOPs FlashAttention-2 counts (Dao 2023
  §4: forward 4 s^2 d per head and sequence, backward 2.5 x the forward; causal executes half), per head dim
  64 and 128 and sequence length; attention_max_d* and attention_half_seq(_causal) fitted to
  efficiency.Efficiency.attention's model top(d) x s / (s + half).
- memory: the STREAM triad a = b + 2 c (McCalpin 1995: three arrays moved) on 2^28 elements.
- host link: 1 GiB host -> device and back, from pinned and from pageable memory (seed 002's transfers).
- fp8 GEMMs, each SDPA backend and MoE grouped GEMMs: bench_gpu_kernel_variants.py (raw figures in results.json).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import yaml

from greentrain.hardware.catalog import get_chip

try:  # run as a script (benchmarks/ on sys.path) or loaded by path from the tests
    import bench_gpu_kernel_variants as more
except ImportError:  # pragma: no cover
    import importlib.util as _ilu

    _path = Path(__file__).with_name("bench_gpu_kernel_variants.py")
    _spec = _ilu.spec_from_file_location("bench_gpu_kernel_variants", _path)
    assert _spec and _spec.loader
    more = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(more)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


MIN_TIMED_S = 1e-3  # one timed window on a GPU: 30x the ~30 us floor of one call between two events (H200)


def timed_s(fn: Callable[[], Any], device: str, warmup: int, repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``fn`` after ``warmup`` (CUDA events on a GPU, perf_counter on CPU).
    On a GPU each timed window queues enough calls to last ``MIN_TIMED_S`` and divides: one call between two
    events cannot read below ~30 us (measured on an H200, 2026-11-26: a 512^3 bf16 GEMM "took" 31 us for 0.3 us
    of tensor-core work), which a training step, queueing its kernels ahead, never pays."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    calls = 1
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            torch.cuda.synchronize()
            window_s = start.elapsed_time(end) / 1e3
            best = min(best, window_s / calls)
            calls = max(calls, min(1000, int(MIN_TIMED_S / max(window_s / calls, 1e-9)) + 1))
        else:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    return best


def matmul_shapes(quick: bool) -> list[tuple[int, int, int]]:
    """(m, k, n): squares and the GEMMs of a transformer layer (tokens x hidden x 3 hidden, 4 hidden ...)."""
    if quick:
        return [(64, 64, 64), (128, 128, 128), (256, 256, 256), (256, 128, 512)]
    squares = [(s, s, s) for s in (512, 1024, 2048, 4096, 6144, 8192, 12288, 16384)]
    layer = [(t, h, f * h) for t in (4096, 16384) for h in (2048, 4096, 8192) for f in (1, 3, 4)]
    return squares + layer + [(t, f * h, h) for t in (4096, 16384) for h in (4096, 8192) for f in (3, 4)]


def bench_matmul(device: str, dtype: torch.dtype, quick: bool, peak: float) -> list[dict[str, float]]:
    out = []
    for m, k, n in matmul_shapes(quick):
        a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
        t = timed_s(lambda a=a, b=b: torch.mm(a, b), device, warmup=3 if quick else 10, repeats=3 if quick else 20)
        out.append({"m": m, "k": k, "n": n, "time_s": t, "fraction": 2.0 * m * k * n / t / peak})
    return out


def attention_flop(b: int, heads: int, s: int, d: int, causal: bool) -> float:
    """Forward + backward FLOPs as FlashAttention-2 counts them (Dao 2023 §4): 4 s^2 d per head forward, the
    backward 2.5 x that, causal half."""
    return 3.5 * 4.0 * b * heads * s * s * d * (0.5 if causal else 1.0)


def bench_attention(device: str, dtype: torch.dtype, quick: bool, peak: float) -> list[dict[str, float]]:
    out = []
    seqs = (64, 128, 256) if quick else (512, 1024, 2048, 4096, 8192, 16384)
    for d in (64, 128):
        for s in seqs:
            heads = 2 if quick else 2048 // d
            b = 1 if quick else max(1, 16384 // s)
            for causal in (False, True):
                q, k, v = (torch.randn(b, heads, s, d, device=device, dtype=dtype, requires_grad=True)
                           for _ in range(3))

                def step(q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v,
                         causal: bool = causal) -> None:
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()

                t = timed_s(step, device, warmup=2 if quick else 5, repeats=3 if quick else 10)
                out.append({"head_dim": d, "seq": s, "causal": causal, "batch": b, "heads": heads, "time_s": t,
                            "fraction": attention_flop(b, heads, s, d, causal) / t / peak})
    return out


def bench_triad(device: str, quick: bool, peak_bytes_per_s: float) -> dict[str, float]:
    n = 2**16 if quick else 2**28
    b, c = torch.rand(n, device=device), torch.rand(n, device=device)
    a = torch.empty_like(b)
    t = timed_s(lambda: torch.add(b, c, alpha=2.0, out=a), device, warmup=3, repeats=5 if quick else 20)
    moved = 3.0 * n * a.element_size()
    return {"elements": n, "time_s": t, "bytes_per_s": moved / t, "fraction": moved / t / peak_bytes_per_s}


def bench_host_link(device: str, quick: bool) -> dict[str, float]:
    """Host <-> device copy bandwidth, pinned and pageable (GB/s, 1e9 bytes)."""
    nbytes = 2**20 if quick else 2**30
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    out: dict[str, float] = {"bytes": float(nbytes)}
    for pinned in (True, False):
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned and device == "cuda")
        name = "pinned" if pinned else "pageable"
        h2d = timed_s(lambda host=host: dev.copy_(host, non_blocking=True), device, warmup=2, repeats=5)
        d2h = timed_s(lambda host=host: host.copy_(dev, non_blocking=True), device, warmup=2, repeats=5)
        out[f"{name}_h2d_gb_per_s"], out[f"{name}_d2h_gb_per_s"] = nbytes / h2d / 1e9, nbytes / d2h / 1e9
    if device == "cuda":  # both directions at once, as activation offloading runs them (estimate/act_offload.py)
        out["pinned_duplex_gb_per_s"] = nbytes / timed_s(_duplex_copy(dev, nbytes), device, warmup=2, repeats=5) / 1e9
    return out


def _duplex_copy(dev: Any, nbytes: int) -> Callable[[], None]:
    """One pinned host -> device copy and one device -> host copy of ``nbytes`` on two streams at once, bracketed
    by the current stream (timed_s's events): the time per direction when the link carries both."""
    up, down = torch.cuda.Stream(), torch.cuda.Stream()
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev2 = torch.empty_like(dev)

    def run() -> None:
        cur = torch.cuda.current_stream()
        up.wait_stream(cur)
        down.wait_stream(cur)
        with torch.cuda.stream(up):
            dev.copy_(src, non_blocking=True)
        with torch.cuda.stream(down):
            dst.copy_(dev2, non_blocking=True)
        cur.wait_stream(up)
        cur.wait_stream(down)
    return run


def fit_half_dim(points: list[dict[str, float]], top: float) -> float:
    """matmul_half_dim h of efficiency.Efficiency.matmul (top x m/(m+h) x k/(k+h) x n/(n+h)): least squares on
    the log of measured over modelled, over a log grid of h."""
    grid = np.geomspace(1.0, 16384.0, 600)
    meas = np.array([p["fraction"] for p in points])
    dims = np.array([[p["m"], p["k"], p["n"]] for p in points], dtype=float)
    model = top * np.prod(dims[None, :, :] / (dims[None, :, :] + grid[:, None, None]), axis=2)
    err = ((np.log(meas[None, :]) - np.log(model)) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(err))])


def fit_matmul_curve(points: list[dict[str, float]], floor_s: float = 1e-4) -> tuple[float, float]:
    """(top, h) of top x m/(m+h) x k/(k+h) x n/(n+h) fitted jointly (log least squares over a log grid of h, top
    in closed form) on the GEMMs that ran at least ``floor_s`` (a single timed call has a ~30 us host floor)."""
    kept = [p for p in points if p["time_s"] >= floor_s]
    meas = np.log(np.array([p["fraction"] for p in kept]))
    dims = np.array([[p["m"], p["k"], p["n"]] for p in kept], dtype=float)
    grid = np.geomspace(1.0, 16384.0, 600)
    log_shape = np.log(dims[None, :, :] / (dims[None, :, :] + grid[:, None, None])).sum(axis=2)
    log_top = (meas[None, :] - log_shape).mean(axis=1)
    err = ((meas[None, :] - log_top[:, None] - log_shape) ** 2).sum(axis=1)
    i = int(np.argmin(err))
    return float(np.exp(log_top[i])), float(grid[i])


def fit_saturating(seqs: list[float], fractions: list[float]) -> tuple[float, float]:
    """(top, half) of top x s / (s + half) by least squares: top in closed form for each half of a log grid."""
    s, y = np.asarray(seqs, dtype=float), np.asarray(fractions, dtype=float)
    best = (float("inf"), 0.0, 0.0)
    for half in np.geomspace(1.0, 65536.0, 800):
        g = s / (s + half)
        top = float((y * g).sum() / (g * g).sum())
        sse = float(((y - top * g) ** 2).sum())
        best = min(best, (sse, top, float(half)))
    return best[1], best[2]


def sig(x: float, digits: int = 4) -> float:
    """``x`` to ``digits`` significant figures: a CPU's fraction of a GPU peak (1e-5) must not round to 0."""
    return float(f"{x:.{digits}g}")


def chip_entry(mm: list[dict[str, float]], att: list[dict[str, Any]], triad: dict[str, float],
               source: str) -> dict[str, Any]:
    """efficiency.yaml's keys for one chip from the measured figures (links are not measured here)."""
    top = max(p["fraction"] for p in mm)
    fits = {(d, c): fit_saturating([p["seq"] for p in att if p["head_dim"] == d and p["causal"] == c],
                                   [p["fraction"] for p in att if p["head_dim"] == d and p["causal"] == c])
            for d in (64, 128) for c in (False, True)}
    entry = {"source": source, "matmul_max": sig(top), "matmul_half_dim": sig(fit_half_dim(mm, top))}
    for d in (64, 128):  # the head dim's top is shared by both masks in efficiency.attention
        entry[f"attention_max_d{d}"] = sig((fits[(d, False)][0] + fits[(d, True)][0]) / 2)
    entry["attention_half_seq_causal"] = sig((fits[(64, True)][1] + fits[(128, True)][1]) / 2)
    entry["attention_half_seq"] = sig((fits[(64, False)][1] + fits[(128, False)][1]) / 2)
    entry["memory"] = sig(triad["fraction"])
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chip", default="h100-sxm", help="catalog chip whose datasheet peaks the fractions divide by")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    p.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    p.add_argument("--quick", action="store_true", help="tiny shapes: checks the code path, measures nothing")
    p.add_argument("--out", required=True, help="folder for results.json and efficiency-chip.yaml")
    a = p.parse_args(argv)
    chip, dtype = get_chip(a.chip), DTYPES[a.dtype]
    peak = chip.peak_flop_per_s(a.dtype)
    mm = bench_matmul(a.device, dtype, a.quick, peak)
    att = bench_attention(a.device, dtype, a.quick, peak)
    triad = bench_triad(a.device, a.quick, chip.memory_bytes_per_s)
    link = bench_host_link(a.device, a.quick)
    fp8 = more.bench_fp8(a.device, a.quick, chip.peak_flop_per_s("fp8") if chip.peak_fp8_flop_per_s else peak,
                         timed_s)
    backends = more.bench_attention_backends(a.device, a.quick, peak, timed_s) if a.device == "cuda" else []
    grouped = more.bench_grouped_gemm(a.device, a.quick, peak, timed_s)
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    source = (f"measured {_dt.date.today().isoformat()} on {name}, torch {torch.__version__}, "
              f"benchmarks/bench_gpu_kernels.py (MAMF, SDPA fwd+bwd, STREAM triad){' QUICK' if a.quick else ''}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"kind": "kernel-microbenchmarks", "chip": a.chip, "device": name, "dtype": a.dtype,
               "matmul": mm, "attention": att, "triad": triad, "host_link": link, "fp8": fp8,
               "attention_backends": backends, "grouped_gemm": grouped}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    entry = {"chips": {a.chip: chip_entry(mm, att, triad, source)}}
    (out / "efficiency-chip.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    print(yaml.safe_dump(entry, sort_keys=False) + json.dumps(link))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
