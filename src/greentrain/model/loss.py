"""What each cross-entropy implementation moves through memory per logit, forward and backward, and keeps at its
peak (loss_bytes_per_logit).

The LM head's loss is memory bound: a micro-batch of T tokens has T x vocabulary logits (2.1 G for 16 k tokens
of Llama 3's 128 k vocabulary), and the implementations differ several-fold in how often they read and write
them. Counted kernel by kernel: the passes each makes over the logits (an element-wise op or a one-pass reduction
reads its input once and writes its output once, as the eager chains of model/ops.py are counted; a softmax
kernel that cannot hold a row reads it once per pass), ``e`` bytes per 16-bit logit, 4 per fp32 value;
per-token values (a row's max, log-sum-exp, the target's logit) are negligible beside a row of the vocabulary.

- fp32: Megatron-LM's vocab-parallel cross-entropy (NVIDIA/Megatron-LM megatron/core/tensor_parallel/
  cross_entropy.py, _VocabParallelCrossEntropy; nanotron's sharded cross-entropy has the same steps). Forward:
  ``.float()`` (e + 4), max (4), ``-= max`` in place (4 + 4), ``exp(out=)`` (4 + 4), sum (4), ``div_`` by the sum
  (4 + 4), the softmax kept for the backward: e + 36. Backward: ``mul_`` by the output gradient (4 + 4) and the
  autograd engine's cast of the fp32 gradient to the logits' dtype (4 + e): e + 12.
- fp32-eager: PyTorch's F.cross_entropy on logits upcast with ``.float()`` (Hugging Face's ForCausalLMLoss,
  torchtitan's eager loss). Forward: the cast (e + 4), log_softmax, nll_loss (a gather). PyTorch's softmax
  kernel for a row longer than shared memory holds (aten/src/ATen/native/cuda/SoftMax.cu cunn_SoftMaxForward:
  any vocabulary above ~56 k fp32 logits on Hopper, ~40 k on Ampere) reads the row three times (its max, the
  sum of exponentials, the output) and writes it once: 16. Backward: nll_loss's dense gradient (zeros, 4),
  _log_softmax_backward_data (cunn_SoftMaxBackward: the gradient's row sum, then the gradient and the output
  read and the input gradient written: 16), the cast back (4 + e). e + 20 forward, e + 24 backward.
- fused: a fused kernel that never materialises fp32 copies. Apex's xentropy (flash-attn 1.x's
  CrossEntropyLoss, llm-foundry's fused_crossentropy of its published tables): the forward reads the 16-bit
  logits twice (the row's max, then the sum of exponentials), the backward reads them and writes the gradient:
  2 e forward, 2 e backward. flash-attn 2's Triton kernel reads them once forward (3 e in all); Transformer
  Engine's and Liger's (Megatron's cross_entropy_loss_fusion) write the gradient during a second forward pass
  and scale it in the backward (5 e): 4 e is the middle of these.
- compiled: torch.compile's Inductor fuses the upcast, log-softmax and their backward: a looped reduction
  forward (max, then the sum of exponentials: the logits read twice) and one point-wise kernel backward (read
  the logits, write their gradient): 2 e forward, 2 e backward.
- chunked: torchtune's CEWithChunkedOutputLoss, F.cross_entropy on each chunk's ``.float()`` logits: the
  bytes of fp32-eager, a chunk at a time.
- chunked-compiled: the same loss under torchtune's ``compile: True`` (training.compile_loss compiles its
  compute_cross_entropy, one chunk at a time: torchtune modules/loss/ce_chunked_output_loss.py
  apply_compile_strategy): the bytes of compiled, a chunk at a time.
- fused-linear: Liger's fused linear cross-entropy (liger_kernel/ops/fused_linear_cross_entropy.py; the Hugging
  Face Trainer's ``use_liger_kernel``): the LM head and the loss run a chunk of tokens at a time, and its kernel
  (ops/cross_entropy.py liger_cross_entropy_kernel) reads a chunk's logits for the online max and sum, then reads
  them again and writes their gradient in place, during the forward: 3 e forward, nothing per logit backward.
"""

from __future__ import annotations

from typing import Any

from greentrain.num import where

LOSS_KERNELS = ("fp32", "fp32-eager", "fused", "compiled", "chunked", "chunked-compiled", "fused-linear")


def loss_traffic_bytes_per_logit(kernel: str, e: float) -> tuple[float, float]:
    """(forward, backward) bytes ``kernel`` reads and writes per logit (module docstring), at ``e`` bytes per
    16-bit logit."""
    if kernel == "fp32":
        return e + 36.0, e + 12.0
    if kernel in ("fp32-eager", "chunked"):
        return e + 20.0, e + 24.0
    if kernel in ("fused", "compiled", "chunked-compiled"):
        return 2.0 * e, 2.0 * e
    if kernel == "fused-linear":
        return 3.0 * e, 0.0
    raise ValueError(f"unknown loss kernel {kernel!r}: one of {', '.join(LOSS_KERNELS)}")


def loss_traffic_bytes(logits: float, e: float) -> tuple[tuple[float, float], ...]:
    """(forward, backward) bytes of a cross-entropy over ``logits`` logits under each of LOSS_KERNELS, in order."""
    return tuple((logits * f, logits * b) for f, b in (loss_traffic_bytes_per_logit(k, e) for k in LOSS_KERNELS))


# The loss's buffers at the peak, per logit (the last stage): the 16-bit logits, their fp32 copy and the fp32
# softmax kept for the backward (Megatron-LM / nanotron vocab-parallel cross entropy upcast the logits;
# PyTorch's F.cross_entropy on bf16 logits under autocast does the same). Checked on the playbook sweep:
# nanotron 1B at micro-batch 1 and 2 measures 5.4 and 11.6 GiB above the model's tensors (docs/validation.md).
LOSS_FP32_BYTES_PER_LOGIT = 8.0
# fp32 buffers per logit alive at once in the backward of PyTorch's unfused cross-entropy (loss_bytes_per_logit),
# and of its vocabulary-parallel form under torch.distributed.tensor.parallel.loss_parallel
EAGER_LOSS_FP32_BUFFERS = 3
LOSS_PARALLEL_FP32_BUFFERS = 4


def loss_bytes_per_logit(loss_kernel: str, e: float = 2.0, vocab_parallel: Any = False) -> Any:
    """Bytes the loss keeps per logit at its peak, the 16-bit logits included, by loss kernel
    (model/loss.py LOSS_KERNELS, which also says what each moves):
    - fp32: the logits (e), their fp32 copy and the fp32 softmax (LOSS_FP32_BYTES_PER_LOGIT);
    - fp32-eager: PyTorch's F.cross_entropy on logits upcast with ``.float()`` (torchtitan
      build_cross_entropy_loss, pytorch/torchtitan @9dec370 train.py loss_fn and @b5bcd76 components/loss.py):
      log_softmax and nll_loss are separate autograd nodes, so the backward holds three fp32 buffers per logit
      at once in ``_log_softmax_backward_data``: the saved log-softmax output, nll_loss's dense gradient and the
      input gradient (EAGER_LOSS_FP32_BUFFERS; the forward's 16-bit logits, fp32 copy and log-softmax, e + 8,
      are fewer); with tensor parallelism torchtitan runs it under loss_parallel (vocabulary-sharded logits,
      torch/distributed/tensor/parallel/loss.py): _nll_loss_and_log_softmax_backward computes
      (zeros_like(x) + exp(x)) * grad beside the saved log-softmax x, four fp32 buffers
      (LOSS_PARALLEL_FP32_BUFFERS; ``vocab_parallel``); tests/unit/estimate counts both with the profiler;
    - compiled: the cross-entropy under torch.compile (torchtitan compiles its loss with the model; Hugging Face
      models compiled whole): Inductor fuses the fp32 upcast, log-softmax and their backward, keeping the 16-bit
      logits and a per-token fp32 log-sum-exp; the backward writes the 16-bit logit gradient beside the logits
      (2 e). Checked on an H200 (BENCHMARKS.md "Session 8": compiled Llama 3.2 1B, 8 x 2,048 tokens, 42.34 GB
      peak allocated; the plan's 10 bytes per logit gave 57.94 GB, 2 e gives 43.7 GB, tests/unit/estimate);
    - fused: a fused cross-entropy kernel (flash-attn's ``CrossEntropyLoss`` in ops/triton/cross_entropy.py,
      Liger's, Megatron's ``cross_entropy_loss_fusion``) reads the 16-bit logits and writes their gradient in
      place: the logits alone (e);
    - chunked, chunked-compiled, fused-linear: the head and loss run per chunk of tokens (torchtune
      ``CEWithChunkedOutputLoss``, eager or compiled; Liger's fused linear cross-entropy), a chunk's logits at a
      time: none at the scale of the step."""
    if loss_kernel == "fp32-eager":
        return where(vocab_parallel, LOSS_PARALLEL_FP32_BUFFERS * 4.0, max(EAGER_LOSS_FP32_BUFFERS * 4.0, e + 8.0))
    return {"fp32": e + LOSS_FP32_BYTES_PER_LOGIT, "fused": e, "compiled": 2 * e, "chunked": 0.0,
            "chunked-compiled": 0.0, "fused-linear": 0.0}[loss_kernel]
