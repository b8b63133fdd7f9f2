"""The executor's eager element-wise bytes (offload/eager.py) counted from its own modules (offload/llama.py):
a TorchDispatchMode sums the input and output bytes of every aten op each one runs, forward and backward."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from greentrain.estimate.efficiency import efficiency_for
from greentrain.hardware.catalog import get_chip
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.offload.config import offload_framework
from greentrain.offload.costs import chunk_costs
from greentrain.offload.eager import EXECUTOR_EAGER_ELTS, executor_eager_bytes
from greentrain.offload.llama import RMSNorm, rotary


def _bytes(t: torch.Tensor) -> int:
    """Bytes a kernel reads or writes for ``t``: a broadcast (stride 0) dimension counts once; views share storage."""
    return math.prod(n for n, st in zip(t.shape, t.stride(), strict=True) if st != 0) * t.element_size()


class _Traffic(TorchDispatchMode):
    """Input + output bytes of every aten op run (views move nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            tensors = [a for a in tree_flatten((args, kwargs, out))[0] if isinstance(a, torch.Tensor)]
            self.total += sum(_bytes(a) for a in tensors)
        return out


def _glu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:  # Block.post_attention's product
    return F.silu(gate) * up


def _traffic(fn: Callable[..., torch.Tensor], shape: tuple[int, ...], dtype: torch.dtype,
             inputs: int) -> tuple[int, int]:
    """(forward, backward) bytes of ``fn`` over ``inputs`` leaf tensors of ``shape`` (the GLU's gate and up come
    from two projections, so their gradients leave separately)."""
    xs = [torch.randn(shape, dtype=dtype, requires_grad=True) for _ in range(inputs)]
    with _Traffic() as fwd:
        y = fn(*xs)
    grad = torch.randn_like(y)
    with _Traffic() as bwd:
        y.backward(grad)
    return fwd.total, bwd.total


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["norm", "rope", "glu"])
def test_counted_bytes_per_element(kind: str, dtype: torch.dtype) -> None:
    """Bytes per element (of x, of q and k, of the hidden product) in units of e, as the slope over the batch: the
    norm weight and the rotary cos/sin tables do not grow with it; per-row statistics are 1/d of an element."""
    d = 1024
    make, shape, per = {"norm": (lambda: RMSNorm(d).to(dtype), (16, d), 16 * d),  # a fresh weight each run
                        "rope": (lambda: rotary, (4, 16, 64), 4 * 16 * 64),
                        "glu": (lambda: _glu, (16, d), 16 * d)}[kind]
    n = 2 if kind == "glu" else 1
    one, two = _traffic(make(), (1, *shape), dtype, n), _traffic(make(), (2, *shape), dtype, n)
    e = torch.finfo(dtype).bits // 8
    counted = tuple((b - a) / per / e for a, b in zip(one, two, strict=True))
    assert counted == pytest.approx(EXECUTOR_EAGER_ELTS[kind], abs=0.02)


def test_pytorch_framework_prices_the_counted_bytes() -> None:
    """The pytorch framework's layer times grow by exactly the counted bytes over the fused ones at the chip's memory
    bandwidth; ml_dataflow's C kernels stay fused."""
    spec, chip = load_model("llama3.2-1b"), get_chip("h100-sxm")
    eff = efficiency_for("h100-sxm", "ddp")
    args = (spec, chip, eff)
    rest = (4096, 1, "bf16", "adamw", "bf16")
    eager, fused = offload_framework("pytorch"), dataclasses.replace(offload_framework("pytorch"), eager_ops=())
    a, b = chunk_costs(*args, eager, *rest), chunk_costs(*args, fused, *rest)
    ops = [op for op in model_ops(spec, 1, 4096, 2.0, flash=True).layers[0].ops if op.eager_kind]
    assert {op.eager_kind for op in ops} == set(EXECUTOR_EAGER_ELTS)
    rate = chip.memory_bytes_per_s * eff.memory * eff.kernel_efficiency
    extra = [sum(executor_eager_bytes(op, 2.0)[i] - op.bytes * (1, op.backward_factor)[i] for op in ops) / rate
             for i in (0, 1)]
    assert a.fwd_s - b.fwd_s == pytest.approx(extra[0], rel=1e-9)
    assert a.bwd_s - b.bwd_s == pytest.approx(extra[1], rel=1e-9)
    dataflow = offload_framework("ml_dataflow")  # its entry decides, not the efficiency passed in (ddp: eager)
    assert dataflow.eager_ops == ()
    no_eager = dataclasses.replace(eff, eager_ops=())
    assert chunk_costs(*args, dataflow, *rest) == chunk_costs(spec, chip, no_eager, dataflow, *rest)
