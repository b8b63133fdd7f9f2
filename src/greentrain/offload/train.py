"""The executor: trains a layer stack under a device-memory cap with a planner's placement, on stock PyTorch
(design/offload.md section 5).

- Weights: every parameter's master lives in host memory (pinned on CUDA); the device copy of a streamed layer
  is a storage resized to its bytes and filled before the layer runs, resized to 0 after (FSDP2's mechanism), so
  the views autograd saved of it see the reloaded values in backward. The next ``prefetch_depth`` layers load
  ahead on a side stream (CUDA). Resident layers and the ends stay on the device.
- Gradients: ``register_post_accumulate_grad_hook`` copies or adds each gradient into its host buffer and drops
  the device one (torchao's CPUOffloadOptimizer pattern); clipping and AdamW run on the host masters.
- Activations, per layer: device (nothing), full (``saved_tensors_hooks`` copy every saved storage to the host),
  attention (the attention core outside two non-reentrant checkpoints: its inputs and outputs go to the host,
  the rest is recomputed), input (the whole layer checkpointed: the hook sees only its input).
- Loss: chunked and checkpointed head (offload/llama.py ``lm_loss``).
Four traps are handled where they occur: copies are per storage and rebuilt with ``set_`` (views survive);
storages are keyed by weak identity; device copies are refreshed after the optimizer step; the executor drives
the layer loop itself, so a checkpoint's recomputation re-runs no prefetch or eviction.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.weak import WeakIdKeyDictionary

from greentrain.errors import ConfigError
from greentrain.offload.llama import LayerStack, lm_loss
from greentrain.offload.plan import OffloadPlan
from greentrain.offload.testing import DeviceBytes

EXECUTOR_LEVELS = ("device", "full", "attention", "input")


def layer_levels(plan: OffloadPlan, num_layers: int) -> list[str]:
    """Per-layer save level from a plan's slot counts: the last layers (first in backward) keep theirs on the
    device, then full, attention and input towards the first layer."""
    if plan.chunks_per_round != 1:
        raise ConfigError("plan.chunks_per_round", plan.chunks_per_round, f"must be 1: the executor runs one chunk "
                          f"per round (framework {plan.framework!r} plans more)")
    s = plan.slots()
    if sum(s.values()) != num_layers:
        raise ConfigError("plan", plan.model, f"was made for {sum(s.values())} layers, the model has {num_layers}")
    order = ["input"] * s["input"] + ["attention"] * s["attention"] + ["full"] * s["full"] + ["device"] * s["device"]
    return order


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStats:
    loss: float
    step_time_s: float
    tokens: int
    device_peak_bytes: int  # accounted (CPU) or torch.cuda.max_memory_allocated
    host_bytes: int  # masters, gradients, optimizer states and the peak of host activations
    h2d_bytes: int  # since the trainer was built (its first loads included)
    d2h_bytes: int
    optimizer_time_s: float = 0.0  # clipping, the host AdamW and the device refresh (after the last backward)


class _Holder:
    """A host copy of one device storage, and the device storage rebuilt from it (weakly held)."""

    __slots__ = ("__weakref__", "device", "host")

    def __init__(self, host: torch.Tensor) -> None:
        self.host = host
        self.device: weakref.ref[Any] | None = None


class StreamingTrainer:
    def __init__(self, stack: LayerStack, plan: OffloadPlan, *, lr: float = 3e-4, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.95), max_grad_norm: float | None = None,
                 device: str | torch.device = "cpu", accountant: DeviceBytes | None = None,
                 loss_chunk_tokens: int = 4096, levels: list[str] | None = None) -> None:
        self.stack, self.plan, self.dev = stack, plan, torch.device(device)
        n = len(stack.layers)
        self.levels = levels if levels is not None else layer_levels(plan, n)
        bad = [lv for lv in self.levels if lv not in EXECUTOR_LEVELS]
        if len(self.levels) != n or bad:
            raise ConfigError("levels", self.levels, f"must be {n} of {', '.join(EXECUTOR_LEVELS)}")
        self.resident = set(range(n - min(plan.resident_layers, n), n))
        self.k = plan.prefetch_depth
        self.acct, self.max_grad_norm, self.loss_chunk_tokens = accountant, max_grad_norm, loss_chunk_tokens
        self.cuda = self.dev.type == "cuda"
        self.stream = torch.cuda.Stream() if self.cuda else None
        self.h2d = self.d2h = 0
        self._host_act = self._host_act_peak = 0
        self._acts: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._param_storages: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._loaded: set[int] = set()
        self._events: dict[int, Any] = {}
        self._first_grad: set[int] = set()
        self._done: dict[int, int] = {}
        with self._mode():
            self._place()
        masters = [h for _, h in self._pairs]
        self.opt = torch.optim.AdamW(masters, lr=lr, betas=betas, weight_decay=weight_decay, foreach=False)

    # ---- placement -------------------------------------------------------------------------------------
    def _mode(self) -> contextlib.AbstractContextManager[Any]:
        return self.acct if self.acct is not None else contextlib.nullcontext()

    def _host(self) -> contextlib.AbstractContextManager[None]:
        return self.acct.host() if self.acct is not None else contextlib.nullcontext()

    def _place(self) -> None:
        """Host masters for every parameter; ends and resident layers on the device; streamed layers empty."""
        pin = self.cuda
        self._pairs: list[tuple[torch.nn.Parameter, torch.Tensor]] = []
        self._layer_params: list[list[tuple[torch.nn.Parameter, torch.Tensor]]] = []
        ends = [self.stack.embed, self.stack.norm, self.stack.head]
        for i, mod in enumerate([*ends, *self.stack.layers]):
            pairs = []
            for p in mod.parameters():
                with self._host():
                    h = torch.empty(p.shape, dtype=p.dtype, device="cpu", pin_memory=pin)
                    h.copy_(p.detach())
                    h.grad = torch.zeros_like(h)
                    dev = torch.empty(p.shape, dtype=p.dtype, device=self.dev)
                p.data = dev
                self._param_storages[p.untyped_storage()] = True
                if self.acct is not None:
                    self.acct.exclude(p)
                pairs.append((p, h))
                self._pairs.append((p, h))
                p.register_post_accumulate_grad_hook(self._grad_hook(h, i - len(ends)))
            if i >= len(ends):
                self._layer_params.append(pairs)
                layer = i - len(ends)
                for p, _ in pairs:
                    p.untyped_storage().resize_(0)
                if layer in self.resident:
                    self._load(layer)
            else:
                for p, h in pairs:
                    self._count(p.untyped_storage().nbytes())
                    with torch.no_grad():
                        p.data.copy_(h)

    def _count(self, nbytes: int) -> None:
        if self.acct is not None:
            self.acct.add(nbytes, "loading weights")

    def _load(self, i: int) -> None:
        if i in self._loaded or i < 0 or i >= len(self._layer_params):
            return
        ctx = torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()
        with ctx, torch.no_grad():
            for p, h in self._layer_params[i]:
                nbytes = p.numel() * p.element_size()
                p.untyped_storage().resize_(nbytes)
                self._count(nbytes)
                p.data.copy_(h, non_blocking=self.cuda)
                self.h2d += nbytes
            if self.stream is not None:
                ev = torch.cuda.Event()
                ev.record(self.stream)
                self._events[i] = ev
        self._loaded.add(i)

    def _ensure(self, i: int) -> None:
        self._load(i)
        ev = self._events.pop(i, None)
        if ev is not None:
            torch.cuda.current_stream().wait_event(ev)

    def _evict(self, i: int) -> None:
        if i in self.resident or i not in self._loaded:
            return
        if self.stream is not None:
            torch.cuda.current_stream().synchronize()
        for p, _ in self._layer_params[i]:
            nbytes = p.untyped_storage().nbytes()
            p.untyped_storage().resize_(0)
            if self.acct is not None:
                self.acct.remove(nbytes)
        self._loaded.discard(i)

    # ---- gradients -------------------------------------------------------------------------------------
    def _grad_hook(self, h: torch.Tensor, layer: int) -> Any:
        key = id(h)

        def hook(p: torch.Tensor) -> None:
            assert p.grad is not None and h.grad is not None
            with self._host(), torch.no_grad():
                if key in self._first_grad:
                    h.grad.add_(p.grad.to("cpu"))
                else:
                    h.grad.copy_(p.grad)
                    self._first_grad.add(key)
            self.d2h += p.grad.numel() * p.grad.element_size()
            p.grad = None
            if layer >= 0:  # the layer's backward is over once every parameter has its gradient
                self._done[layer] = self._done.get(layer, 0) + 1
                if self._done[layer] == len(self._layer_params[layer]):
                    self._evict(layer)

        return hook

    # ---- activations -----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _offload(self) -> Iterator[None]:
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            yield

    def _pack(self, t: torch.Tensor) -> Any:
        st = t.untyped_storage()
        if st in self._param_storages or t.device.type != self.dev.type:
            return ("keep", t)
        holder = self._acts.get(st)
        if holder is None:
            with self._host(), torch.no_grad():
                raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st)
                host = torch.empty(raw.numel(), dtype=torch.uint8, device="cpu", pin_memory=self.cuda)
                host.copy_(raw, non_blocking=False)
            holder = _Holder(host)
            self._acts[st] = holder
            nbytes = host.numel()
            self.d2h += nbytes
            self._host_act += nbytes
            self._host_act_peak = max(self._host_act_peak, self._host_act)
            weakref.finalize(holder, self._release_host, nbytes)
        return (holder, t.dtype, t.storage_offset(), t.size(), t.stride(), t.requires_grad)

    def _release_host(self, nbytes: int) -> None:
        self._host_act -= nbytes

    def _unpack(self, packed: Any) -> torch.Tensor:
        if packed[0] == "keep":
            return packed[1]
        holder, dtype, offset, size, stride, _ = packed
        st = holder.device() if holder.device is not None else None
        if st is None:
            with torch.no_grad():
                raw = torch.empty(holder.host.numel(), dtype=torch.uint8, device=self.dev)
                raw.copy_(holder.host, non_blocking=self.cuda)
            self.h2d += holder.host.numel()
            st = raw.untyped_storage()
            holder.device = weakref.ref(st)
        return torch.empty(0, dtype=dtype, device=self.dev).set_(st, offset, size, stride)

    # ---- the step --------------------------------------------------------------------------------------
    def _layer(self, i: int, x: torch.Tensor) -> torch.Tensor:
        self._ensure(i)
        for j in range(i + 1, i + 1 + self.k):
            self._load(j)
        layer, level = self.stack.layers[i], self.levels[i]
        if level == "device":
            y = layer(x)
        elif level == "full":
            with self._offload():
                y = layer(x)
        elif level == "attention" and self.stack.split_attention:
            with self._offload():
                q, k, v = checkpoint(layer.pre_attention, x, use_reentrant=False)
                o = layer.core(q, k, v)  # type: ignore[operator]
                y = checkpoint(layer.post_attention, x, o, use_reentrant=False)
        else:  # input (and attention for stacks that cannot split a layer)
            with self._offload():
                y = checkpoint(layer, x, use_reentrant=False)
        self._evict(i)
        if y.requires_grad:
            y.register_hook(self._backward_hook(i))
        return y

    def _backward_hook(self, i: int) -> Any:
        def hook(grad: torch.Tensor) -> None:
            self._ensure(i)
            for j in range(i - 1, i - 1 - self.k, -1):
                self._load(j)

        return hook

    def step(self, micro_batches: list[torch.Tensor]) -> StepStats:
        """One optimizer step over micro-batches of token ids (batch, seq_len + 1)."""
        seq = micro_batches[0].shape[1] - 1
        if seq != self.plan.seq_len:
            raise ConfigError("plan.seq_len", self.plan.seq_len, f"the plan was made for another sequence length: "
                              f"the batch has {seq} tokens per sequence")
        per_plan = self.plan.chunk_tokens // self.plan.seq_len  # sequences per micro-batch the plan holds
        rows = max(mb.shape[0] for mb in micro_batches)
        if rows != per_plan:
            raise ConfigError("plan.micro_batch", per_plan, f"the plan was made for another batch: a micro-batch "
                              f"has {rows} sequences")
        t0 = time.perf_counter()
        self._first_grad.clear()
        total = 0.0
        with self._mode():
            for mb in micro_batches:
                self._done = {}
                tokens = mb.to(self.dev, copy=True)  # a device copy (on CPU too: counted, then freed)
                x = self.stack.embed(tokens[:, :-1])
                for i in range(len(self.stack.layers)):
                    x = self._layer(i, x)
                loss = lm_loss(self.stack, x, tokens[:, 1:], self.loss_chunk_tokens) / len(micro_batches)
                loss.backward()
                total += float(loss.detach())
                del x, loss
            if self.cuda:
                torch.cuda.synchronize()
            t_opt = time.perf_counter()
            self._optimizer_step()
        if self.cuda:
            torch.cuda.synchronize()
        t_end = time.perf_counter()
        n_tokens = sum(mb.shape[0] * seq for mb in micro_batches)
        peak = (self.acct.peak_bytes if self.acct is not None else
                torch.cuda.max_memory_allocated(self.dev) if self.cuda else 0)
        return StepStats(loss=total, step_time_s=t_end - t0, tokens=n_tokens, device_peak_bytes=peak,
                         host_bytes=self.host_state_bytes() + self._host_act_peak, h2d_bytes=self.h2d,
                         d2h_bytes=self.d2h, optimizer_time_s=t_end - t_opt)

    def _optimizer_step(self) -> None:
        with self._host():
            masters = [h for _, h in self._pairs]
            if self.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(masters, self.max_grad_norm, foreach=False)
            self.opt.step()
        with torch.no_grad():  # device copies go stale after the step: refresh what stays loaded
            for i, pairs in enumerate(self._layer_params):
                if i in self._loaded:
                    for p, h in pairs:
                        p.data.copy_(h, non_blocking=self.cuda)
            for p, h in self._pairs[: self._ends_count()]:
                p.data.copy_(h, non_blocking=self.cuda)

    def _ends_count(self) -> int:
        return sum(1 for m in (self.stack.embed, self.stack.norm, self.stack.head) for _ in m.parameters())

    def host_state_bytes(self) -> int:
        total = 0
        for _, h in self._pairs:
            total += 2 * h.numel() * h.element_size()  # master and gradient
            for v in self.opt.state.get(h, {}).values():
                if isinstance(v, torch.Tensor):
                    total += v.numel() * v.element_size()
        return total

    def loaded_layers(self) -> set[int]:
        return set(self._loaded)
