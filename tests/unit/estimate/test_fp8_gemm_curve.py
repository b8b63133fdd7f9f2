"""fp8 GEMMs on the bf16 size curve (estimate/compute.py: the bf16 Efficiency.matmul curve times fp8.gemm_ratio),
checked against the H200's measured torch._scaled_mm fractions (benchmarks/measured/h200-2026-11-26/kernels.json,
BENCHMARKS.md "Session 8"; docs/validation.md "fp8 GEMMs: one size curve with bf16"): at a transformer layer's
shapes the fp8 model errs as the bf16 one does, and once the bench's host-latency floor is set aside fp8 GEMMs
reach their peak no later than bf16 ones, so no fp8 half-dimension of its own."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from greentrain.estimate.compute import compute_peaks
from greentrain.estimate.efficiency import efficiency_for
from greentrain.hardware.catalog import get_chip

ROOT = Path(__file__).parents[3]
RAW = ROOT / "benchmarks" / "measured" / "h200-2026-11-26" / "kernels.json"
Shape = tuple[int, int, int]


def _raw() -> tuple[dict[Shape, float], dict[Shape, list[dict[str, Any]]], list[dict[str, Any]]]:
    """(fp8 tensorwise fraction by shape, bf16 points by shape, all bf16 points) of the H200 session."""
    data = json.loads(RAW.read_text("utf-8"))
    fp8 = {(p["m"], p["k"], p["n"]): p for p in data["fp8"]["gemm"] if p.get("scaling") == "tensorwise"}
    bf16: dict[Shape, list[dict[str, Any]]] = {}
    for p in data["matmul"]:
        bf16.setdefault((p["m"], p["k"], p["n"]), []).append(p)
    return {s: p["fraction"] for s, p in fp8.items()}, bf16, data["matmul"]


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_fp8_model_errs_as_the_bf16_one_at_layer_shapes() -> None:
    fp8, bf16, _ = _raw()
    chip, eff = get_chip("h200"), efficiency_for("h200")
    # the fraction of the fp8 peak compute.py runs an fp8 layer GEMM at: its peak over the fp8 peak x the curve
    fp8_scale = compute_peaks(chip, "fp8").matmul / chip.peak_flop_per_s("fp8")
    layer = [s for s in fp8 if s[0] == 16384 and s[1] != s[0] and s in bf16]  # tokens x hidden x width
    assert len(layer) == 6
    fp8_err = _geomean([fp8[s] / (fp8_scale * eff.matmul(*s)) for s in layer])
    bf16_err = _geomean([p["fraction"] / eff.matmul(*s) for s in layer for p in bf16[s]])
    # measured 0.91 and 0.85 of the model (2026-11-26): the fp8 mapping adds no error of its own at these shapes
    assert fp8_err / bf16_err == pytest.approx(1.0, abs=0.10)


def _bench() -> ModuleType:
    path = ROOT / "benchmarks" / "bench_gpu_kernels.py"
    spec = importlib.util.spec_from_file_location("bench_gpu_kernels", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # loads the bench module, which imports torch
def test_fp8_reaches_its_peak_no_later_than_bf16_above_the_host_floor() -> None:
    pytest.importorskip("torch")
    kb = _bench()
    _, _, every = _raw()
    # one timed call has a host-latency floor: the 512^3 bf16 GEMM (0.3 us of tensor-core work) took 31 us.
    # Shapes within 3x of it time the launch, not the GEMM (the fp8 2,048^3 one took 40 us)
    floor_s = min(p["time_s"] for p in every)
    data = json.loads(RAW.read_text("utf-8"))
    tensorwise = [p for p in data["fp8"]["gemm"] if p.get("scaling") == "tensorwise"]
    fp8_pts = [p for p in tensorwise if p["time_s"] > 3 * floor_s]
    assert len(fp8_pts) == len(tensorwise) - 1
    shapes = {(p["m"], p["k"], p["n"]) for p in fp8_pts}
    bf16_pts = [p for p in every if (p["m"], p["k"], p["n"]) in shapes]
    h_fp8 = kb.fit_half_dim(fp8_pts, max(p["fraction"] for p in fp8_pts))
    h_bf16 = kb.fit_half_dim(bf16_pts, max(p["fraction"] for p in bf16_pts))
    assert h_fp8 <= h_bf16  # 305 against 347 (2026-11-26)
    # with the floor-bound point the fp8 fit is the floor's: 564
    assert kb.fit_half_dim(tensorwise, max(p["fraction"] for p in tensorwise)) > 1.5 * h_fp8


def test_the_joint_bf16_fit_recovers_its_constants_and_reads_the_h200_file() -> None:
    """bench_gpu_kernels.fit_matmul_curve: exact on points drawn from the model; on the H200 file (docs/validation.md
    "bf16 GEMMs on the H200: Hopper's size curve") top 0.761 and h 242; the Hopper entries take that h with the
    published MAMF as their level, so they read the board's shapes 0.761 / 0.803 = 0.95 of the model."""
    fit = _bench().fit_matmul_curve
    shapes = [(m, k, n) for m in (1024, 4096, 16384) for k in (512, 2048, 8192) for n in (1024, 6144)]
    synthetic = [{"m": m, "k": k, "n": n, "time_s": 1.0,
                  "fraction": 0.7 * m / (m + 300) * k / (k + 300) * n / (n + 300)} for m, k, n in shapes]
    top, h = fit(synthetic)
    assert top == pytest.approx(0.7, rel=0.02) and h == pytest.approx(300, rel=0.03)
    points = json.loads(RAW.read_text("utf-8"))["matmul"]
    top, h = fit(points)
    assert top == pytest.approx(0.761, abs=0.005) and h == pytest.approx(242, rel=0.03)
    eff = efficiency_for("h200")
    kept = [p for p in points if p["time_s"] >= 1e-4]
    ratio = math.exp(sum(math.log(p["fraction"] / eff.matmul(p["m"], p["k"], p["n"])) for p in kept) / len(kept))
    assert eff.matmul_half_dim == pytest.approx(h, rel=0.03)
    assert ratio == pytest.approx(top / eff.matmul_max, rel=0.01)


SWEEPS = ROOT / "tests" / "data" / "microbenchmarks" / "microbenchmarks-matmul.csv"


def _sweep(accelerator: str, chip_name: str) -> list[dict[str, float]]:
    """Azure's published cuBLASLt fp8 sweep of one accelerator (a copy of shared/reference's rows, 1,000
    back-to-back iterations per shape) as bench_gpu_kernels points: fraction of the dense fp8 peak, and time_s
    0 where the shape is memory bound (below the chip's ridge: catalog peak over bandwidth)."""
    import csv

    chip = get_chip(chip_name)
    ridge = chip.peak_flop_per_s("fp8") / chip.memory_bytes_per_s
    out = []
    for r in csv.DictReader(SWEEPS.open(encoding="utf-8")):
        if not r["accelerator"].startswith(accelerator):
            continue
        m, n, k, rate = float(r["m"]), float(r["n"]), float(r["k"]), float(r["tflops"]) * 1e12
        flop, nbytes = 2 * m * n * k, m * k + k * n + 2 * m * n  # fp8 operands, bf16 output
        out.append({"m": m, "k": k, "n": n, "fraction": rate / (float(r["peak_tflops_dense"]) * 1e12),
                    "time_s": flop / rate if flop / nbytes >= ridge else 0.0})
    return out


def test_blackwell_size_curve_is_the_gb200_sweeps() -> None:
    """docs/validation.md "Blackwell's GEMM size curve": the Blackwell entries' matmul_half_dim is the GB200 sweep
    fitted as Hopper's 242 was (fit_matmul_curve) on its shapes above the chip's ridge (the 1,024-wide ones, below
    it, run 6-7 us, mostly the kernel's fixed cost); the same fit of Azure's H100 sweep lands on Hopper's 242."""
    fit = _bench().fit_matmul_curve
    gb200 = _sweep("NVIDIA GB200", "gb200")
    assert len(gb200) == 9 and sum(p["time_s"] >= 5e-6 for p in gb200) == 6
    _, h_blackwell = fit(gb200, 5e-6)
    _, h_hopper = fit(_sweep("NVIDIA H100", "h100-sxm"), 5e-6)
    assert h_blackwell == pytest.approx(401, rel=0.02)  # 2026-11-27
    assert h_hopper == pytest.approx(efficiency_for("h100-sxm").matmul_half_dim, rel=0.03)  # 247 against 242
    for name in ("b200", "gb200", "b300", "gb300"):
        assert efficiency_for(name).matmul_half_dim == pytest.approx(h_blackwell, rel=0.01)


def test_gb200_fp8_gemms_run_at_the_sustained_sweeps_level() -> None:
    """The same fit's level: Azure's sustained GB200 sweep tops at 0.622 of the fp8 peak, where its H100 sweep
    reads H100's MAMF (0.724 against 0.709); gb200's fp8 GEMMs take the sweep's level (estimate/fp8.yaml)."""
    fit = _bench().fit_matmul_curve
    top_gb200, _ = fit(_sweep("NVIDIA GB200", "gb200"), 5e-6)
    top_h100, _ = fit(_sweep("NVIDIA H100", "h100-sxm"), 5e-6)
    assert top_gb200 == pytest.approx(0.622, abs=0.002)  # 2026-11-27
    assert top_h100 == pytest.approx(0.709, rel=0.03)  # the method reads H100's MAMF
    for name, top in (("gb200", top_gb200), ("h100-sxm", 0.709)):
        chip = get_chip(name)  # the fp8 peak scaled by fp8 / bf16, on the bf16 curve's level
        level = compute_peaks(chip, "fp8").matmul / chip.peak_flop_per_s("fp8") * efficiency_for(name).matmul_max
        assert level == pytest.approx(top, rel=0.01)
