"""What an offloading executor does on the host CPU each step, priced per parameter (issue 24, seed 002).

Two ways a framework's host AdamW can run (``OffloadFramework.host_side``):
- ``overlapped``: gradients leave over the link at the pinned rate while the backward runs (asynchronous copies,
  double-buffered), and a fused CPU AdamW updates each layer as its gradients arrive (torchao's
  CPUOffloadOptimizer, DeepSpeed's CPU-Adam): the rate is ``cpu.adam_fused_params_per_s_per_thread``. What the
  planner priced for every host optimizer before 2026-11-26; torchao's and DeepSpeed's executors keep it.
- ``executor``: greentrain's StreamingTrainer (offload/train.py) as it is written. Its post-accumulate hook copies
  each gradient into pageable host memory (``h.grad``, allocated with ``zeros_like``: not pinned) with a
  synchronous ``copy_``, so the compute stream waits for the copy (no overlap, pageable rate), and a later
  micro-batch's gradient is added on the host (``h.grad.add_(p.grad.to("cpu"))``); after the last backward,
  ``clip_grad_norm_(foreach=False)`` and ``torch.optim.AdamW(foreach=False)`` (one tensor at a time, several
  passes over memory each) run over every master; nothing of them overlaps the backward. FSDP2's
  CPUOffloadPolicy with torch's default host AdamW runs the same host side (offload/config.py, stock_executor).
CPU rates are per thread, measured (``benchmarks/bench_offload.py host``, offload/data/offload.yaml), and scale
with the threads of torch's intra-op pool (their element-wise CPU kernels split a tensor across them): a
linear scaling that host memory bandwidth caps at some thread count not measured here. The pageable copy is
the driver's staged memcpy in the calling thread: one rate, measured on the H200 host (Session 8).
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.errors import ConfigError
from greentrain.offload.config import HOST_SIDES, OffloadFramework, offload_constants


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCosts:
    """Seconds per parameter of the host side of a step, for one profile, state dtype and thread count."""

    grads_on_link: bool  # True: gradients leave over the link, overlapped with the compute (async, pinned)
    grad_copy_s_per_param: float  # executor: serial in each backward (pageable copy + a later micro-batch's add)
    optimizer_s_per_param: float  # executor: clipping and AdamW after the last backward
    adam_params_per_s: float  # overlapped: the fused CPU AdamW, updating layers as their gradients arrive
    threads: int

    @property
    def overlapped(self) -> bool:
        return self.grads_on_link


def host_costs(profile: OffloadFramework, *, grad_bytes_per_param: float, master_bytes: float, threads: int,
               pinned_bytes_per_s: float) -> HostCosts:
    """The host side of ``profile``; ``master_bytes``: bytes of a host master (2: bf16 rates, else fp32)."""
    if profile.host_side not in HOST_SIDES:
        raise ConfigError("offload.host_side", profile.host_side, f"must be one of {', '.join(HOST_SIDES)}")
    if threads < 1:
        raise ConfigError("offload.host_threads", threads, "must be >= 1")
    k = offload_constants()["cpu"]
    fused = float(k["adam_fused_params_per_s_per_thread"]) * threads
    if profile.host_side == "overlapped":
        return HostCosts(grads_on_link=True, grad_copy_s_per_param=0.0, optimizer_s_per_param=1.0 / fused,
                         adam_params_per_s=fused, threads=threads)
    dtype = "bf16" if master_bytes <= 2 else "fp32"
    ex = k["executor"][dtype]
    pageable = min(float(offload_constants()["link"]["pageable_d2h_bytes_per_s"]), pinned_bytes_per_s)
    # every round: the synchronous pageable copy; a later micro-batch also adds on the host (priced on every
    # round: the first round's copy_ has no add, an over-count of one add per step)
    copy = grad_bytes_per_param / pageable + 1.0 / (float(ex["accumulate_params_per_s_per_thread"]) * threads)
    opt = 1.0 / (float(ex["clip_params_per_s_per_thread"]) * threads) + \
        1.0 / (float(ex["adam_params_per_s_per_thread"]) * threads)
    return HostCosts(grads_on_link=False, grad_copy_s_per_param=copy, optimizer_s_per_param=opt,
                     adam_params_per_s=fused, threads=threads)
