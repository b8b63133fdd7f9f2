"""The offload people already run, on the same llama, loss and AdamW as greentrain's executor (offload/train.py),
so ``greentrain offload train --executor NAME`` compares them at the same caps (offload/config.py says where each
keeps what, as the planner prices it):

- ``fsdp2``: ``fully_shard(layer, offload_policy=CPUOffloadPolicy())`` on every layer and the model, one process
  (world size 1: gloo on CPU, NCCL on CUDA); parameters, gradients and AdamW live on the host.
- ``torchao``: ``torchao.optim.CPUOffloadOptimizer(params, torch.optim.AdamW, offload_gradients=True)`` (CUDA).
- ``deepspeed``: ``deepspeed.initialize`` with ZeRO stage 2 and ``offload_optimizer: {device: cpu}`` (CUDA).

Each step is the plain loop: every micro-batch's loss divided by their number, backward, the gradient norm
clipped, one optimizer step. On CPU the host and the "device" are one memory, so no device peak is measured
there (the own executor's byte accounting needs to know which copies are host ones); on CUDA the cap is torch's
per-process memory fraction and the peak ``torch.cuda.max_memory_allocated``.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from typing import Any

import torch

from greentrain.errors import ConfigError
from greentrain.offload.config import STOCK_EXECUTORS
from greentrain.offload.train import StepStats

NEEDS = {"fsdp2": ("torch", False), "torchao": ("torchao", True), "deepspeed": ("deepspeed", True)}
EXTRA = {"torchao": "pip install 'greentrain[offload]'",
         "deepspeed": "pip install deepspeed (it builds its CPU Adam with ninja)"}


def unavailable(name: str, device: str) -> str:
    """Why the stock executor cannot run here ("" when it can): its library missing or a CUDA-only one on CPU."""
    if name not in STOCK_EXECUTORS:
        return f"is not a stock executor ({', '.join(STOCK_EXECUTORS)})"
    module, cuda_only = NEEDS[name]
    if cuda_only and device != "cuda":  # first: installing the library would not help on this device
        return f"runs on CUDA only ({module}'s CPU offload moves state off a GPU); use --device cuda"
    if find_spec(module) is None:
        return f"needs {module}, which is not installed: {EXTRA.get(name, '')}"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def one_process_group(device: str) -> Iterator[None]:
    """A world of one (gloo on CPU, NCCL on CUDA) for libraries that need torch.distributed; an existing group is
    used as it is."""
    import torch.distributed as dist

    if dist.is_initialized():
        yield
        return
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}",
                            rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


class StockTrainer:
    """One stock executor around a model whose ``forward(tokens, loss_chunk_tokens)`` returns the mean loss."""

    def __init__(self, name: str, model: torch.nn.Module, *, device: str, grad_accum: int, lr: float = 3e-4,
                 betas: tuple[float, float] = (0.9, 0.95), weight_decay: float = 0.0, max_grad_norm: float = 1.0,
                 loss_chunk_tokens: int = 4096) -> None:
        reason = unavailable(name, device)
        if reason:
            raise ConfigError("offload.executor", name, reason)
        self.name, self.dev, self.max_grad_norm = name, torch.device(device), max_grad_norm
        self.loss_chunk_tokens, self.grad_accum = loss_chunk_tokens, grad_accum
        self.rss0 = _peak_rss_bytes()
        builders: dict[str, Callable[..., tuple[Any, Callable[[], None]]]] = {
            "fsdp2": self._fsdp2, "torchao": self._torchao, "deepspeed": self._deepspeed}
        self.engine, self._step = builders[name](model, lr=lr, betas=betas, weight_decay=weight_decay)

    def _fsdp2(self, model: torch.nn.Module, **adamw: Any) -> tuple[Any, Callable[[], None]]:
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

        policy = CPUOffloadPolicy(pin_memory=self.dev.type == "cuda")  # pinning needs an accelerator
        for layer in model.layers:  # type: ignore[union-attr]
            fully_shard(layer, offload_policy=policy)
        fully_shard(model, offload_policy=policy)
        opt = torch.optim.AdamW(model.parameters(), foreach=False, **adamw)

        def step() -> None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_grad_norm, foreach=False)
            opt.step()
            opt.zero_grad(set_to_none=True)

        # the parameters stay on the host: FSDP2 copies each layer to the device for its forward and backward
        # (moving the model to CUDA here made its first forward refuse: "FSDP parameters should be materialized
        # on CPU when enabling CPU offloading", seen on an H100)
        return model, step

    def _torchao(self, model: torch.nn.Module, **adamw: Any) -> tuple[Any, Callable[[], None]]:
        from torchao.optim import CPUOffloadOptimizer

        model = model.to(self.dev)
        # offload_gradients frees each device gradient once copied: "not compatible with gradient accumulation"
        # (its docstring), so with several micro-batches the device gradients stay and the last copy is the sum
        opt = CPUOffloadOptimizer(model.parameters(), torch.optim.AdamW, offload_gradients=self.grad_accum == 1,
                                  **adamw)

        def step() -> None:  # large parameters' gradients are on the host once their copies end, small ones not
            for event in opt.queue.values():
                event.synchronize()
            grads = [h.grad for d, h in opt.param_d2h_map.items() if d in opt.queue] + \
                [p.grad for g in opt.d_param_groups for p in g["params"] if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(grads, self.max_grad_norm, foreach=False)
            opt.step()
            opt.zero_grad()

        return model, step

    def _deepspeed(self, model: torch.nn.Module, **adamw: Any) -> tuple[Any, Callable[[], None]]:
        import deepspeed

        config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": self.grad_accum,
                  "gradient_clipping": self.max_grad_norm,
                  "bf16": {"enabled": next(model.parameters()).dtype == torch.bfloat16},
                  "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}},
                  "optimizer": {"type": "AdamW", "params": {"lr": adamw["lr"], "betas": list(adamw["betas"]),
                                                            "weight_decay": adamw["weight_decay"]}}}
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        return engine, lambda: None  # engine.step() after every micro-batch steps at the accumulation boundary

    def step(self, micro_batches: list[torch.Tensor]) -> StepStats:
        """One optimizer step over micro-batches of token ids (batch, seq_len + 1)."""
        t0 = time.perf_counter()
        total = 0.0
        if len(micro_batches) != self.grad_accum:
            raise ConfigError("offload.micro_batches", len(micro_batches), f"the {self.name} executor was built for "
                              f"{self.grad_accum} micro-batches per step")
        cuda = self.dev.type == "cuda"
        boundary_s = 0.0  # DeepSpeed steps its optimizer inside the last micro-batch's engine.step()
        for mb in micro_batches:
            loss = self.engine(mb.to(self.dev), self.loss_chunk_tokens)
            if self.name == "deepspeed":  # the engine divides by gradient_accumulation_steps itself
                self.engine.backward(loss)
                if cuda:
                    torch.cuda.synchronize()
                t_ds = time.perf_counter()
                self.engine.step()
                if cuda:
                    torch.cuda.synchronize()
                boundary_s = time.perf_counter() - t_ds
            else:
                (loss / len(micro_batches)).backward()
            total += float(loss.detach()) / len(micro_batches)
        if cuda:
            torch.cuda.synchronize()
        t_opt = time.perf_counter()
        self._step()  # clipping and the optimizer (fsdp2, torchao; DeepSpeed's is its last engine.step())
        if cuda:
            torch.cuda.synchronize()
        t_end = time.perf_counter()
        seq = micro_batches[0].shape[1] - 1
        return StepStats(loss=total, step_time_s=t_end - t0, optimizer_time_s=t_end - t_opt + boundary_s,
                         tokens=sum(mb.shape[0] * seq for mb in micro_batches),
                         device_peak_bytes=torch.cuda.max_memory_allocated(self.dev) if cuda else 0,
                         host_bytes=_peak_rss_bytes() - self.rss0, h2d_bytes=0, d2h_bytes=0)
