"""Seed 002 on the stock tools (#26 item 6): FSDP2's CPU offload, torchao's CPUOffloadOptimizer and DeepSpeed's
ZeRO-Offload as planner profiles with their own placement, runnable from ``offload train --executor``; caps are
keyword-only. GPU parts skip without CUDA."""

from __future__ import annotations

import dataclasses
import json
from importlib.util import find_spec

import pytest
import torch

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.offload import launch
from greentrain.offload.config import OffloadCaps, offload_framework
from greentrain.offload.launch import make_plan, train_command
from greentrain.offload.llama import TINY_LLAMA, build_llama, synthetic_batch
from greentrain.offload.stock import StockTrainer, one_process_group, unavailable

CUDA = torch.cuda.is_available()


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/unit/offload/conftest.py


def test_caps_are_keyword_only() -> None:
    caps = OffloadCaps.from_gib(device_gib=2, host_gib=8)
    assert (caps.device_bytes, caps.host_bytes) == (2 * 2**30, 8 * 2**30)
    with pytest.raises(TypeError):
        OffloadCaps.from_gib(2, 8)  # type: ignore[misc]
    with pytest.raises(TypeError):
        OffloadCaps(2.0, 8.0)  # type: ignore[misc]


def test_each_stock_executor_is_priced_with_its_own_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    caps = OffloadCaps.from_gib(device_gib=1, host_gib=4)
    plans = {e: make_plan("tiny", caps, 64, 2, "h100-sxm", "cpu", executor=e)[1]
             for e in ("greentrain", "fsdp2", "torchao", "deepspeed")}
    assert plans["fsdp2"].resident_layers == 0 and plans["torchao"].resident_layers == 4
    assert all(p.slots()["device"] == 4 for p in plans.values())  # no activation offload in any stock one
    assert {p.framework for p in plans.values()} == {"pytorch", "fsdp2", "torchao", "deepspeed"}
    assert plans["fsdp2"].device.total_bytes < plans["torchao"].device.total_bytes  # weights streamed per layer
    # torchao turns gradient offload off under accumulation (2 micro-batches here): every gradient stays on the
    # device until the step; with one micro-batch it places state as DeepSpeed does
    one = {e: make_plan("tiny", caps, 64, 1, "h100-sxm", "cpu", executor=e)[1] for e in ("torchao", "deepspeed")}
    assert one["torchao"].device.total_bytes == one["deepspeed"].device.total_bytes
    kept, ds = plans["torchao"].device.as_dict(), plans["deepspeed"].device.as_dict()
    assert kept["resident_layers"] >= 2 * ds["resident_layers"]  # a gradient beside each weight (and the head)
    assert plans["torchao"].device.total_bytes > plans["deepspeed"].device.total_bytes
    # greentrain's executor and FSDP2 (accumulating on the host) wait for synchronous host gradient copies,
    # torchao and DeepSpeed overlap theirs (offload/host.py): priced alike, greentrain's planner chooses at this
    # roomy cap as fast a placement as the fastest stock one (everything resident)
    assert plans["greentrain"].host_copy_time_s > 0 and plans["fsdp2"].host_copy_time_s > 0
    assert all(plans[e].host_copy_time_s == 0 for e in ("torchao", "deepspeed"))
    assert plans["fsdp2"].optimizer_time_s > plans["torchao"].optimizer_time_s  # for-loop AdamW after the backward
    overlapped = dataclasses.replace(offload_framework("pytorch"), host_side="overlapped")
    monkeypatch.setattr(launch, "offload_framework", lambda name, state: overlapped)
    alike = make_plan("tiny", caps, 64, 2, "h100-sxm", "cpu")[1]
    assert alike.tokens_per_s >= max(p.tokens_per_s for p in plans.values()) * (1 - 1e-9)
    assert alike.tokens_per_s > plans["greentrain"].tokens_per_s


def test_a_stock_placement_that_cannot_fit_is_refused_in_one_line() -> None:
    need = make_plan("tiny", OffloadCaps.from_gib(device_gib=1, host_gib=4), 64, 1, "h100-sxm", "cpu",
                     executor="torchao")[1].device.total_bytes
    caps = OffloadCaps(device_bytes=need * 0.9, host_bytes=4 * 2**30)
    with pytest.raises(ConfigError, match=r"offload\.device_gib=.*torchao keeps every layer's weights.*"
                                          r"offload\.executor greentrain"):
        make_plan("tiny", caps, 64, 1, "h100-sxm", "cpu", executor="torchao")
    make_plan("tiny", caps, 64, 1, "h100-sxm", "cpu", executor="greentrain")  # greentrain's planner streams


def test_missing_or_cuda_only_libraries_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import greentrain.offload.stock as stock

    monkeypatch.setattr(stock, "find_spec", lambda name: None if name == "deepspeed" else object())
    assert "needs deepspeed, which is not installed: pip install deepspeed" in unavailable("deepspeed", "cuda")
    assert "runs on CUDA only" in unavailable("torchao", "cpu")
    assert unavailable("fsdp2", "cpu") == ""


def plain_losses(spec: object, batches: list[list[torch.Tensor]]) -> tuple[list[float], list[torch.Tensor]]:
    model = build_llama(spec, seed=3)  # type: ignore[arg-type]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0, foreach=False)
    out = []
    for batch in batches:
        total = 0.0
        for mb in batch:
            loss = model(mb, 4096) / len(batch)
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
        opt.step()
        opt.zero_grad()
        out.append(total)
    return out, [p.detach().clone() for p in model.parameters()]


@pytest.mark.slow  # about 5 s: torch.distributed and FSDP2 start once
def test_fsdp2_cpu_offload_trains_as_the_plain_loop() -> None:
    from greentrain.model.load import load_model

    spec = load_model(TINY_LLAMA)
    batches = [synthetic_batch(spec.vocab_size, 2, 2, 32, seed=i) for i in range(2)]
    want, weights = plain_losses(spec, batches)
    model = build_llama(spec, seed=3)
    with one_process_group("cpu"):
        trainer = StockTrainer("fsdp2", model, device="cpu", grad_accum=2)
        got = [trainer.step(b).loss for b in batches]
        full = [p.full_tensor() for p in model.parameters()]
    assert got == pytest.approx(want, rel=1e-6)
    for a, b in zip(full, weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_offload_train_runs_fsdp2_beside_its_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offload", "train", "1", "0.05", "32", "tiny", "--steps", "1", "--micro-batches", "1",
                 "--device", "cpu", "--executor", "fsdp2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["executor"] == "fsdp2" and out["device_peak_gib"] is None and "one memory" in out["note"]
    assert out["placement"]["resident_layers"] == 0 and out["predicted"]["device_gib"] > 0
    assert main(["offload", "train", "1", "0.05", "32", "tiny", "--device", "cpu", "--executor", "torchao"]) == 2
    assert "runs on CUDA only" in capsys.readouterr().err


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("executor", ["fsdp2", "torchao", "deepspeed"])
def test_stock_executors_stay_under_the_device_cap_on_cuda(executor: str) -> None:
    if find_spec({"fsdp2": "torch"}.get(executor, executor)) is None:
        pytest.skip(f"{executor} is not installed")
    caps = OffloadCaps.from_gib(device_gib=2, host_gib=16)
    r = train_command(model="tiny", caps=caps, seq_len=512, steps=2, micro_batches=2, device="cuda", seed=0,
                      chip="h100-sxm", framework="pytorch", executor=executor)
    assert r["device_peak_gib"] <= 2 and all(x == x for x in r["losses"])
