"""Blind prediction of a variant with greentrain's planner (no torch): FLOPs, tokens and memory per step always;
time, energy, CO2e and $ when the experiment names the chip it runs on (``site.chip``).

The model is the transformers config the worker will build (the config class's defaults for the fields the
planner reads, under ``model.config_path`` and ``model.config``) with the vocabulary of the word-level tokenizer
the worker will train: whitespace words of the training texts plus 3 special tokens. Fixed padding makes the
token counts exact: batch x max_source_tokens encoder tokens and batch x max_target_tokens decoder tokens (a causal
LM: batch x (max_source_tokens + max_target_tokens) tokens, the source and its target joined). With
``runtime.devices: N`` on ``runtime.nodes: M`` the planner sees N x M chips (N per node) in data parallel and the
global batch N x M x batch x accumulation: FLOPs, tokens, time and energy of all devices, memory per device.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greentrain.config import load_mapping, read_text
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.experiment.cost import price, site_of
from greentrain.experiment.data import load_splits
from greentrain.experiment.job import Job
from greentrain.model import families

SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")
# arch -> the fields the planner reads, at the installed transformers config class's defaults: each family's
# record (model/families.py, FineTuning.defaults) with its model_type; tests/unit/experiment compares them with the
# installed classes.
ARCH_DEFAULTS: families.FamilyView[dict[str, Any]] = families.FamilyView(
    lambda f: None if f.finetuning is None else {"model_type": f.model_type, **f.finetuning.defaults})
PLANNER_PRECISION = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}
FLOPS_ONLY_CHIP = "h100-sxm"  # any chip: FLOPs, tokens and memory do not depend on it


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    flop_per_step: float
    tokens_per_step: float  # source + target tokens
    memory_bytes: float  # per device: weights, gradients, optimizer state, activations
    chip: str  # "" when time, energy, CO2e and $ are not predicted
    train_s: float | None = None
    energy_j: float | None = None  # IT energy of the training, before PUE
    kg_co2e: float | None = None
    cost_usd: float | None = None


def wordlevel_vocab(texts: Sequence[str]) -> list[str]:
    """The vocabulary a ``tokenizers`` WordLevel model with a WhitespaceSplit pre-tokenizer learns from ``texts``."""
    words = {w for t in texts for w in t.split()}
    return [*SPECIAL_TOKENS, *sorted(words)]


# a tokenizer.json: Llama 3 9 MB, Gemma 3 33 MB (256k tokens with merges); 256 MiB leaves a wide margin
TOKENIZER_MAX_BYTES = 256 * 2**20

def vocab_size(job: Job) -> int:
    if job.model.init == "pretrained" or job.tokenizer_kind == "path":
        path = Path(job.tokenizer_path or job.model.path)
        f = path / "tokenizer.json" if path.is_dir() else path
        field = "tokenizer.path" if job.tokenizer_path else "model.path"
        text = read_text(f, field, max_bytes=TOKENIZER_MAX_BYTES)  # not /dev/zero, not 20 GB
        try:
            return len(json.loads(text)["model"]["vocab"])
        except (KeyError, ValueError, TypeError):
            raise ConfigError(field, str(path), "needs a tokenizer.json with model.vocab") from None
    d = job.data
    train, *_ = load_splits(d.source, d.path, d.source_column, d.target_column,
                            (d.train_size, d.eval_size, d.test_size), 0)
    return len(wordlevel_vocab([*train.sources, *train.targets]))


def hf_config(job: Job, vocab: int) -> dict[str, Any]:
    """The config.json mapping the worker builds its model from."""
    m = job.model
    cfg: dict[str, Any] = {"model_type": m.arch, **families.finetuning(m.arch).defaults}
    if m.init == "pretrained":
        cfg.update(load_mapping(Path(m.path) / "config.json", "model.path"))
    if m.config_path:
        cfg.update(load_mapping(m.config_path, "model.config_path"))
    cfg.update(m.config)
    cfg["vocab_size"] = vocab
    if cfg.get("num_decoder_layers") is None:  # T5Config: null means "as many as the encoder"
        cfg.pop("num_decoder_layers", None)
    return cfg


def _scenario(job: Job, cfg: dict[str, Any], chip_name: str) -> Any:
    from greentrain.footprint.site import Site
    from greentrain.hardware.catalog import get_chip
    from greentrain.model.hf import spec_from_hf_config
    from greentrain.scenario import Scenario, build_cluster
    from greentrain.workload import Workload

    t = job.train
    d = job.data
    # causal-lm: one sequence, the source and its target joined; summarization: encoder and decoder lengths
    seq_len, target_len = ((d.max_source_tokens + d.max_target_tokens, 0) if job.task == "causal-lm"
                           else (d.max_source_tokens, d.max_target_tokens))
    workload = Workload(global_batch_size=t.batch_size * t.grad_accum * job.world_size, seq_len=seq_len,
                        target_seq_len=target_len, num_steps=t.max_steps,
                        precision=PLANNER_PRECISION[t.precision], optimizer=t.planner_optimizer,
                        finetune=_finetune(job))
    site = site_of(job.site) or Site.from_intensity(0.0, pue=1.0)
    return Scenario(model=spec_from_hf_config(cfg, job.model.arch),
                    cluster=build_cluster(get_chip(chip_name), job.world_size,
                                          chips_per_node=job.devices if job.nodes > 1 else None),
                    workload=workload, site=site)


def _finetune(job: Job) -> Any:
    """The planner's Finetune of the job: model.freeze, model.lora, or full fine-tuning. The runner's adapters
    (build.LoraLinear) are fp32 modules of an fp32 model that Trainer's bf16/fp16 runs under autocast: each casts
    its input to 16 bits and keeps that copy (model/finetune.py lora_dtype fp32-autocast)."""
    from greentrain.model.finetune import FULL, Finetune

    m = job.model
    if m.lora_rank:
        dtype = "fp32-autocast" if job.train.precision in ("bf16", "fp16") else "model"
        return Finetune(mode="lora", lora_rank=m.lora_rank, lora_targets=m.lora_targets, lora_dtype=dtype)
    return Finetune(mode="freeze", freeze=m.freeze) if m.freeze else FULL


def predict(job: Job) -> Prediction:
    """The planner's figures for one variant (blind: nothing measured)."""
    from greentrain.estimate.run import estimate_run
    from greentrain.parallel.strategy import Strategy

    cfg = hf_config(job, vocab_size(job))
    sc = _scenario(job, cfg, job.site.chip or FLOPS_ONLY_CHIP)
    strategy = Strategy(dp=job.world_size, micro_batch_size=job.train.batch_size)  # devices x nodes: DDP
    try:
        run = estimate_run(sc, strategy)
    except InfeasibleError as e:
        raise ConfigError("model", job.model.arch, f"the planner cannot place this job: {e}") from None
    step = run.step
    tokens = (job.train.batch_size * job.train.grad_accum * job.world_size  # the global batch
              * (job.data.max_source_tokens + job.data.max_target_tokens))
    base = Prediction(flop_per_step=step.model_flop_per_step, tokens_per_step=float(tokens),
                      memory_bytes=step.memory.allocator_bytes, chip="")
    if not job.site.chip:
        return base
    energy_j = run.footprint.device_energy_j + run.footprint.host_energy_j
    p = price(energy_j=energy_j, wall_s=run.run_time_s, site=site_of(job.site), usd_per_hour=job.site.usd_per_hour,
              chip=sc.cluster.chip)  # embodied carbon counted as plan counts it
    return Prediction(flop_per_step=base.flop_per_step, tokens_per_step=base.tokens_per_step,
                      memory_bytes=base.memory_bytes, chip=job.site.chip, train_s=run.run_time_s, energy_j=energy_j,
                      kg_co2e=p.emissions_kg_co2e, cost_usd=p.cost_usd)


def calibrated_train_s(step_times_s: Sequence[float], num_steps: int, calibration_steps: int = 10) -> float | None:
    """Train time predicted after the first ``calibration_steps`` steps (carbontracker's idea): the time they took
    plus the mean of their steady steps (all but the first, which warms up) x the steps left."""
    k = min(calibration_steps, len(step_times_s))
    if k < 2:
        return None
    head = list(step_times_s[:k])
    return sum(head) + statistics.fmean(head[1:]) * max(num_steps - k, 0)
