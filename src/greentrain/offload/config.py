"""Inputs of the offload planner: the memory caps, the policy knobs and the framework profiles.

A framework profile says how a system moves and recomputes state (design/offload.md sections 2 and 5):
``ml_dataflow`` is the seed system's own order (layer-major rounds over 16,384-token chunks, bf16 state at
8 bytes per parameter, its three host save levels), ``pytorch`` is what greentrain's executor
(offload/train.py) does (one micro-batch at a time, weights streamed per micro-batch, gradients to host in
``post_accumulate_grad_hook``, activations through ``saved_tensors_hooks`` and checkpointing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from greentrain import units
from greentrain.config import BOUNDS, require
from greentrain.errors import ConfigError
from greentrain.offload.eager import EXECUTOR_EAGER_OPS

# Host save levels of one layer's activations, cheapest in host memory first (ml_dataflow transformer_demo.c):
# input: the layer input with K, V and the RMS statistics, the layer is recomputed; attention: + attention output
# and log-sum-exp, Q, O and the FFN up projections are recomputed; full: everything, nothing is recomputed.
LEVELS = ("input", "attention", "full")
OPTIMIZER_PLACES = ("device-streamed", "host")


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadCaps:
    """Device and host memory a run may use, bytes (the CLI and YAML give GiB)."""

    device_bytes: float
    host_bytes: float

    def __post_init__(self) -> None:
        for name, value in (("device_gib", self.device_bytes), ("host_gib", self.host_bytes)):
            ok = isinstance(value, (int, float)) and math.isfinite(value) and value > 0
            shown = units.bytes_to_gib(value) if isinstance(value, (int, float)) and math.isfinite(value) else value
            require(ok, f"offload.{name}", shown, "must be a finite number > 0")

    @classmethod
    def from_gib(cls, *, device_gib: float, host_gib: float) -> OffloadCaps:
        """Keyword-only: the CLI's order is the seed's (HOST_GIB DEVICE_GIB), so no order is assumed here."""
        for name, value in (("device_gib", device_gib), ("host_gib", host_gib)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"offload.{name}", value, "must be a finite number > 0")
        # upper ends: config.BOUNDS (--host-gib 1e9 was accepted)
        BOUNDS["host_memory_gib"].check(host_gib, "offload.host_gib")
        BOUNDS["device_memory_gib"].check(device_gib, "offload.device_gib")
        return cls(device_bytes=units.gib_to_bytes(device_gib), host_bytes=units.gib_to_bytes(host_gib))


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadPolicy:
    """Knobs of a plan; None lets the planner choose. ``activation_levels`` counts (layer, chunk) slots kept on
    the device and at each host level: {"device": n, "input": n, "attention": n, "full": n}."""

    resident_layers: int | None = None
    prefetch_depth: int | None = None
    activation_levels: dict[str, int] | None = None
    optimizer_on: str | None = None  # None: the profile's
    downgrade: bool = True  # full -> attention where the link time exceeds the recompute it saves
    loss_chunk_tokens: int = 4096
    chips_per_host_link: int = 1  # GPUs behind one host link share its bandwidth
    host_threads: int | None = None  # CPU threads of the host optimizer; None: offload.yaml cpu.host_threads
    rounds_per_step: int | None = None  # micro-batches (rounds) per optimizer step; None: the batch rule

    def __post_init__(self) -> None:
        if self.resident_layers is not None:
            require(self.resident_layers >= 0, "offload.resident_layers", self.resident_layers, "must be >= 0")
        if self.prefetch_depth is not None:
            require(self.prefetch_depth in (1, 2, 3), "offload.prefetch_depth", self.prefetch_depth,
                    "must be 1, 2 or 3")
        if self.optimizer_on is not None:
            require(self.optimizer_on in OPTIMIZER_PLACES, "offload.optimizer_on", self.optimizer_on,
                    f"must be one of {', '.join(OPTIMIZER_PLACES)}")
        require(self.loss_chunk_tokens >= 1, "offload.loss_chunk_tokens", self.loss_chunk_tokens, "must be >= 1")
        require(self.chips_per_host_link >= 1, "offload.chips_per_host_link", self.chips_per_host_link,
                "must be >= 1")
        for name, value in (("host_threads", self.host_threads), ("rounds_per_step", self.rounds_per_step)):
            if value is not None:
                require(isinstance(value, int) and 1 <= value <= 100_000, f"offload.{name}", value,
                        "must be a whole number from 1 to 100,000")
        if self.activation_levels is not None:
            allowed = ("device", *LEVELS)
            for key, n in self.activation_levels.items():
                require(key in allowed, "offload.activation_levels", key, f"must be one of {', '.join(allowed)}")
                require(isinstance(n, int) and n >= 0, f"offload.activation_levels.{key}", n,
                        "must be an integer >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkProfile:
    """How one training system places, moves and recomputes state."""

    name: str
    layer_major_rounds: bool  # True: every chunk of a round runs layer l before layer l+1 (weights move once)
    chunk_tokens: int  # tokens per chunk (sequences packed or split to it); 0: one micro-batch is one chunk
    optimizer_on: str
    master_weights: bool | None  # None: as the estimator (an fp32 master under 16-bit training)
    state_dtype_bytes: float  # weight, gradient and Adam moments bytes each; 0: the estimator's per precision
    grads_round_trip: bool  # gradients accumulated on the host come back each round (layer-major)
    ends_host_copy: bool  # a 16-bit copy of the embedding and head lives in host memory too
    matmul_scale: float  # x the estimator's matmul efficiency of the chip (estimate/efficiency.yaml)
    attention_scale: float  # x the estimator's fused-attention efficiency of the chip
    efficiency_framework: str  # the estimator's framework entry for fixed costs (estimate/efficiency.yaml)
    causal: bool = True  # attention scores over the causal half only (FlashAttention's causal mask)
    grad_buffers: int = 2  # device gradient buffers of streamed layers (2: one draining while one fills)
    lookahead: bool = False  # True: a link runs ahead of the compute as far as its buffers allow (pipeline.py);
    # False: each layer at max(compute, transfers each way), as ml_dataflow's congested July build measured
    # element-wise ops (model/ops.py eager kinds) run as chains of eager kernels, at the executor's counted bytes
    # (offload/eager.py); (): each one fused kernel, as ml_dataflow's C kernels
    eager_ops: tuple[str, ...] = ()
    # the host side of a host optimizer (offload/host.py): "overlapped" (gradients out over the pinned link while
    # the backward runs, a fused CPU AdamW per layer as they arrive) or "executor" (greentrain's StreamingTrainer:
    # synchronous pageable gradient copies in the backward, clipping and a single-tensor AdamW after it)
    host_side: str = "overlapped"


@cache
def offload_constants() -> dict[str, Any]:
    text = resources.files("greentrain.offload").joinpath("data", "offload.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def ml_dataflow_profile(matmul_scale: float | None = None, attention_scale: float | None = None) -> \
        FrameworkProfile:
    """als244/ml_dataflow at d6f941d0 (bench/transformer_demo.c): all state bf16, 2 + 2 + 2 + 2 bytes per
    parameter, no fp32 master; device AdamW with m and v streamed per layer; gradients accumulated on the host.
    What its recording program reserves, and its chunk rule, follow the build of the recorded sweeps
    (transformer_record_throughput.c at b5d6b6e3: offload/dataflow.py)."""
    k = offload_constants()["ml_dataflow"]
    return FrameworkProfile(
        name="ml_dataflow", layer_major_rounds=True, chunk_tokens=16384, optimizer_on="device-streamed",
        master_weights=False, state_dtype_bytes=2.0, grads_round_trip=True, ends_host_copy=True,
        matmul_scale=float(k["matmul_scale"] if matmul_scale is None else matmul_scale),
        attention_scale=float(k["attention_scale"] if attention_scale is None else attention_scale),
        efficiency_framework="megatron")


STATES = ("mixed", "bf16")


def pytorch_profile(*, causal: bool = True, state: str = "mixed") -> FrameworkProfile:
    """greentrain's executor (offload/train.py) on stock PyTorch: the estimator's kernels, host AdamW; each
    gradient leaves the device in its post-accumulate hook (two layers' gradients at a time: the accounted
    executor peaks with one layer's draining and the next one's filling). State "mixed": the estimator's
    bytes (an fp32 master under 16-bit training); "bf16": weights, gradients and Adam moments in bf16 without a
    master (what the executor keeps when the model is bf16; 8B fits 100 GiB of host)."""
    if state not in STATES:
        raise ConfigError("offload.state", state, f"must be one of {', '.join(STATES)}")
    bf16 = state == "bf16"
    return FrameworkProfile(
        name="pytorch", layer_major_rounds=False, chunk_tokens=0, optimizer_on="host",
        master_weights=False if bf16 else None, state_dtype_bytes=2.0 if bf16 else 0.0, grads_round_trip=False,
        ends_host_copy=False, matmul_scale=1.0,
        attention_scale=1.0, efficiency_framework="ddp", causal=causal, grad_buffers=2, lookahead=True,
        eager_ops=EXECUTOR_EAGER_OPS,  # offload/llama.py's RMSNorm, rotary and SwiGLU product
        host_side="executor")


PROFILES = ("pytorch", "ml_dataflow")

# The offload people run, as the planner sees each one (offload/stock.py runs them): where weights, gradients,
# optimizer state and activations live. None keeps activations on the device (no activation offload; all three
# leave checkpointing to the model) and steps AdamW on the host:
#   fsdp2      torch.distributed.fsdp.fully_shard(offload_policy=CPUOffloadPolicy()) per layer: the sharded (here
#              whole) parameters live in host memory and each layer's are copied in before its forward and again
#              before its backward, then freed; gradients go to the host (PyTorch docs, torch.distributed.fsdp
#              "CPUOffloadPolicy": "offloads parameters, gradients, and optimizer states to CPU ... the optimizer
#              step runs on CPU")
#   torchao    torchao.optim.CPUOffloadOptimizer(offload_gradients=True): every parameter stays on the device,
#              each gradient is copied to the host in its post-accumulate hook, the optimizer steps the host copy
#              (torchao/optim/cpu_offload.py @ v0.18.0)
#   deepspeed  ZeRO-Offload (stage 2, offload_optimizer.device cpu): 16-bit parameters on the device, gradients
#              reduced to host buffers, fp32 master and Adam moments on the host (Ren et al. 2021, ZeRO-Offload,
#              USENIX ATC, sections 3-4)
STOCK_EXECUTORS = ("fsdp2", "torchao", "deepspeed")
EXECUTORS = ("greentrain", *STOCK_EXECUTORS)  # greentrain: offload/train.py under the pytorch profile


def stock_profile(name: str, state: str = "mixed") -> FrameworkProfile:
    """The planner's profile of a stock executor: the pytorch profile's kernels and host AdamW, its own name, and
    the overlapped host side (pinned gradient copies during the backward, a fused CPU AdamW; offload/host.py)."""
    if name not in STOCK_EXECUTORS:
        raise ConfigError("offload.executor", name, f"must be one of {', '.join(EXECUTORS)}")
    from dataclasses import replace

    return replace(pytorch_profile(state=state), name=name, host_side="overlapped")


def stock_policy(name: str, num_layers: int, downgrade: bool = True) -> OffloadPolicy:
    """The placement a stock executor has (the planner does not choose it): FSDP2 streams every layer's weights
    (reshard_after_forward) one layer ahead, torchao and DeepSpeed keep them all resident; activations stay on
    the device; the optimizer steps on the host."""
    if name not in STOCK_EXECUTORS:
        raise ConfigError("offload.executor", name, f"must be one of {', '.join(EXECUTORS)}")
    return OffloadPolicy(resident_layers=0 if name == "fsdp2" else num_layers, prefetch_depth=1,
                         activation_levels={"device": num_layers, "input": 0, "attention": 0, "full": 0},
                         optimizer_on="host", downgrade=downgrade)


def get_profile(name: str, state: str = "mixed") -> FrameworkProfile:
    if name == "pytorch":
        return pytorch_profile(state=state)
    if name == "ml_dataflow":
        return ml_dataflow_profile()
    raise ConfigError("offload.framework", name, f"must be one of {', '.join(PROFILES)}")
