"""The training state's bytes per parameter and the dtypes a workload trains it in: weights, gradients, optimizer
moments and the fp32 master copy. The one place a workload's unset dtypes (``grad_dtype`` "", ``optimizer_dtype``
"", ``master_weights`` None) are resolved from its framework's profile (``grad_dtype``, ``precision_recipe``):
plan, search (estimate/vector.py through compose), simulate, validate and the offload planner read them here.

Mixed-precision Adam keeps 2 (weights) + 2 (gradients) + 12 (fp32 master, momentum, variance) bytes per parameter
(Rajbhandari et al. 2020, ZeRO §3); Megatron-LM accumulates gradients in fp32 (4 bytes), giving the 18 bytes per
parameter of Korthikanti et al. 2022 Fig. 1; pure bf16 training (torchtune) keeps 2 + 2 + 4 = 8.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from greentrain.model.finetune import Finetune
from greentrain.workload import GRAD_DTYPES, OPTIMIZER_DTYPES, Workload


def optimizer_bytes_per_param(optimizer: str, precision: str, state_bytes: float = 4.0,
                              master: bool = True) -> float:
    """Optimizer states (with the fp32 master copy under mixed precision), bytes per parameter.

    Adam/AdamW: momentum + variance 8, master 4 (ZeRO §3.1: K = 12). SGD with momentum: 4 (+4 master).
    Adafactor: factored second moments are O(rows + cols) (Shazeer & Stern 2018), neglected; master 4.
    ``state_bytes``: bytes of one state element (4: fp32; 2: bf16 moments, as ml_dataflow and 8-bit-free
    low-precision optimizers keep them); ``master`` False: no fp32 master copy (pure bf16 training: the bf16
    weights are updated in place, seed 002's 8 bytes per parameter with bf16 weights and gradients).
    """
    states = {"adam": 8.0, "adamw": 8.0, "sgd": 4.0, "adafactor": 0.0}[optimizer] * state_bytes / 4.0
    return states + master_bytes_per_param(precision, master)


class FrameworkDefaults(Protocol):
    """What a framework profile (estimate/efficiency.py Efficiency) says of the state a workload leaves unset."""

    @property
    def grad_dtype(self) -> str: ...  # fp32 (Megatron-LM's accumulation) or bf16 (NeMo's performance recipes)

    @property
    def precision_recipe(self) -> str: ...  # mixed (fp32 master and Adam moments) or pure-bf16 (torchtune's)

    @property
    def fp8_weights(self) -> bool: ...  # an fp8 run keeps fp8 primary weights (NeMo's, Megatron Bridge's presets)

    @property
    def lora_dtype(self) -> str: ...  # its LoRA adapters' precision (model/finetune.py LORA_DTYPES)


def workload_pure_bf16(w: Workload, fw: FrameworkDefaults) -> bool:
    return fw.precision_recipe == "pure-bf16" and w.precision not in ("fp32", "tf32")


def fp32_adapters(w: Workload, fw: FrameworkDefaults) -> bool:
    """LoRA with fp32 adapters on a 16-bit model (lora_dtype fp32 or fp32-autocast: peft's cast_adapter_dtype):
    the adapters, every trainable parameter, are fp32 tensors, so their gradients and AdamW moments are fp32 and
    they are their own master, whatever the workload's dtypes say of a 16-bit model's training. (Their weights are
    counted at the model's 2 bytes: 2 bytes per adapter parameter short, 0.4 GB at rank 256 on Llama 3 8B's q, k,
    v, o.)"""
    return w.finetune.mode == "lora" and w.precision not in ("fp32", "tf32") \
        and workload_finetune(w, fw).lora_dtype in ("fp32", "fp32-autocast")


def workload_optimizer_dtype(w: Workload, fw: FrameworkDefaults) -> str:
    """The optimizer moments' dtype: fp32 for fp32 adapters (fp32_adapters); else the workload's when set, else bf16
    under the framework's pure-bf16 recipe (torchtune's AdamW on bf16 parameters), else fp32."""
    if fp32_adapters(w, fw):
        return "fp32"
    return w.optimizer_dtype or ("bf16" if workload_pure_bf16(w, fw) else "fp32")


def workload_master_weights(w: Workload, fw: FrameworkDefaults) -> bool:
    """An fp32 master copy of the weights: the workload's when set; else, with the optimizer dtype set, none for bf16
    moments and one for fp32 (an optimizer dtype alone names the recipe, pure bf16 or mixed, as a runs CSV's
    optimizer_dtype cell does: `--optimizer-dtype bf16 --master-weights` keeps bf16 moments beside an fp32
    master); else the framework's: none under pure bf16, else one. None for fp32 adapters (fp32_adapters)."""
    if fp32_adapters(w, fw):
        return False
    if w.master_weights is not None:
        return w.master_weights
    return w.optimizer_dtype == "fp32" if w.optimizer_dtype else not workload_pure_bf16(w, fw)


def workload_optimizer_bytes(w: Workload, fw: FrameworkDefaults) -> float:
    """optimizer_bytes_per_param of a workload (its optimizer, precision, state dtype and master copy; the unset
    ones from the framework's precision recipe)."""
    return optimizer_bytes_per_param(w.optimizer, w.precision, OPTIMIZER_DTYPES[workload_optimizer_dtype(w, fw)],
                                     workload_master_weights(w, fw))


def workload_master_bytes(w: Workload, fw: FrameworkDefaults) -> float:
    return master_bytes_per_param(w.precision, workload_master_weights(w, fw))


def master_bytes_per_param(precision: str, master: bool = True) -> float:
    """The fp32 master copy of mixed-precision training (none when training in fp32, or without a master)."""
    return 0.0 if precision in ("fp32", "tf32") or not master else 4.0


def workload_fp8_weights(w: Workload, fw: FrameworkDefaults) -> bool:
    """fp8 primary weights, for an fp8 run only: the workload's when set, else the framework's (efficiency.yaml
    ``fp8_weights``: NeMo 2's and Megatron Bridge's fp8 precision presets set fp8_param_gather = True,
    nemo/collections/llm/recipes/precision/mixed_precision.py bf16_with_fp8_mixed and its current-scaling and
    MXFP8 siblings; Megatron-LM's --fp8-param-gather and torchao's enable_fsdp_float8_all_gather default off)."""
    if w.precision != "fp8":
        return False
    return w.fp8_weights if w.fp8_weights is not None else bool(fw.fp8_weights)


def workload_finetune(w: Workload, fw: FrameworkDefaults) -> Finetune:
    """The workload's fine-tuning with its LoRA adapters' precision resolved: the workload's ``lora_dtype`` when
    set, else the framework's (efficiency.yaml ``lora_dtype``: fp32-autocast for Hugging Face Trainer with peft,
    ``model`` for frameworks whose adapters run in the model's dtype)."""
    ft = w.finetune
    if ft.mode != "lora" or ft.lora_dtype is not None:
        return ft
    return replace(ft, lora_dtype=fw.lora_dtype)


def workload_weight_bytes(w: Workload, fw: FrameworkDefaults) -> float:
    """weight_bytes_per_param of a workload (its precision and fp8 primary weights, the framework's if unset)."""
    return weight_bytes_per_param(w.precision, workload_fp8_weights(w, fw))


def weight_bytes_per_param(precision: str, fp8_weights: bool = False) -> float:
    """The model's compute copy of the weights: fp32, 16-bit, or fp8 primary weights (Workload.fp8_weights: 1 byte,
    Transformer Engine's Float8Tensor data). Not counted, as the fp8 copy of 16-bit weights is not: the transpose
    Transformer Engine caches across micro-batches on Hopper unless ``disable_parameter_transpose_cache`` (set by
    Megatron Bridge's Blackwell Llama recipes and MLPerf's configs), MXFP8's column-wise copy."""
    return 4.0 if precision in ("fp32", "tf32") else (1.0 if fp8_weights else 2.0)


def grad_bytes_per_param(grad_dtype: str, precision: str) -> float:
    if grad_dtype not in GRAD_DTYPES:  # "" is unset: resolve it with workload_grad_dtype first
        raise ValueError(f"grad dtype {grad_dtype!r} is not resolved (one of {', '.join(GRAD_DTYPES)})")
    return 4.0 if grad_dtype == "fp32" or precision in ("fp32", "tf32") else 2.0


def workload_grad_dtype(w: Workload, fw: FrameworkDefaults) -> str:
    """The dtype of the workload's gradient buffer: its own ``grad_dtype`` when set (a user's value always wins);
    unset: fp32 when training in fp32/tf32, bf16 without an fp32 master (pure bf16 training: the bf16 weights' own
    gradients, seed 002's 8 bytes per parameter), else the framework's (efficiency.yaml ``grad_dtype``: fp32 as
    Megatron-LM accumulates, bf16 for NeMo/Megatron-Bridge's performance recipes, ddp.grad_reduce_in_fp32 false).
    The one place the unset state dtypes are resolved (with workload_optimizer_dtype and
    workload_master_weights): plan, search (estimate/vector.py), simulate and validate. fp32 for fp32 adapters
    (fp32_adapters: the gradients of fp32 parameters)."""
    if fp32_adapters(w, fw):
        return "fp32"
    if w.grad_dtype:
        return w.grad_dtype
    if w.precision in ("fp32", "tf32"):
        return "fp32"
    return "bf16" if not workload_master_weights(w, fw) else fw.grad_dtype


def workload_grad_bytes(params: Any, w: Workload, fw: FrameworkDefaults) -> Any:
    """Gradient bytes of ``params`` parameters (a float, or a column) in the workload's gradient dtype
    (workload_grad_dtype: unset, the framework's)."""
    return params * grad_bytes_per_param(workload_grad_dtype(w, fw), w.precision)
