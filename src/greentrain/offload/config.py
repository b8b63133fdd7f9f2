"""Inputs of the offload planner: the memory caps, the policy knobs and the frameworks it plans for.

A framework is one entry of estimate/efficiency.yaml; one with an ``offload:`` block is one `greentrain offload`
plans (``OffloadFramework``, docs/offload-design.md sections 2 and 5): ``ml_dataflow`` is the seed system's own
order (layer-major rounds over 16,384-token chunks, bf16 state at 8 bytes per parameter, its three host save
levels), ``pytorch`` is what greentrain's executor (offload/train.py) does (one micro-batch at a time, weights
streamed per micro-batch, gradients to host in ``post_accumulate_grad_hook``, activations through
``saved_tensors_hooks`` and checkpointing). A stock executor (FSDP2, torchao, DeepSpeed) runs the pytorch
framework with its own placement (``stock_policy``) and host side (``stock_executor``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from greentrain import units
from greentrain.config import BOUNDS, as_bool, check_keys, require
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for, offload_block

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
    optimizer_on: str | None = None  # None: the framework's
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


LAYOUTS = ("greentrain", "ml_dataflow")
HOST_SIDES = ("overlapped", "executor")
STATES = ("mixed", "bf16")


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadFramework:
    """A framework as the offload planner reads it: one entry of estimate/efficiency.yaml, whose ``offload:``
    block gives the fields below up to ``host_side`` and whose other keys (its kernels and fixed costs, what
    `plan` reads too) give ``eager_ops`` and the state. ``name`` labels the plan: the framework, or the stock
    executor that runs it (``stock_executor``)."""

    name: str
    framework: str  # its efficiency.yaml entry (the estimator's kernels and fixed costs)
    # whose accounting of a layer's saved activations and reserved buffers (offload/costs.py): "greentrain"
    # (what autograd saves under offload/llama.py) or "ml_dataflow" (transformer_demo.c's save levels and the
    # buffers its recording program reserves, offload/dataflow.py)
    layout: str
    layer_major_rounds: bool  # True: every chunk of a round runs layer l before layer l+1 (weights move once)
    chunk_tokens: int  # tokens per chunk (sequences packed or split to it); 0: one micro-batch is one chunk
    optimizer_on: str  # OPTIMIZER_PLACES: the default the policy may override
    grads_round_trip: bool  # gradients accumulated on the host come back each round (layer-major)
    ends_host_copy: bool  # a 16-bit copy of the embedding and head lives in host memory too
    matmul_scale: float  # x the estimator's matmul efficiency of the chip (estimate/efficiency.yaml)
    attention_scale: float  # x the estimator's fused-attention efficiency of the chip
    causal: bool = True  # attention scores over the causal half only (FlashAttention's causal mask)
    grad_buffers: int = 2  # device gradient buffers of streamed layers (2: one draining while one fills)
    lookahead: bool = False  # True: a link runs ahead of the compute as far as its buffers allow (pipeline.py);
    # False: each layer at max(compute, transfers each way), as ml_dataflow's congested July build measured
    # the host side of a host optimizer (offload/host.py): "overlapped" (gradients out over the pinned link while
    # the backward runs, a fused CPU AdamW per layer as they arrive) or "executor" (greentrain's StreamingTrainer:
    # synchronous pageable gradient copies in the backward, clipping and a single-tensor AdamW after it)
    host_side: str = "overlapped"
    # gradients stay on the device until the optimizer step when a step has several micro-batches (torchao's
    # CPUOffloadOptimizer: offload_gradients "is not compatible with gradient accumulation", so it is off there
    # and every gradient is kept: 20.60 GiB planned against 24.43 GiB allocated on an H100 before, 2026-11-26)
    grads_stay_when_accumulating: bool = False
    # --- from the rest of the entry ---
    # element-wise ops (model/ops.py eager kinds) run as chains of eager kernels, at the executor's counted bytes
    # (offload/eager.py); (): each one fused kernel, as ml_dataflow's C kernels
    eager_ops: tuple[str, ...] = ()
    master_weights: bool | None = None  # None: as the estimator (an fp32 master under 16-bit training)
    state_dtype_bytes: float = 0.0  # weight, gradient and Adam moments bytes each; 0: the estimator's per precision

    def __post_init__(self) -> None:
        w = f"efficiency.frameworks.{self.framework}.offload"
        require(self.layout in LAYOUTS, f"{w}.layout", self.layout, f"must be one of {', '.join(LAYOUTS)}")
        require(self.optimizer_on in OPTIMIZER_PLACES, f"{w}.optimizer_on", self.optimizer_on,
                f"must be one of {', '.join(OPTIMIZER_PLACES)}")
        require(self.host_side in HOST_SIDES, f"{w}.host_side", self.host_side,
                f"must be one of {', '.join(HOST_SIDES)}")
        require(self.chunk_tokens >= 0, f"{w}.chunk_tokens", self.chunk_tokens, "must be a whole number >= 0")
        require(self.grad_buffers >= 1, f"{w}.grad_buffers", self.grad_buffers, "must be a whole number >= 1")
        for name in ("matmul_scale", "attention_scale"):
            v = getattr(self, name)
            require(math.isfinite(v) and 0 < v <= 10, f"{w}.{name}", v, "must be in (0, 10]")


# the offload block's keys, each read by its field's type; the others come from the rest of the entry
_FROM_ENTRY = ("name", "framework", "eager_ops", "master_weights", "state_dtype_bytes")
_BLOCK = {f.name: f for f in dataclasses.fields(OffloadFramework) if f.name not in _FROM_ENTRY}


def _read(key: str, value: Any, where: str) -> Any:
    kind = _BLOCK[key].type
    if kind == "bool":
        return as_bool(value, f"{where}.{key}")
    if kind == "str":
        return str(value)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (kind == "float" or value == int(value))
    if not ok:
        raise ConfigError(f"{where}.{key}", value, "must be a whole number" if kind == "int" else "must be a number")
    return int(value) if kind == "int" else float(value)


def offload_framework(name: str, state: str = "mixed") -> OffloadFramework:
    """The framework ``name`` (an efficiency.yaml entry with an ``offload:`` block) as the planner reads it.
    ``state`` "mixed": the framework's precision recipe (pytorch: an fp32 master, the estimator's bytes;
    ml_dataflow: pure-bf16); "bf16": weights, gradients and Adam moments in bf16 without a master (what
    greentrain's executor keeps when the model is bf16; 8B fits 100 GiB of host)."""
    if state not in STATES:
        raise ConfigError("offload.state", state, f"must be one of {', '.join(STATES)}")
    block, where = offload_block(name), f"efficiency.frameworks.{name}.offload"
    check_keys(block, tuple(_BLOCK), where)
    missing = [k for k, f in _BLOCK.items() if k not in block and f.default is dataclasses.MISSING]
    if missing:
        raise ConfigError(where, sorted(block), f"misses {', '.join(missing)}")
    eff = efficiency_for("", name)
    pure = state == "bf16" or eff.precision_recipe == "pure-bf16"
    return OffloadFramework(name=name, framework=name, eager_ops=eff.eager_ops, master_weights=False if pure else None,
                            state_dtype_bytes=2.0 if pure else 0.0, **{k: _read(k, v, where) for k, v in block.items()})


@cache
def offload_constants() -> dict[str, Any]:
    text = resources.files("greentrain.offload").joinpath("data", "offload.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


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
EXECUTORS = ("greentrain", *STOCK_EXECUTORS)  # greentrain: offload/train.py under the pytorch framework


def stock_executor(name: str, state: str = "mixed") -> OffloadFramework:
    """The pytorch framework run by a stock executor: its kernels and host AdamW, the executor's name on the plan,
    and its host side (offload/host.py). torchao and DeepSpeed overlap theirs (pinned gradient copies during the
    backward, a fused CPU AdamW). FSDP2's is greentrain's executor's: with several micro-batches each gradient
    after the first is copied to the host synchronously into pageable memory and added there (torch
    distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_reduce: "Accumulating grads: the CPU add kernel
    depends on the copy result"), and torch.optim.AdamW on host tensors defaults to the for-loop kernels, after
    the backward. Measured on an H100 (2026-11-26, Llama 3.2 1B, 2 x 8,192 tokens): fsdp2 3,853 tokens/s,
    greentrain's executor 3,781; priced overlapped, fsdp2 was 28,938 (7.5x), priced as the executor's 7,467.
    Where it places state is its policy (``stock_policy``), not the framework's."""
    if name not in STOCK_EXECUTORS:
        raise ConfigError("offload.executor", name, f"must be one of {', '.join(EXECUTORS)}")
    host_side = "executor" if name == "fsdp2" else "overlapped"
    return dataclasses.replace(offload_framework("pytorch", state), name=name, host_side=host_side,
                               grads_stay_when_accumulating=name == "torchao")


def stock_policy(name: str, num_layers: int, downgrade: bool = True) -> OffloadPolicy:
    """The placement a stock executor has (the planner does not choose it): FSDP2 streams every layer's weights
    (reshard_after_forward) one layer ahead, torchao and DeepSpeed keep them all resident; activations stay on
    the device; the optimizer steps on the host."""
    if name not in STOCK_EXECUTORS:
        raise ConfigError("offload.executor", name, f"must be one of {', '.join(EXECUTORS)}")
    return OffloadPolicy(resident_layers=0 if name == "fsdp2" else num_layers, prefetch_depth=1,
                         activation_levels={"device": num_layers, "input": 0, "attention": 0, "full": 0},
                         optimizer_on="host", downgrade=downgrade)
