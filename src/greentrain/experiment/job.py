"""One fine-tuning job (the base of an experiment, or one variant of it): sections checked into frozen dataclasses.

``parse_job`` fills every default, so ``Job.resolved`` (a plain JSON mapping) is the whole job: the worker gets
it, the config hash is taken over it, and two files that mean the same job hash the same. No torch here:
training arguments are checked against a static list now and against the installed
``Seq2SeqTrainingArguments`` (``TrainingArguments`` for a causal LM) by the worker before anything trains.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from greentrain.config import BOUNDS, as_float, as_int, check_keys, require
from greentrain.errors import ConfigError, did_you_mean
from greentrain.experiment.data import SYNTHETIC_SOURCES
from greentrain.experiment.hf_names import OPTIM_NAMES
from greentrain.model import families
from greentrain.model.family import FINETUNE_TASKS

JOB_SECTIONS = ("task", "data", "tokenizer", "model", "train", "early_stopping", "eval", "site", "budget",
                "tracking", "runtime")
# summarization: an encoder-decoder (Seq2SeqTrainer, ROUGE); causal-lm: a decoder-only model (Trainer, loss and
# perplexity) trained on each source and its target joined, max_source_tokens + max_target_tokens long. The
# architectures of each task are the model families whose record (model/families.py) says it fine-tunes for it.
TASKS = FINETUNE_TASKS
PRECISIONS = ("fp32", "bf16", "fp16")
FREEZABLE_BY_TASK = {"summarization": ("embeddings", "encoder", "decoder"), "causal-lm": ("embeddings",)}
FREEZABLE = FREEZABLE_BY_TASK["summarization"]
ROUGE_METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
METRICS_BY_TASK = {"summarization": ROUGE_METRICS, "causal-lm": ("perplexity",)}
# keys without a default: absent from the resolved job unless given, so files written before them keep their hash
OPTIONAL_KEYS = {"model": ("lora", "save"), "eval": ("length_penalty", "min_new_tokens"),
                 "site": ("storage_usd_per_gb_month", "storage_months"), "runtime": ("devices", "nodes")}
# TrainingArguments fields a job may set (checked again against the installed transformers at run time).
TRAIN_ARGS = ("per_device_train_batch_size", "max_steps", "num_train_epochs", "learning_rate", "lr_scheduler_type",
              "warmup_steps", "optim", "optim_args", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
              "gradient_accumulation_steps", "max_grad_norm", "label_smoothing_factor", "tf32",
              "gradient_checkpointing", "torch_compile", "per_device_eval_batch_size", "dataloader_num_workers",
              "deepspeed", "full_determinism", "data_seed", "dataloader_drop_last", "auto_find_batch_size")
# Fields the experiment sets itself: a job may not (precision has its own key, outputs and reporting are ours).
MANAGED_TRAIN_ARGS = ("output_dir", "report_to", "bf16", "fp16", "use_cpu", "seed", "save_strategy",
                      "logging_strategy", "eval_strategy", "eval_steps", "load_best_model_at_end",
                      "metric_for_best_model", "predict_with_generate", "disable_tqdm", "push_to_hub")

DEFAULTS: dict[str, Any] = {
    "task": "summarization",
    "data": {"source": "synthetic-news", "path": "", "source_column": "source", "target_column": "target",
             "train_size": 1024, "eval_size": 128, "test_size": 128, "max_source_tokens": 64,
             "max_target_tokens": 16, "padding": "max_length"},
    "tokenizer": {"kind": "wordlevel", "path": ""},
    "model": {"arch": "t5", "config": {}, "config_path": "", "init": "random", "path": "", "freeze": []},
    "train": {"max_steps": 80, "per_device_train_batch_size": 16, "learning_rate": 3.0e-3,
              "optim": "adamw_torch", "precision": "fp32"},
    "early_stopping": None,
    "eval": {"metrics": list(ROUGE_METRICS), "max_new_tokens": 16, "num_beams": 1, "batch_size": 64},
    "site": {"region": "", "grid_g_co2e_per_kwh": None, "pue": None, "chip": "", "usd_per_hour": None,
             "reprice": []},
    "budget": {"max_kwh": None, "max_usd": None, "max_kg_co2e": None},
    "tracking": {"hooks": True, "mlflow": None},
    # torch's intra-op threads (null: torch's default, one per core). On a shared machine 1 avoids OpenMP
    # threads spinning against other processes (6x slower steps measured at load 7 on 2 cores).
    # devices (optional, 1: absent from the resolved job): processes of the variant under torchrun, one per device
    # (GPU, or a CPU process with gloo), data parallel (DDP); nodes (optional, 1): machines of devices each, under
    # --executor ray or slurm (torchrun's c10d rendezvous, experiment/launch.py)
    "runtime": {"num_threads": None},
}
MAX_DEVICES = 64  # one node: torchrun starts one process per device; the largest nodes hold 8-16 GPUs
MAX_NODES = 1024  # torchrun agents of one variant (one per node)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSpec:
    source: str
    path: str
    source_column: str
    target_column: str
    train_size: int
    eval_size: int
    test_size: int
    max_source_tokens: int
    max_target_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    arch: str
    config: dict[str, Any]  # overrides of the transformers config class's defaults
    config_path: str  # a config.json (e.g. tests/data/hf/bart-large.json) under the overrides
    init: str  # random | pretrained (a local checkpoint folder in ``path``; never downloaded)
    path: str
    freeze: tuple[str, ...]
    lora_rank: int = 0  # > 0: LoRA (every base weight frozen, rank-r adapters beside lora_targets)
    lora_targets: tuple[str, ...] = ()
    save: bool = False  # write the fine-tuned model to the variant's folder (model/, safetensors): stored bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainSpec:
    max_steps: int
    batch_size: int  # per device, per micro-batch
    grad_accum: int
    learning_rate: float
    optim: str  # a transformers OptimizerNames value (adamw_torch, adafactor, ...)
    precision: str  # fp32 | bf16 | fp16 (mixed precision through accelerate's autocast)
    args: dict[str, Any]  # every training argument passed on to (Seq2Seq)TrainingArguments

    @property
    def planner_optimizer(self) -> str:
        """The optimizer family the planner knows (workload.OPTIMIZERS)."""
        o = self.optim.lower()
        return "adafactor" if "adafactor" in o else "sgd" if "sgd" in o else "adamw"


@dataclass(frozen=True, slots=True, kw_only=True)
class EarlyStopSpec:
    metric: str  # eval_loss
    patience: int  # evaluations without improvement
    eval_steps: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalSpec:
    metrics: tuple[str, ...]
    max_new_tokens: int
    num_beams: int
    batch_size: int
    # decoding (generate()): the exponent of the length in beam scores (> 1 favours longer summaries; beam search
    # only) and the fewest new tokens before the end token may end a summary (transformers GenerationConfig)
    length_penalty: float = 1.0
    min_new_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteSpec:
    region: str
    grid_g_co2e_per_kwh: float | None
    pue: float | None
    chip: str  # catalog chip the planner predicts on ("": FLOPs, tokens and memory only)
    usd_per_hour: float | None  # price of the machine per hour (billed on wall time)
    reprice: tuple[str, ...]
    storage_usd_per_gb_month: float | None = None  # price of keeping the variant's outputs (1 GB = 1e9 bytes)
    storage_months: float = 1.0  # how long the outputs are kept


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSpec:
    max_kwh: float | None
    max_usd: float | None
    max_kg_co2e: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    task: str
    data: DataSpec
    tokenizer_kind: str
    tokenizer_path: str
    model: ModelSpec
    train: TrainSpec
    early_stopping: EarlyStopSpec | None
    eval: EvalSpec
    site: SiteSpec
    budget: BudgetSpec
    hooks: bool
    mlflow: str | bool | None  # true: sqlite:///DIR/mlflow.db (experiment.tracking); a URI; None: no MLflow
    num_threads: int | None  # torch threads of each process (each rank with runtime.devices > 1)
    resolved: dict[str, Any]  # the whole job as a JSON mapping with every default filled
    devices: int = 1  # processes (ranks) of the variant on one node: data parallel, global batch = devices x batch
    nodes: int = 1  # machines of ``devices`` ranks each (world = nodes x devices), ray or slurm executors only

    @property
    def world_size(self) -> int:
        """The variant's ranks: ``devices`` on each of ``nodes`` nodes (data parallel)."""
        return self.devices * self.nodes


def _merge(defaults: dict[str, Any], given: dict[str, Any], where: str,
           optional: tuple[str, ...] = ()) -> dict[str, Any]:
    out = copy.deepcopy(defaults)
    check_keys(given, (*defaults, *optional), where)
    out.update(copy.deepcopy(given))
    return out


def _opt_float(d: dict[str, Any], key: str, where: str, **kw: Any) -> float | None:
    return None if d.get(key) is None else as_float(d[key], f"{where}.{key}", **kw)


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    given = raw.get(name) or {}
    require(isinstance(given, dict), name, given, "must be a mapping")
    return _merge(DEFAULTS[name], given, name, OPTIONAL_KEYS.get(name, ()))


def _data(d: dict[str, Any]) -> DataSpec:
    src = str(d["source"])
    require(src in (*SYNTHETIC_SOURCES, "file"), "data.source", src,
            f"must be one of {', '.join((*SYNTHETIC_SOURCES, 'file'))}")
    require(src != "file" or bool(d["path"]), "data.path", d["path"], "is required with data.source: file")
    require(d["padding"] == "max_length", "data.padding", d["padding"],
            "must be max_length (fixed shapes: dynamic padding pays a FLOP count per new shape)")
    # ranges and reasons: config.BOUNDS (train_size 1e12 grew to 8 GB generating examples, then SystemError)
    return DataSpec(source=src, path=str(d["path"]), source_column=str(d["source_column"]),
                    target_column=str(d["target_column"]),
                    **{k: BOUNDS["examples"].check_int(d[k], f"data.{k}") for k in ("train_size", "eval_size",
                                                                                    "test_size")},
                    **{k: BOUNDS["example_tokens"].check_int(d[k], f"data.{k}") for k in ("max_source_tokens",
                                                                                          "max_target_tokens")})


def _model(d: dict[str, Any], task: str) -> ModelSpec:
    archs = tuple(f.model_type for f in families.finetunable(task))
    require(d["arch"] in archs, "model.arch", d["arch"], f"must be one of {', '.join(archs)} for task {task}")
    require(isinstance(d["config"], dict), "model.config", d["config"], "must be a mapping of config fields")
    # a typo was silently ignored: the keys the family's config class accepts (its record, model/families.py)
    check_keys(d["config"], families.finetuning(d["arch"]).accepted_config_keys, "model.config")
    require(d["init"] in ("random", "pretrained"), "model.init", d["init"], "must be random or pretrained")
    require(d["init"] != "pretrained" or bool(d["path"]), "model.path", d["path"],
            "init: pretrained needs a local checkpoint folder (nothing is downloaded)")
    freeze = d["freeze"] or []
    parts = FREEZABLE_BY_TASK[task]
    require(isinstance(freeze, list), "model.freeze", freeze, f"must be a list of {', '.join(parts)}")
    for f in freeze:
        require(f in parts, "model.freeze", f, f"must be one of {', '.join(parts)} for task {task}")
    rank, targets = _lora(d.get("lora"), d["arch"], freeze)
    save = d.get("save", False)
    require(isinstance(save, bool), "model.save", save, "must be true or false")
    return ModelSpec(arch=str(d["arch"]), config=dict(d["config"]), config_path=str(d["config_path"]),
                     init=str(d["init"]), path=str(d["path"]), freeze=tuple(freeze), lora_rank=rank,
                     lora_targets=targets, save=save)


def _lora(d: Any, arch: str, freeze: list[str]) -> tuple[int, tuple[str, ...]]:
    """model.lora: {rank, targets} (peft's q and v by default) -> (rank, targets); (0, ()) without LoRA."""
    if d is None:
        return 0, ()
    require(isinstance(d, dict), "model.lora", d, "must be a mapping {rank, targets} or null")
    check_keys(d, ("rank", "targets"), "model.lora")
    require(not freeze, "model.lora", d, "freezes every base weight itself: give model.freeze or model.lora")
    ft = families.finetuning(arch)
    built = ", ".join(f.model_type for f in families.finetunable() if f.finetuning and f.finetuning.lora_modules)
    require(bool(ft.lora_modules), "model.lora", arch, f"adapters are built for {built}"
            + (f" ({ft.no_lora_reason})" if ft.no_lora_reason else ""))
    targets = d.get("targets", ["q", "v"])
    require(isinstance(targets, list) and bool(targets), "model.lora.targets", targets, "must be a non-empty list")
    for t in targets:
        require(t in ft.lora_targets, "model.lora.targets", t,
                f"must be one of {', '.join(ft.lora_targets)} for {arch}")
    return as_int(d.get("rank", 16), "model.lora.rank", minimum=1), tuple(str(t) for t in targets)


def _train(given: dict[str, Any]) -> TrainSpec:
    d = copy.deepcopy(DEFAULTS["train"])
    d.update(given)
    for key in d:
        if key in MANAGED_TRAIN_ARGS:
            raise ConfigError(f"train.{key}", d[key], "is set by the experiment (use train.precision for "
                              "fp16/bf16; outputs and reporting are the runner's)")
        if key != "precision" and key not in TRAIN_ARGS:
            raise ConfigError(f"train.{key}", d[key], "unknown training argument"
                              + did_you_mean(key, (*TRAIN_ARGS, "precision")))
    require(d["precision"] in PRECISIONS, "train.precision", d["precision"], f"must be one of {', '.join(PRECISIONS)}")
    require(d["optim"] in OPTIM_NAMES, "train.optim", d["optim"], "unknown optimizer (transformers OptimizerNames)"
            + did_you_mean(str(d["optim"]), OPTIM_NAMES))  # failed only at run time
    args = {k: v for k, v in d.items() if k != "precision"}
    return TrainSpec(max_steps=BOUNDS["rounds"].check_int(d["max_steps"], "train.max_steps"),
                     batch_size=BOUNDS["examples"].check_int(d["per_device_train_batch_size"],
                                                             "train.per_device_train_batch_size"),
                     grad_accum=as_int(d.get("gradient_accumulation_steps", 1), "train.gradient_accumulation_steps",
                                       minimum=1),
                     learning_rate=BOUNDS["learning_rate"].check(d["learning_rate"], "train.learning_rate"),
                     optim=str(d["optim"]), precision=str(d["precision"]), args=args)


def _early_stopping(d: Any) -> EarlyStopSpec | None:
    if d is None:
        return None
    require(isinstance(d, dict), "early_stopping", d, "must be a mapping {metric, patience, eval_steps} or null")
    check_keys(d, ("metric", "patience", "eval_steps"), "early_stopping")
    metric = str(d.get("metric", "eval_loss"))
    require(metric == "eval_loss", "early_stopping.metric", metric, "must be eval_loss")
    return EarlyStopSpec(metric=metric, patience=as_int(d.get("patience", 2), "early_stopping.patience", minimum=1),
                         eval_steps=as_int(d.get("eval_steps", 20), "early_stopping.eval_steps", minimum=1))


def _eval(d: dict[str, Any], task: str) -> EvalSpec:
    metrics = d["metrics"]
    known = METRICS_BY_TASK[task]
    require(isinstance(metrics, list) and bool(metrics), "eval.metrics", metrics, "must be a non-empty list")
    for m in metrics:
        require(m in known, "eval.metrics", m, f"unknown metric for task {task}" + did_you_mean(str(m), known))
    max_new = BOUNDS["example_tokens"].check_int(d["max_new_tokens"], "eval.max_new_tokens")
    beams = BOUNDS["num_beams"].check_int(d["num_beams"], "eval.num_beams")
    for key in ("length_penalty", "min_new_tokens"):
        require(key not in d or task == "summarization", f"eval.{key}", d.get(key),
                f"is a decoding option: task {task} generates nothing")
    penalty = BOUNDS["length_penalty"].check(d.get("length_penalty", 1.0), "eval.length_penalty")
    require(penalty == 1.0 or beams > 1, "eval.length_penalty", penalty,
            f"scores beams only: set eval.num_beams > 1 (it is {beams}), or leave it at 1.0")
    min_new = as_int(d.get("min_new_tokens", 0), "eval.min_new_tokens", minimum=0)
    require(min_new <= max_new, "eval.min_new_tokens", min_new, f"must be <= eval.max_new_tokens ({max_new})")
    return EvalSpec(metrics=tuple(metrics), max_new_tokens=max_new, num_beams=beams,
                    batch_size=BOUNDS["examples"].check_int(d["batch_size"], "eval.batch_size"), length_penalty=penalty,
                    min_new_tokens=min_new)


def _site(d: dict[str, Any]) -> SiteSpec:
    reprice = d["reprice"] or []
    require(isinstance(reprice, list), "site.reprice", reprice, "must be a list of region codes")
    require(not (d["region"] and d["grid_g_co2e_per_kwh"] is not None), "site.grid_g_co2e_per_kwh",
            d["grid_g_co2e_per_kwh"], "give site.region or site.grid_g_co2e_per_kwh, not both")
    if d["chip"]:
        from greentrain.hardware.catalog import get_chip

        try:
            get_chip(str(d["chip"]))
        except ConfigError as e:
            raise ConfigError("site.chip", d["chip"], e.rule) from None
    spec = SiteSpec(region=str(d["region"]), pue=_opt_float(d, "pue", "site", minimum=1.0),
                    grid_g_co2e_per_kwh=_opt_float(d, "grid_g_co2e_per_kwh", "site", minimum=0.0),
                    chip=str(d["chip"]), usd_per_hour=None if d["usd_per_hour"] is None else
                    BOUNDS["usd_per_hour"].check(d["usd_per_hour"], "site.usd_per_hour"),
                    reprice=tuple(str(r) for r in reprice),
                    storage_usd_per_gb_month=None if d.get("storage_usd_per_gb_month") is None else
                    BOUNDS["storage_usd_per_gb_month"].check(d["storage_usd_per_gb_month"],
                                                             "site.storage_usd_per_gb_month"),
                    storage_months=BOUNDS["storage_months"].check(d.get("storage_months", 1.0), "site.storage_months"))
    return spec  # its re-priced regions are checked where the experiment is read (spec.py: cost.py reads SiteSpec)


def parse_job(raw: dict[str, Any]) -> Job:
    """Check a job mapping (the job sections of an experiment file) and fill its defaults."""
    check_keys(raw, JOB_SECTIONS, "")
    task = str(raw.get("task", DEFAULTS["task"]))
    require(task in TASKS, "task", task, f"must be one of {', '.join(TASKS)}")
    sections = {n: _section(raw, n) for n in ("data", "tokenizer", "model", "eval", "site", "budget", "tracking",
                                              "runtime")}
    if task != "summarization" and "metrics" not in (raw.get("eval") or {}):
        sections["eval"]["metrics"] = list(METRICS_BY_TASK[task])
    train_given = raw.get("train") or {}
    require(isinstance(train_given, dict), "train", train_given, "must be a mapping")
    train = _train(train_given)
    tok = sections["tokenizer"]
    require(tok["kind"] in ("wordlevel", "path"), "tokenizer.kind", tok["kind"], "must be wordlevel or path")
    require(tok["kind"] != "path" or bool(tok["path"]), "tokenizer.path", tok["path"],
            "tokenizer.kind: path needs a local tokenizer folder or tokenizer.json")
    budget = sections["budget"]
    tracking = sections["tracking"]
    require(tracking["mlflow"] in (None, True, False) or (isinstance(tracking["mlflow"], str) and
                                                         bool(tracking["mlflow"])), "tracking.mlflow",
            tracking["mlflow"], "must be true (a SQLite store in the output folder), a tracking URI, or null")
    devices, nodes, threads = _devices(sections["runtime"])  # before the resolved job is taken: 1 is left out
    resolved = {"task": task, **sections, "train": {**train.args, "precision": train.precision},
                "early_stopping": copy.deepcopy(raw.get("early_stopping"))}
    return Job(task=task, data=_data(sections["data"]), tokenizer_kind=str(tok["kind"]),
               tokenizer_path=str(tok["path"]), model=_model(sections["model"], task), train=train,
               early_stopping=_early_stopping(raw.get("early_stopping")), eval=_eval(sections["eval"], task),
               site=_site(sections["site"]),
               budget=BudgetSpec(**{k: _opt_float(budget, k, "budget", minimum=0.0) for k in budget}),
               hooks=bool(tracking["hooks"]), mlflow=tracking["mlflow"] or None, resolved=resolved,
               num_threads=threads, devices=devices, nodes=nodes)


def _devices(runtime: dict[str, Any]) -> tuple[int, int, int | None]:
    """runtime.devices (1 to MAX_DEVICES) and runtime.nodes (1 to MAX_NODES); each left out of the resolved job
    (and so of the config hash) when 1, so a one-device file hashes as it did before the fields existed."""
    devices = as_int(runtime.pop("devices", 1), "runtime.devices", minimum=1)
    require(devices <= MAX_DEVICES, "runtime.devices", devices, f"must be <= {MAX_DEVICES} (the processes of one "
            "node: one per device under torchrun)")
    nodes = as_int(runtime.pop("nodes", 1), "runtime.nodes", minimum=1)
    require(nodes <= MAX_NODES, "runtime.nodes", nodes, f"must be <= {MAX_NODES} (one torchrun agent per node)")
    if devices > 1:
        runtime["devices"] = devices  # in the resolved job: another result, another hash
    if nodes > 1:
        runtime["nodes"] = nodes
    bound, n = BOUNDS["num_threads"], runtime["num_threads"]  # each device's process's (1,000 x 64 was accepted)
    threads = None if n is None else bound.check_int(n, "runtime.num_threads")
    require(threads is None or bound.ok(threads * devices), "runtime.num_threads", n, f"x runtime.devices {devices}"
            f" = {(threads or 0) * devices:,} threads on one node; {bound.rule()}")
    return devices, nodes, threads


def set_path(data: dict[str, Any], dotted: str, value: Any, where: str) -> None:
    """Set ``a.b.c`` in a nested mapping; the section (``a``) and every key must exist in the job schema."""
    parts = dotted.split(".")
    require(all(parts), where, dotted, "must be a dotted field name such as train.precision")
    require(parts[0] in JOB_SECTIONS, where, dotted,
            "names no job field" + did_you_mean(parts[0], JOB_SECTIONS))
    node = data
    for p in parts[:-1]:
        child = node.get(p)
        if child is None:
            child = node[p] = {}
        require(isinstance(child, dict), where, dotted, f"{p} is not a section")
        node = child
    node[parts[-1]] = copy.deepcopy(value)
