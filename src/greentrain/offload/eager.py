"""What greentrain's executor's own element-wise modules (offload/llama.py) read and write per element as eager
PyTorch kernels, forward and backward: the bytes the ``pytorch`` framework prices (offload/costs.py).

Counted, not derived: tests/unit/offload/test_offload_eager.py runs each module under a ``TorchDispatchMode`` that
sums the input and output bytes of every aten op (views move nothing; a broadcast operand counts once), on fp32
and bf16, at two batch sizes; the per-element slope is below, in units of e, the activation's bytes per element.
Per-row statistics (1/d of an element), the norm weight and the rotary cos/sin tables (per position, shared by
every head and sequence) are left out. No op upcasts: a bf16 model runs every kernel in bf16.

- norm, ``RMSNorm.forward`` (x * rsqrt(mean(x^2) + eps) * w), per element of x. Forward 7e: pow (e + e), mean (e),
  x * rsqrt (e + e), * w (e + e). Backward 23e: grad * w (e + e); grad * (x * rsqrt) (2e + e) summed over tokens
  for w (e); * rsqrt (e + e); * x (2e + e) summed over the row (e); mean's expand / d (e); pow's x^1 (e + e),
  * 2 (e + e), * grad (2e + e); the two gradients of x added (2e + e).
  Hugging Face's LlamaRMSNorm upcasts to fp32 first (model/ops.py ``eager_bytes_per_elt``: 20 + 4e forward).
- rope, ``rotary`` (x * cos + cat(-x2, x1) * sin), per element of q and k. Forward 10e: * cos (e + e), the
  negated half (e/2 + e/2), cat (e + e), * sin (e + e), the sum (2e + e), as ``eager_bytes_per_elt``. Backward
  14e: grad * cos (e + e), grad * sin (e + e), the negated half (e/2 + e/2), two slice_backward (e/2 + e each),
  two sums (2e + e each).
- glu, ``F.silu(gate) * up`` in ``Block.post_attention``, per hidden element. Forward 5e: silu (e + e), the product
  (2e + e), as ``eager_bytes_per_elt``. Backward 9e: grad * up (2e + e), grad * silu (2e + e), silu_backward
  (2e + e).
"""

from __future__ import annotations

from greentrain.model.ops import eager_bytes_per_elt
from greentrain.model.primitives import Op

# kind -> (forward, backward) bytes per element in units of e (the counts above)
EXECUTOR_EAGER_ELTS: dict[str, tuple[float, float]] = {"norm": (7.0, 23.0), "rope": (10.0, 14.0),
                                                       "glu": (5.0, 9.0)}
EXECUTOR_EAGER_OPS = tuple(EXECUTOR_EAGER_ELTS)


def executor_eager_bytes(op: Op, e: float) -> tuple[float, float]:
    """(forward, backward) bytes the executor's kernels move for ``op`` (an op with an ``eager_kind``), at ``e``
    bytes per activation element. Its elements are the estimator's: ``op.eager_bytes`` is elements x
    ``eager_bytes_per_elt`` (model/primitives.py ``elementwise``)."""
    elements = op.eager_bytes / eager_bytes_per_elt(op.eager_kind, e)
    fwd, bwd = EXECUTOR_EAGER_ELTS[op.eager_kind]
    return elements * fwd * e, elements * bwd * e
