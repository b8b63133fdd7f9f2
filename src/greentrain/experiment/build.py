"""What the worker builds before training (torch): tokenizer, model, encoded data sets, training arguments.

Only the worker imports this module. Everything is built offline: a word-level tokenizer trained on the run's
own training text (``tokenizers``, under a second), a model from its transformers config with random
initialisation (or a local checkpoint folder), data with fixed padding (one shape: one FLOP count).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from greentrain.errors import ConfigError
from greentrain.experiment.data import TextPairs
from greentrain.experiment.job import Job
from greentrain.experiment.lengths import EOS_ID, PAD_ID, UNK_ID, wordlevel_tokenizer
from greentrain.experiment.predict import SPECIAL_TOKENS, hf_config
from greentrain.model import families

IGNORE_INDEX = -100  # label positions the loss skips (padding)


CAUSAL = "causal-lm"
DECODER_START_IDS = {"pad": PAD_ID, "eos": EOS_ID}  # FineTuning.decoder_start -> the word-level tokenizer's id


def _arguments_class(job: Job) -> Any:
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    return TrainingArguments if job.task == CAUSAL else Seq2SeqTrainingArguments


def check_training_args(job: Job) -> None:
    """Every train.* name must be a field of the installed Seq2SeqTrainingArguments (TrainingArguments for a
    causal LM)."""
    import transformers

    known = {f.name for f in dataclasses.fields(_arguments_class(job))}
    for key, value in job.train.args.items():
        if key not in known:
            raise ConfigError(f"train.{key}", value, f"not a training argument of the installed transformers "
                              f"{transformers.__version__}")


def build_tokenizer(job: Job, train: TextPairs) -> Any:
    """A PreTrainedTokenizerFast: local folder, else word-level trained on the training split."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if job.tokenizer_kind == "path" or job.model.init == "pretrained":
        return AutoTokenizer.from_pretrained(job.tokenizer_path or job.model.path, local_files_only=True)
    return PreTrainedTokenizerFast(tokenizer_object=wordlevel_tokenizer(train), pad_token=SPECIAL_TOKENS[PAD_ID],
                                   eos_token=SPECIAL_TOKENS[EOS_ID], unk_token=SPECIAL_TOKENS[UNK_ID])


def build_model(job: Job, vocab: int) -> nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    auto = AutoModelForCausalLM if job.task == CAUSAL else AutoModelForSeq2SeqLM
    if job.model.init == "pretrained":
        model = auto.from_pretrained(job.model.path, local_files_only=True)
    else:
        cfg = {k: v for k, v in hf_config(job, vocab).items() if k != "model_type"}
        special: dict[str, Any] = {"pad_token_id": PAD_ID, "eos_token_id": EOS_ID, "bos_token_id": EOS_ID}
        if job.task != CAUSAL:  # the token the family's decoder starts from (its record, model/families.py)
            start = DECODER_START_IDS[families.finetuning(job.model.arch).decoder_start]
            special.update(decoder_start_token_id=start, forced_bos_token_id=None, forced_eos_token_id=None)
        config = AutoConfig.for_model(job.model.arch, **{**cfg, **special})
        model = auto.from_config(config)
    freeze(model, job.model.freeze)
    if job.model.lora_rank:
        add_lora(model, job.model.arch, job.model.lora_targets, job.model.lora_rank)
    return model




class LoraLinear(nn.Module):
    """peft's LoRA beside a frozen projection (Hu et al. 2021 §4.1): base(x) + B(A(x)) x alpha / r, B zero at
    the start (the adapted model starts as the base one), A as nn.Linear initialises it; alpha = 2r as peft's
    examples use."""

    def __init__(self, base: nn.Linear, rank: int) -> None:
        super().__init__()
        self.base = base
        self.lora_a = nn.Linear(base.in_features, rank, bias=False)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False)
        nn.init.zeros_(self.lora_b.weight)
        self.scale = 2.0

    @property
    def weight(self) -> torch.Tensor:  # Hugging Face reads a projection's weight (T5: wo's dtype)
        return self.base.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scale


def add_lora(model: nn.Module, arch: str, targets: tuple[str, ...], rank: int) -> int:
    """Freeze every parameter, then put rank-``rank`` adapters beside the targeted projections of every attention
    (self and cross) and MLP block; returns the number of adapted projections."""
    for p in model.parameters():
        p.requires_grad_(False)
    modules = families.finetuning(arch).lora_modules  # each target's module names: the family's record
    names = {n for t in targets for n in modules[t]}
    count = 0
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if child_name in names and isinstance(child, nn.Linear):
                setattr(parent, child_name, LoraLinear(child, rank))
                count += 1
    return count


def freeze(model: nn.Module, parts: tuple[str, ...]) -> None:
    """Turn off the gradients of the named parts (their optimizer state is then never created)."""
    getters = {"embeddings": "get_input_embeddings", "encoder": "get_encoder", "decoder": "get_decoder"}
    for part in parts:
        for p in getattr(model, getters[part])().parameters():
            p.requires_grad_(False)


def encode(tokenizer: Any, pairs: TextPairs, job: Job) -> list[dict[str, list[int]]]:
    """Fixed-length examples: sources padded to max_source_tokens, labels to max_target_tokens (padding -100).
    A causal LM: each source and its target joined, padded to max_source_tokens + max_target_tokens, labels the
    tokens themselves (the model shifts them; padding -100)."""
    d = job.data
    if job.task == CAUSAL:
        x = tokenizer([f"{s} {t}" for s, t in zip(pairs.sources, pairs.targets, strict=True)],
                      max_length=d.max_source_tokens + d.max_target_tokens, padding="max_length", truncation=True)
        return [{"input_ids": ids, "attention_mask": mask,
                 "labels": [t if m else IGNORE_INDEX for t, m in zip(ids, mask, strict=True)]}
                for ids, mask in zip(x["input_ids"], x["attention_mask"], strict=True)]
    x = tokenizer(list(pairs.sources), max_length=d.max_source_tokens, padding="max_length", truncation=True)
    y = tokenizer(list(pairs.targets), max_length=d.max_target_tokens, padding="max_length", truncation=True)
    return [{"input_ids": ids, "attention_mask": mask,
             "labels": [t if m else IGNORE_INDEX for t, m in zip(lab, lmask, strict=True)]}
            for ids, mask, lab, lmask in zip(x["input_ids"], x["attention_mask"], y["input_ids"],
                                            y["attention_mask"], strict=True)]


def training_arguments(job: Job, out_dir: Path, seed: int, cuda: bool) -> Any:
    es = job.early_stopping
    kw: dict[str, Any] = {
        **job.train.args, "output_dir": str(out_dir), "report_to": [], "save_strategy": "no",
        # step curves (loss, greentrain's figures) in the log history, about 20 points a run (MLflow, report)
        "logging_strategy": "steps", "logging_steps": max(1, job.train.max_steps // 20), "disable_tqdm": True,
        "seed": seed, "use_cpu": not cuda,
        "bf16": job.train.precision == "bf16", "fp16": job.train.precision == "fp16",
        "eval_strategy": "steps" if es else "no", "per_device_eval_batch_size": job.eval.batch_size}
    if es:
        kw["eval_steps"] = es.eval_steps
    return _arguments_class(job)(**kw)


@torch.no_grad()
def generate(model: nn.Module, tokenizer: Any, sources: tuple[str, ...], job: Job) -> list[str]:
    """Greedy (or beam) summaries of ``sources`` in batches of eval.batch_size, with the job's decoding options
    (eval.min_new_tokens, eval.length_penalty)."""
    model.eval()
    device = next(model.parameters()).device
    out: list[str] = []
    step = job.eval.batch_size
    for i in range(0, len(sources), step):
        x = tokenizer(list(sources[i:i + step]), max_length=job.data.max_source_tokens, padding="max_length",
                      truncation=True, return_tensors="pt").to(device)
        ids = model.generate(input_ids=x["input_ids"], attention_mask=x["attention_mask"],  # type: ignore[operator]
                             max_new_tokens=job.eval.max_new_tokens, num_beams=job.eval.num_beams, do_sample=False,
                             min_new_tokens=job.eval.min_new_tokens, length_penalty=job.eval.length_penalty)
        out += tokenizer.batch_decode(ids, skip_special_tokens=True)
    return out


def generated_tokens(tokenizer: Any, texts: list[str]) -> list[int]:
    """Tokens of each generated summary (special tokens excluded)."""
    return [len(x) for x in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []


def save_model(trainer: Any, tokenizer: Any, folder: Path) -> float:
    """Write the fine-tuned model (safetensors and config) and its tokenizer to ``folder``; their bytes."""
    trainer.save_model(str(folder))
    tokenizer.save_pretrained(str(folder))
    return tree_bytes(folder)


def tree_bytes(folder: Path) -> float:
    """Bytes of the regular files under ``folder`` (what storage bills)."""
    return float(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()))

