"""The cross-entropy's time follows the framework's loss kernel (model/loss.py), as its memory does."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.estimate.compute import Peaks, Sharding, ops_time
from greentrain.estimate.efficiency import efficiency_for
from greentrain.model.load import load_model
from greentrain.model.loss import LOSS_KERNELS, loss_traffic_bytes_per_logit
from greentrain.model.ops import model_ops


@pytest.mark.parametrize(("kernel", "fwd", "bwd"), [
    ("fp32", 38.0, 14.0),  # .float() 6, max 4, -= 8, exp 8, sum 4, div_ 8; mul_ 8, cast back 6
    ("fp32-eager", 22.0, 26.0),  # .float() 6, log_softmax 3 reads + 1 write 16; zeros 4, its backward 16, cast 6
    ("chunked", 22.0, 26.0),  # F.cross_entropy on each chunk's .float() logits
    ("fused", 4.0, 4.0),  # read the logits twice (max, sum of exponentials); read them and write the gradient
    ("compiled", 4.0, 4.0),
    ("chunked-compiled", 4.0, 4.0),  # torchtune's chunked loss under compile: Inductor's kernels per chunk
])
def test_bytes_per_bf16_logit_are_the_counted_ops(kernel: str, fwd: float, bwd: float) -> None:
    assert loss_traffic_bytes_per_logit(kernel, 2.0) == (fwd, bwd)

H100_PEAKS = Peaks(matmul=989.5e12, attention=989.5e12, ends=989.5e12)


def test_chunked_losses_keep_no_logits_eager_or_compiled() -> None:
    from greentrain.model.loss import loss_bytes_per_logit

    assert loss_bytes_per_logit("chunked") == loss_bytes_per_logit("chunked-compiled") == 0.0
    assert efficiency_for("a100-80gb", "torchtune-compile").loss_kernel == "chunked-compiled"


def test_every_kernel_has_traffic_and_an_unknown_one_is_refused() -> None:
    for k in LOSS_KERNELS:
        fwd, bwd = loss_traffic_bytes_per_logit(k, 2.0)
        assert fwd > 0 and bwd >= 0
    with pytest.raises(ValueError, match="unknown loss kernel 'liger'"):
        loss_traffic_bytes_per_logit("liger", 2.0)


def test_the_heads_time_moves_by_the_kernels_bytes_over_the_bandwidth() -> None:
    """Llama 3.2 1B, 8 x 2,048 tokens, on an H100: the loss is memory bound, so changing the kernel changes the
    head's forward and backward by the difference of bytes over the chip's streaming bandwidth, nothing else."""
    model = load_model("llama3.2-1b")
    head = model_ops(model, 8, 2048, 2.0, flash=True).head
    logits = 8 * 2048 * model.vocab_size
    base = efficiency_for("h100-sxm", "megatron")
    bw = 3.35e12

    def times(kernel: str) -> tuple[float, float]:
        t = ops_time(head, Sharding(), H100_PEAKS, bw, dataclasses.replace(base, loss_kernel=kernel))
        return t.forward_s, t.backward_s

    (f32, b32), (ffu, bfu) = times("fp32"), times("fused")
    stream = bw * base.memory
    assert f32 - ffu == pytest.approx(logits * 34.0 / stream, rel=1e-6)
    assert b32 - bfu == pytest.approx(logits * 10.0 / stream, rel=1e-6)
    assert f32 + b32 > sum(times("fp32-eager")) > sum(times("compiled")) == pytest.approx(ffu + bfu)


def test_a_loss_kernel_override_moves_memory_and_time_together() -> None:
    """--loss-kernel (Profile.loss_kernel) replaces the framework's: Liger's fused linear cross-entropy on the
    Hugging Face profile keeps no logits and moves 3 e per logit forward, nothing backward."""
    from greentrain.estimate.efficiency import Profile
    from greentrain.model.loss import loss_bytes_per_logit

    own, liger = Profile(framework="ddp").for_chip("h100-sxm"), Profile(framework="ddp", loss_kernel="fused-linear")
    assert own.loss_kernel == "fp32-eager" and liger.for_chip("h100-sxm").loss_kernel == "fused-linear"
    assert loss_traffic_bytes_per_logit("fused-linear", 2.0) == (6.0, 0.0)
    assert loss_bytes_per_logit("fused-linear") == 0.0


def test_an_unknown_loss_kernel_is_one_line_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    from greentrain.cli.main import main

    assert main(["plan", "--loss-kernel", "liger"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--loss-kernel='liger'" in err and "fused-linear" in err
