"""Workload: how much is trained, at which precision, with which optimizer."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from greentrain.config import (
    MAX_BATCH_SEQUENCES,
    MAX_EPOCHS,
    MAX_SEQ_LEN,
    MAX_STEPS,
    MAX_TOKENS,
    as_bool,
    as_choice,
    as_float,
    as_int,
    check_keys,
    require,
)
from greentrain.errors import ConfigError
from greentrain.hardware.chip import PRECISIONS
from greentrain.model.finetune import FINETUNE_MODES, FREEZABLE, FULL, LORA_DTYPES, LORA_TARGETS, Finetune

OPTIMIZERS = ("adam", "adamw", "sgd", "adafactor")
RUN_LENGTH_FIELDS = ("train_tokens", "num_steps", "num_epochs")  # at most one of them says how long a run is
REQUIRED_FIELDS = ("global_batch_size", "seq_len")
GRAD_DTYPES = ("fp32", "bf16")
OPTIMIZER_DTYPES = {"fp32": 4.0, "bf16": 2.0}  # bytes of one optimizer-state element
# "" / None: the framework's
UNSET_OMITTED = ("fp8_recipe", "grad_dtype", "optimizer_dtype", "master_weights", "fp8_weights")
# flat keys of a file, one Finetune inside
FINETUNE_FIELDS = ("finetune", "freeze", "lora_rank", "lora_targets", "lora_dtype", "lora_dropout")
# How fp8 training scales its tensors (estimate/fp8.yaml prices each): one scale per tensor from the current amax
# (tensorwise) or from an amax history (delayed), one per row (rowwise), one per 32-element block (mxfp8)
FP8_RECIPES = ("tensorwise", "delayed", "rowwise", "mxfp8")

# Bytes of one activation element at each compute precision. fp8 training keeps activations that are
# saved for backward in bf16 (Transformer Engine / Micikevicius et al. 2022), so 2 bytes.
ACTIVATION_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 2.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    global_batch_size: int  # sequences per optimizer step
    seq_len: int  # tokens per sequence (the encoder's for an encoder-decoder model)
    target_seq_len: int = 0  # decoder tokens per sequence of an encoder-decoder model (0: seq_len)
    train_tokens: float = 0.0  # token budget; or give num_steps, or num_epochs x dataset_tokens
    num_steps: int = 0
    num_epochs: float = 0.0
    dataset_tokens: float = 0.0
    precision: str = "bf16"
    optimizer: str = "adamw"
    # the gradient accumulation buffer: fp32 (Megatron-LM), bf16 (NeMo's performance recipes); "" (unset): the
    # framework's, bf16 under pure bf16 (estimate/memory.py workload_grad_dtype, the one place it is resolved)
    grad_dtype: str = ""
    # the optimizer's moments (bf16: seed 002's ml_dataflow) and an fp32 master copy of the weights under mixed
    # precision; unset ("", None): the framework's precision_recipe (fp32 and a master, none under pure bf16)
    optimizer_dtype: str = ""
    master_weights: bool | None = None
    finetune: Finetune = FULL  # which parameters train (model/finetune.py): full, freeze or lora
    fp8_recipe: str = ""  # with precision fp8: one of FP8_RECIPES ("": the framework's, estimate/fp8.yaml)
    # with precision fp8: the model's compute copy of the weights kept in fp8, 1 byte per parameter, and gathered
    # in fp8 (Transformer Engine's fp8 primary weights: NeMo fp8_params, Megatron-LM --fp8-param-gather; torchao's
    # enable_fsdp_float8_all_gather); the fp32 master, where there is one, stays in the optimizer. None: the
    # framework's (efficiency.yaml fp8_weights, resolved in estimate/state_dtypes.py workload_fp8_weights)
    fp8_weights: bool | None = None

    def __post_init__(self) -> None:
        require(self.global_batch_size >= 1, "workload.global_batch_size", self.global_batch_size, "must be >= 1")
        require(self.seq_len >= 1, "workload.seq_len", self.seq_len, "must be >= 1")
        require(self.target_seq_len >= 0, "workload.target_seq_len", self.target_seq_len, "must be >= 0")
        for f in ("train_tokens", "num_epochs", "dataset_tokens"):
            v = getattr(self, f)
            require(math.isfinite(v) and v >= 0, f"workload.{f}", v, "must be a finite number >= 0")
        require(self.num_steps >= 0, "workload.num_steps", self.num_steps, "must be >= 0")
        for f in ("train_tokens", "dataset_tokens"):  # counts of tokens: 1e-7 was one step of 4 M tokens
            require(getattr(self, f) == 0 or getattr(self, f) >= 1, f"workload.{f}", getattr(self, f),
                    "must be 0 (not given) or at least 1 token")
        for f, top in (("global_batch_size", MAX_BATCH_SEQUENCES), ("seq_len", MAX_SEQ_LEN),
                       ("target_seq_len", MAX_SEQ_LEN), ("train_tokens", MAX_TOKENS), ("num_steps", MAX_STEPS),
                       ("num_epochs", MAX_EPOCHS), ("dataset_tokens", MAX_TOKENS)):
            require(getattr(self, f) <= top, f"workload.{f}", getattr(self, f),
                    f"must be <= {top:.0e} (docs/bad-input.md: a larger value is a slip, not a run)")
        steps_tokens = self.num_steps * self.global_batch_size * self.seq_len  # a run counted in steps
        require(steps_tokens <= MAX_TOKENS, "workload.num_steps", self.num_steps,
                f"x {self.global_batch_size * self.seq_len:,} tokens per step must be <= {MAX_TOKENS:.0e} tokens "
                "(docs/bad-input.md: a larger value is a slip, not a run)")
        lengths = [f for f in RUN_LENGTH_FIELDS if getattr(self, f)]
        if len(lengths) > 1:
            raise ConfigError(f"workload.{lengths[1]}", getattr(self, lengths[1]),
                              f"conflicts with workload.{lengths[0]}: give one of {', '.join(RUN_LENGTH_FIELDS)}")
        require(self.precision in PRECISIONS, "workload.precision", self.precision,
                f"must be one of {', '.join(PRECISIONS)}")
        require(self.optimizer in OPTIMIZERS, "workload.optimizer", self.optimizer,
                f"must be one of {', '.join(OPTIMIZERS)}")
        require(self.grad_dtype in ("", *GRAD_DTYPES), "workload.grad_dtype", self.grad_dtype,
                f"must be one of {', '.join(GRAD_DTYPES)} (or unset: the framework's)")
        require(self.optimizer_dtype in ("", *OPTIMIZER_DTYPES), "workload.optimizer_dtype", self.optimizer_dtype,
                f"must be one of {', '.join(OPTIMIZER_DTYPES)} (or unset: the framework's)")
        require(not (self.num_epochs > 0 and self.dataset_tokens == 0), "workload.dataset_tokens",
                self.dataset_tokens, "must be given with num_epochs")
        require(self.fp8_recipe in ("", *FP8_RECIPES), "workload.fp8_recipe", self.fp8_recipe,
                f"must be one of {', '.join(FP8_RECIPES)}")
        require(not self.fp8_recipe or self.precision == "fp8", "workload.fp8_recipe", self.fp8_recipe,
                f"applies to precision fp8 only (precision is {self.precision})")
        require(not self.fp8_weights or self.precision == "fp8", "workload.fp8_weights", self.fp8_weights,
                f"applies to precision fp8 only (precision is {self.precision})")

    @property
    def tokens_per_step(self) -> int:
        """Tokens the model is trained on per step (the decoder's for an encoder-decoder model)."""
        return self.global_batch_size * (self.target_seq_len or self.seq_len)

    @property
    def input_tokens_per_step(self) -> int:
        return self.global_batch_size * self.seq_len

    @property
    def activation_bytes(self) -> float:
        return ACTIVATION_BYTES[self.precision]

    def steps(self) -> int:
        """Optimizer steps of the whole run: num_steps, else the token budget / tokens per step (ceil)."""
        if self.num_steps:
            return self.num_steps
        tokens = self.train_tokens or self.num_epochs * self.dataset_tokens
        return math.ceil(tokens / self.input_tokens_per_step) if tokens else 0

    def to_dict(self) -> dict[str, Any]:  # unset fields are left out: they stay the framework's when read back
        """Flat keys, as a file spells them (the fine-tuning keys only when not full training)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "finetune" and (f.name not in UNSET_OMITTED or getattr(self, f.name) not in ("", None))}
        ft = self.finetune
        if ft.mode != "full":
            out["finetune"] = ft.mode
            out.update({"freeze": list(ft.freeze)} if ft.mode == "freeze" else
                       {"lora_rank": ft.lora_rank, "lora_targets": list(ft.lora_targets)})
            out.update({"lora_dtype": ft.lora_dtype} if ft.mode == "lora" and ft.lora_dtype else {})
            out.update({"lora_dropout": ft.lora_dropout} if ft.mode == "lora" and ft.lora_dropout else {})
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "workload") -> Workload:
        names = [f.name for f in dataclasses.fields(cls)]
        check_keys(data, names + list(FINETUNE_FIELDS[1:]), where)
        for f in REQUIRED_FIELDS:
            require(f in data, f"{where}.{f}", None, "is required")
        kw: dict[str, Any] = {"finetune": finetune_from_dict(data, where)}
        for k, v in data.items():
            f = f"{where}.{k}"
            if k in FINETUNE_FIELDS:
                continue
            if k == "precision":
                kw[k] = as_choice(v, f, PRECISIONS)
            elif k == "optimizer":
                kw[k] = as_choice(v, f, OPTIMIZERS)
            elif k == "grad_dtype":
                kw[k] = as_choice(v, f, GRAD_DTYPES)
            elif k == "optimizer_dtype":
                kw[k] = as_choice(v, f, OPTIMIZER_DTYPES)
            elif k == "fp8_recipe":
                kw[k] = as_choice(v, f, FP8_RECIPES)
            elif k in ("master_weights", "fp8_weights"):
                kw[k] = as_bool(v, f)
            elif k in ("train_tokens", "num_epochs", "dataset_tokens"):
                kw[k] = as_float(v, f, minimum=0.0)
            else:
                kw[k] = as_int(v, f, minimum=0)
        return cls(**kw)


def _names(value: Any, field: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list of names (or one comma-separated string), each from ``allowed``."""
    items = value.split(",") if isinstance(value, str) else value
    require(isinstance(items, (list, tuple)), field, value, f"must be a list of {', '.join(allowed)}")
    return tuple(as_choice(str(v).strip(), field, allowed) for v in items)


def finetune_from_dict(data: dict[str, Any], where: str = "workload") -> Finetune:
    """The fine-tuning keys of a workload mapping (FINETUNE_FIELDS)."""
    mode = as_choice(data.get("finetune", "full"), f"{where}.finetune", FINETUNE_MODES)
    kw: dict[str, Any] = {"mode": mode}
    if "freeze" in data:
        kw["freeze"] = _names(data["freeze"], f"{where}.freeze", FREEZABLE)
    if "lora_rank" in data:
        kw["lora_rank"] = as_int(data["lora_rank"], f"{where}.lora_rank", minimum=1)
    if "lora_targets" in data:
        kw["lora_targets"] = _names(data["lora_targets"], f"{where}.lora_targets", LORA_TARGETS)
    if "lora_dtype" in data:
        kw["lora_dtype"] = as_choice(data["lora_dtype"], f"{where}.lora_dtype", LORA_DTYPES)
    if "lora_dropout" in data:
        kw["lora_dropout"] = as_float(data["lora_dropout"], f"{where}.lora_dropout", minimum=0.0)
    for key in ("lora_rank", "lora_targets", "lora_dtype", "lora_dropout"):
        require(mode == "lora" or key not in data, f"{where}.{key}", data.get(key),
                f"applies to finetune: lora only (finetune is {mode})")
    return Finetune(**kw)
