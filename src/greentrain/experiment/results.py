"""VariantResult: what one variant measured, predicted and cost (one flat record, SI units in every name).

Written by the worker as ``DIR/variants/<id>/result.json`` (atomically: a kill leaves the old file or none) and
read back by the runner (resume), ``status`` and ``report``. ``None`` means "not measured" (a failed or not
applicable variant, or a figure this platform cannot give), never zero.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greentrain import files
from greentrain.errors import ConfigError
from greentrain.results.codec import canonical_kind
from greentrain.results.experiment import ExperimentVariantResult

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "not_applicable", "skipped_budget", "pending")
PHASES = ("train", "eval", "predict", "other")


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantResult:
    # identity
    variant_id: str
    config_hash: str
    axis_values: tuple[tuple[str, Any], ...] = ()
    status: str = "pending"
    reason: str = ""
    attempts: int = 1
    seed: int = 0
    task: str = "summarization"  # or causal-lm (quality: perplexity, lower is better)
    # platform
    device: str = ""  # cuda device name or "cpu"
    precision_requested: str = ""
    precision_effective: str = ""
    torch_version: str = ""
    transformers_version: str = ""
    cpu_count: int = 0
    load_avg_1m: float = 0.0  # at the start of the variant (noise: > cpu_count means contention)
    started_unix: float = 0.0  # when the worker started (seconds since the epoch)
    # work
    num_steps: int = 0
    world_size: int = 1  # processes (devices) the variant trained on, data parallel (runtime.devices)
    global_batch_size: int = 0  # examples per optimizer step: world_size x per-device batch x accumulation
    samples: float = 0.0
    tokens_source: float = 0.0  # encoder tokens trained on (padding included: fixed shapes)
    tokens_target: float = 0.0
    flop: float = 0.0  # counted by the Tracker over the training phase
    flop_per_step: float = 0.0
    hf_total_flos: float = 0.0  # the Trainer's own estimate (6 x params x tokens), for comparison
    params: int = 0
    trainable_params: int = 0
    # speed
    wall_s: float = 0.0  # billed time: the worker from start to result
    train_s: float = 0.0
    eval_s: float = 0.0
    predict_s: float = 0.0
    other_s: float = 0.0  # setup (data, tokenizer, model) and what lies between the phases
    step_time_s: float = 0.0  # mean of the steady steps
    tokens_per_s: float = 0.0  # source + target tokens over the training steps' time
    samples_per_s: float = 0.0
    # memory
    peak_memory_bytes: float = 0.0
    memory_source: str = ""  # cuda-peak | peak-rss
    # energy (IT energy, before PUE), per phase; their sum is energy_j
    train_energy_j: float = 0.0
    eval_energy_j: float = 0.0
    predict_energy_j: float = 0.0
    other_energy_j: float = 0.0
    energy_j: float = 0.0
    gpu_energy_j: float = 0.0
    cpu_energy_j: float = 0.0
    ram_energy_j: float = 0.0
    energy_measured: bool = False  # False: estimated (CPU from TDP x utilisation; RAM from RSS)
    # utilisation and power of the train phase: NVML's GPU utilisation where a GPU is read, else the CPU's
    cpu_utilization_percent: float | None = None  # CPU seconds of the process tree / (train s x logical CPUs)
    gpu_utilization_percent: float | None = None  # mean of NVML's samples over the train phase; None: no NVML
    utilization_source: str = ""  # "nvml" (GPU) | "cpu-time" (CPU): what utilization_percent is
    mean_power_w: float | None = None  # IT energy / wall time (before PUE)
    train_power_w: float | None = None  # the train phase's IT energy / its time
    # token lengths of the variant's examples (train + eval + test, special tokens included) against the max
    # lengths they are cut to; causal-lm: "source" is the joined sequence, "target" is not cut on its own
    max_source_tokens: int = 0  # the cuts (data.max_source_tokens, data.max_target_tokens)
    max_target_tokens: int = 0
    source_tokens_p50: float | None = None
    source_tokens_p95: float | None = None
    source_tokens_longest: int | None = None
    source_truncated_fraction: float | None = None  # share of examples longer than max_source_tokens
    target_tokens_p50: float | None = None
    target_tokens_p95: float | None = None
    target_tokens_longest: int | None = None
    target_truncated_fraction: float | None = None
    generated_tokens_mean: float | None = None  # mean length of the generated summaries (decoding options)
    # carbon and cost at the experiment's site
    region: str = ""
    grid_g_co2e_per_kwh: float | None = None
    pue: float = 1.0
    facility_energy_j: float = 0.0  # energy_j x PUE
    emissions_kg_co2e: float | None = None
    embodied_kg_co2e: float = 0.0
    cost_usd: float | None = None
    cost_basis: str = ""  # cloud (price x wall time) | electricity | unknown
    electricity_usd_per_kwh: float | None = None  # the region's price (catalog region data); None: unknown
    electricity_cost_usd: float | None = None  # facility energy x electricity_usd_per_kwh (whatever the basis)
    # storage: what the variant keeps (its folder: records, predictions, the model with model.save)
    model_bytes: float = 0.0  # the saved model (safetensors, config, tokenizer); 0 without model.save
    output_bytes: float = 0.0
    storage_cost_usd: float | None = None  # output_bytes x site.storage_usd_per_gb_month x site.storage_months
    # quality
    rouge1: float | None = None
    rouge1_low: float | None = None
    rouge1_high: float | None = None
    rouge2: float | None = None
    rougeL: float | None = None
    rougeLsum: float | None = None
    eval_loss: float | None = None
    test_loss: float | None = None  # causal-lm: mean loss per token on the test split
    perplexity: float | None = None  # causal-lm: exp(test_loss)
    early_stopped_at_step: int | None = None
    # prediction (blind: the planner; calibrated: the first steps' rate x the remaining steps)
    predicted_flop_per_step: float | None = None
    predicted_tokens_per_step: float | None = None
    predicted_memory_bytes: float | None = None
    predicted_train_s: float | None = None
    predicted_energy_j: float | None = None
    predicted_kg_co2e: float | None = None
    predicted_cost_usd: float | None = None
    calibrated_train_s: float | None = None
    # failed attempts before this one (their energy is waste, counted here and in attempts.csv)
    wasted_energy_j: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["axis_values"] = [[k, v] for k, v in self.axis_values]
        return {**ExperimentVariantResult.head(), **d}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VariantResult:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["axis_values"] = tuple((str(k), v) for k, v in kw.get("axis_values", []))
        return cls(**kw)

    def error(self, what: str) -> float | None:
        """(predicted - measured) / measured for flop_per_step, train_s, energy_j, kg_co2e or cost_usd."""
        pairs = {"flop_per_step": (self.predicted_flop_per_step, self.flop_per_step),
                 "train_s": (self.predicted_train_s, self.train_s),
                 "calibrated_train_s": (self.calibrated_train_s, self.train_s),
                 "energy_j": (self.predicted_energy_j, self.energy_j),
                 "kg_co2e": (self.predicted_kg_co2e, self.emissions_kg_co2e),
                 "cost_usd": (self.predicted_cost_usd, self.cost_usd)}
        pred, meas = pairs[what]
        if pred is None or meas is None or meas == 0:
            return None
        return (pred - meas) / meas


@dataclass(frozen=True, slots=True, kw_only=True)
class Quality:
    """The quality measure of a task: ROUGE-1 (higher is better; noise 1 point) for summarization, perplexity
    (lower is better; noise 2 % of the base) for a causal LM."""

    field: str  # the VariantResult field
    label: str
    higher_is_better: bool
    noise: float  # a change below it is noise: ROUGE points (absolute), or a fraction (relative: perplexity)
    relative: bool

    def value(self, r: VariantResult) -> float | None:
        v = getattr(r, self.field)
        return None if v is None else float(v)

    def score(self, r: VariantResult) -> float | None:
        """The value oriented so that higher is better (for ranking and the Pareto set)."""
        v = self.value(r)
        return None if v is None else v if self.higher_is_better else -v

    def changed(self, new: float, old: float) -> bool:
        """Whether ``new`` differs from ``old`` by at least the noise."""
        return abs(new - old) >= (self.noise * abs(old) if self.relative else self.noise)

    def within(self, value: float, best: float) -> bool:
        """Whether ``value`` is no worse than ``best`` by more than the noise (F1's tolerance)."""
        gap = best - value if self.higher_is_better else value - best
        return gap <= (self.noise * abs(best) if self.relative else self.noise)

    def fmt(self, v: float) -> str:
        return f"{v:.2f}" if not self.relative else f"{v:.4g}"

    @property
    def direction(self) -> str:
        return "up" if self.higher_is_better else "down"


QUALITY_BY_TASK = {"summarization": Quality(field="rouge1", label="ROUGE-1", higher_is_better=True, noise=1.0,
                                            relative=False),
                   "causal-lm": Quality(field="perplexity", label="perplexity", higher_is_better=False, noise=0.02,
                                        relative=True)}


def quality_of(results: Sequence[VariantResult], task: str = "summarization") -> Quality:
    """The quality measure of an experiment's results (one task per experiment; before any ran, ``task``: the
    experiment's, from its manifest)."""
    tasks = {r.task for r in results if r.status == "ok"}
    return QUALITY_BY_TASK[tasks.pop() if len(tasks) == 1 else (task if task in QUALITY_BY_TASK else "summarization")]


def write_text_atomic(path: Path, text: str, field: str = "out") -> None:
    """Write ``text`` to ``path`` whole or not at all (greentrain.files.write_text_atomic: a temporary file
    beside it, flushed, the umask's mode, renamed into place); an OSError is a ConfigError naming ``field``."""
    files.write_text_atomic(path, text, field)


def write_result(path: Path, result: VariantResult) -> None:
    """Write ``result.json`` atomically."""
    write_text_atomic(path, json.dumps(result.to_dict(), indent=1), "result")


def read_result(path: Path) -> VariantResult | None:
    """The result in ``path``; None when there is none (never written). The worker writes it atomically, so a file
    that is not JSON was damaged outside greentrain: refused (a report would drop the variant's measured row and
    rewrite every summary without it), not taken as "not run"."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError("result", str(path), f"cannot be read ({e}): restore it, or remove it to run the variant "
                          "again") from None
    if not isinstance(data, dict) or canonical_kind(data.get("kind")) != ExperimentVariantResult.KIND:
        raise ConfigError("result", str(path), "is not a greentrain experiment result")
    return VariantResult.from_dict(data)
