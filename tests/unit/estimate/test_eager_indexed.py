"""Hugging Face's eager element-wise chains through PyTorch's indexed kernels (efficiency eager_indexed,
eager_indexed_memory; model/primitives.py EAGER_INDEXED_SHARE), and SDPA's default backend by chip (kernel sdpa).

Measured (BENCHMARKS.md session 26, benchmarks/measured/*/tt8-none-prof*/ops.json): Llama 3 8B's first 8 layers,
2 x 8,192 tokens, Hugging Face eager; its RMSNorm and RoPE chains (17 norms, 8 RoPEs) took 80.5 ms forward +
backward on an H100 and 69.9 ms on an H200."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from greentrain.estimate.compute import Sharding, compute_peaks, ops_time
from greentrain.estimate.efficiency import efficiency_for
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops

LAYERS = Path(__file__).parents[3] / "benchmarks" / "measured" / "h100-2026-11-27" / "llama3-8b-8layers.json"
MEASURED_MS = {"h100-sxm": 80.5, "h200": 69.9}


def _chains_ms(chip: str, eff: object) -> dict[str, float]:
    c = get_chip(chip)
    peaks, ops = compute_peaks(c, "bf16"), model_ops(load_model(str(LAYERS)), 2, 8192, 2.0, 0, True)
    out: dict[str, float] = {}
    for count, op in [(g.count, op) for g in ops.layers for op in g.ops] + [(1, op) for op in ops.head]:
        kind = op.name.split(".")[-1]
        if kind in ("norm", "final_norm", "rope", "act"):
            t = ops_time((op,), Sharding(), peaks, c.memory_bytes_per_s, eff)  # type: ignore[arg-type]
            key = "norm" if kind == "final_norm" else kind
            out[key] = out.get(key, 0.0) + count * (t.forward_s + t.backward_s) * 1e3
    return out


@pytest.mark.parametrize("chip", sorted(MEASURED_MS))
def test_hugging_face_norm_and_rope_chains_take_their_measured_time(chip: str) -> None:
    ddp = efficiency_for(chip, "ddp")
    assert ddp.eager_indexed and ddp.eager_indexed_memory > 0
    priced = _chains_ms(chip, ddp)
    assert priced["norm"] + priced["rope"] == pytest.approx(MEASURED_MS[chip], rel=0.03)
    triad = _chains_ms(chip, dataclasses.replace(ddp, eager_indexed=False))
    assert triad["norm"] + triad["rope"] < 0.7 * MEASURED_MS[chip]  # at the triad's rate: 45-50 ms
    assert priced["act"] == pytest.approx(triad["act"])  # the GLU product: contiguous, vectorised


def test_only_the_hugging_face_profiles_and_measured_chips_pay_it() -> None:
    assert {fw for fw in ("ddp", "fsdp2", "deepspeed", "torchtitan", "torchtune", "nemo-automodel", "megatron")
            if efficiency_for("h100-sxm", fw).eager_indexed} == {"ddp", "fsdp2", "deepspeed"}
    assert efficiency_for("a100-80gb", "ddp").eager_indexed_memory == 0.0  # not measured: the triad's rate


def test_sdpa_is_cudnn_on_hopper_and_blackwell_and_flash_elsewhere() -> None:
    """torch >= 2.11 prefers cuDNN on sm90/sm100 (sdp_utils.cpp check_prefer_cudnn_attention): every chip the sdpa
    entry names prices cudnn's figures, every other FA2's curve."""
    from greentrain.estimate.efficiency import _data
    from greentrain.hardware.catalog import chips

    named = set(_data()["attention_kernels"]["sdpa"]["speed_vs_fa2"]) - {"default"}
    assert named == set(_data()["attention_kernels"]["cudnn"]["speed_vs_fa2"])
    for chip in chips():
        same = "cudnn" if chip in named else "fa2"
        assert efficiency_for(chip, "ddp").attention_max_d128 == pytest.approx(
            efficiency_for(chip, "ddp", attention_kernel=same).attention_max_d128), chip
