"""Activations an eager RMSNorm keeps (Hugging Face's LlamaRMSNorm): counted with torch's saved-tensor hooks on
norm -> linear, against a fused norm that keeps only its input; and what layer_activation adds for it."""

from __future__ import annotations

import pytest

from greentrain.estimate.memory import EAGER_RMSNORM_EXTRA_BYTES, layer_activation
from greentrain.model.load import load_model


def _saved_bytes_per_element(dtype_name: str) -> float:
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    dtype = getattr(torch, dtype_name)
    t, d = 64, 128
    norm = llama.LlamaRMSNorm(d).to(dtype)
    lin = torch.nn.Linear(d, 3 * d, bias=False).to(dtype)
    x = torch.randn(t, d, dtype=dtype, requires_grad=True)
    saved: dict[int, int] = {}

    def pack(a: object) -> object:
        storage = a.untyped_storage()  # type: ignore[attr-defined]
        saved[storage.data_ptr()] = storage.nbytes()
        return a

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda a: a):
        lin(norm(x))
    params = {p.untyped_storage().data_ptr() for p in [*norm.parameters(), *lin.parameters()]}
    return sum(n for ptr, n in saved.items() if ptr not in params) / (t * d)


@pytest.mark.parametrize(("dtype", "e"), [("bfloat16", 2.0), ("float32", 4.0)])
def test_eager_rmsnorm_keeps_4_bytes_more_per_element(dtype: str, e: float) -> None:
    fused = 2 * e  # a fused norm keeps its input, the linear its input (the norm's output)
    measured = _saved_bytes_per_element(dtype)
    assert measured == pytest.approx(fused + EAGER_RMSNORM_EXTRA_BYTES, abs=0.1)  # + one fp32 rsqrt per row


def test_layer_activation_adds_it_per_norm() -> None:
    spec = load_model("llama3-8b")
    b, s, e = 1, 4096, 2.0
    base = layer_activation(spec, b, s, e, moe=False, flash=True)
    eager = layer_activation(spec, b, s, e, moe=False, flash=True, eager_norm=True)
    assert eager.replicated_bytes - base.replicated_bytes == 2 * EAGER_RMSNORM_EXTRA_BYTES * b * s * spec.hidden_size
    assert eager.split_bytes == base.split_bytes and eager.input_bytes == base.input_bytes
