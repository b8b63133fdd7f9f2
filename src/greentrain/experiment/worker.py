"""Run one variant for real: ``python -m greentrain.experiment.worker VARIANT.json`` (or ``run_variant`` inline).

Four phases, each measured by its own greentrain Tracker (its own record in the variant's folder):
  other    setup: data, tokenizer, model                                          other.jsonl
  train    (Seq2Seq)Trainer.train with GreentrainTrainerCallback (hooks count FLOPs) train.jsonl
  eval     Trainer.evaluate: loss on the evaluation split                          eval.jsonl
  predict  generation of the test split and ROUGE (summarization), or the loss    predict.jsonl
           on the test split and its perplexity (causal-lm)
Evaluation inside training (early stopping) gets its own tracker too; its time, energy and FLOPs are taken
out of the training figures (the hooks' step is closed right after it) and added to ``eval``. The phases'
energies sum to the total by construction; ``other_s`` is the wall time outside train, eval and predict.
With ``runtime.devices: N`` the worker becomes torchrun and each of its N ranks runs the phases (ranks.py).
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from greentrain.errors import ConfigError
from greentrain.experiment import ranks
from greentrain.experiment.cost import price, site_of
from greentrain.experiment.data import load_splits
from greentrain.experiment.job import Job, parse_job
from greentrain.experiment.lengths import example_lengths
from greentrain.experiment.predict import calibrated_train_s, predict
from greentrain.experiment.quality import rouge
from greentrain.experiment.results import VariantResult, write_result
from greentrain.experiment.usage import usage_fields
from greentrain.files import write_text_atomic
from greentrain.measure.records import read_jsonl
from greentrain.measure.summary import Measurement

RESULT_FILE = "result.json"
PARENT_ENV = ranks.PARENT_ENV  # the runner's pid, set by the runner for its workers


@dataclass(slots=True)
class _InTrainEval:
    """Evaluations run inside train(): their windows and trackers, taken out of the training figures."""

    measurements: list[Measurement] = field(default_factory=list)
    windows_s: list[tuple[float, float]] = field(default_factory=list)  # perf_counter (start, end)
    losses: list[float] = field(default_factory=list)


def not_applicable_reason(job: Job, cuda: bool) -> str:
    """Why this variant cannot run here as asked ("" when it can); never run silently as something else."""
    if job.train.precision == "fp16" and not cuda:
        return "fp16 mixed precision needs a CUDA GPU (on CPU accelerate would silently train in fp32)"
    if job.train.precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        return f"bf16 is not supported by {torch.cuda.get_device_name()}"
    if job.train.args.get("deepspeed") and not cuda:
        return "DeepSpeed needs CUDA"
    if cuda and job.devices > torch.cuda.device_count():
        return f"runtime.devices {job.devices} needs {job.devices} GPUs; {torch.cuda.device_count()} visible"
    return ""


def _trainer_class(task: str) -> Any:
    from transformers import Seq2SeqTrainer, Trainer, TrainerCallback

    class EarlyStop(TrainerCallback):
        """Stop when eval_loss has not improved for ``patience`` evaluations (no checkpoints written)."""

        def __init__(self, patience: int) -> None:
            self.patience, self.best, self.bad = patience, float("inf"), 0

        def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kw: Any) -> None:
            loss = float((metrics or {}).get("eval_loss", float("inf")))
            self.best, self.bad = (loss, 0) if loss < self.best else (self.best, self.bad + 1)
            if self.bad >= self.patience:
                control.should_training_stop = True

    class GreentrainTrainer(Trainer if task == "causal-lm" else Seq2SeqTrainer):  # type: ignore[misc]
        """Evaluation inside training runs in its own tracker and leaves the training hooks' step clean."""

        gt_callback: Any = None
        gt_in_train: _InTrainEval | None = None
        gt_out_dir: Path = Path(".")

        def evaluate(self, *args: Any, **kwargs: Any) -> Any:
            with ranks.eval_loss_per_rank(self.args):  # several ranks: transformers' eval_loss x world (#35078)
                return self._gt_evaluate(*args, **kwargs)

        def _gt_evaluate(self, *args: Any, **kwargs: Any) -> Any:
            cb = self.gt_callback
            if cb is None or not cb.tracker.running or self.gt_in_train is None:
                return super().evaluate(*args, **kwargs)
            rec = self.gt_in_train
            tracker = ranks.phase_tracker(self.gt_out_dir, f"eval_in_train_{len(rec.measurements)}").start()
            t0 = time.perf_counter()
            try:
                metrics = super().evaluate(*args, **kwargs)
            finally:
                if cb.tracker.hooks is not None:
                    cb.tracker.hooks.finish_step()  # drop the evaluation's forwards from the next training step
                rec.windows_s.append((t0, time.perf_counter()))
                m = tracker.stop()
                if m is not None:
                    rec.measurements.append(m)
            rec.losses.append(float(metrics.get("eval_loss", float("nan"))))
            return metrics

    return GreentrainTrainer, EarlyStop


def _train_steps(train_jsonl: Path, t0: float, windows: list[tuple[float, float]]) -> list[float]:
    """Per-step times of the training record with the in-training evaluations' time taken out."""
    steps = [r for r in read_jsonl(train_jsonl) if r.get("type") == "step"]
    times = [float(r["step_time_s"]) for r in steps]
    for a, b in windows:  # an evaluation runs after a step's end: it lengthens the next step's mark
        ends = [t0 + float(r["t_s"]) for r in steps]
        nxt = next((i for i, e in enumerate(ends) if e >= b), None)
        if nxt is not None:
            times[nxt] -= b - a
    return times


def _base_result(variant: dict[str, Any], job: Job, cuda: bool) -> VariantResult:
    import transformers

    return VariantResult(
        variant_id=str(variant["variant_id"]), config_hash=str(variant["config_hash"]),
        axis_values=tuple((str(k), v) for k, v in variant.get("axis_values", [])), seed=int(variant["seed"]),
        attempts=int(variant.get("attempt", 1)), wasted_energy_j=float(variant.get("wasted_energy_j", 0.0)),
        task=job.task, device=torch.cuda.get_device_name() if cuda else "cpu",
        precision_requested=job.train.precision,
        torch_version=torch.__version__, transformers_version=transformers.__version__,
        cpu_count=os.cpu_count() or 1, load_avg_1m=os.getloadavg()[0], started_unix=time.time())


def _with_prediction(r: VariantResult, job: Job) -> VariantResult:
    p = predict(job)
    return replace(r, predicted_flop_per_step=p.flop_per_step, predicted_tokens_per_step=p.tokens_per_step,
                   predicted_memory_bytes=p.memory_bytes, predicted_train_s=p.train_s, predicted_energy_j=p.energy_j,
                   predicted_kg_co2e=p.kg_co2e, predicted_cost_usd=p.cost_usd)


def _freeze_imports() -> None:
    """Once a process greentrain owns (ranks.own_process), with torch and transformers imported: collect, then
    move every live object to the collector's permanent generation (gc.freeze). transformers' Trainer ends each
    training with accelerate's free_memory, a full gc.collect() that walked every imported module's objects:
    0.42 s a variant on a 2-core CPU, 7 ms once they are frozen (4 tiny variants inline: 1.70 s -> 0.007 s,
    2026-11-27). Objects created later (a variant's model and data) are collected as before."""
    if ranks.PROCESS["owned"] and not ranks.PROCESS["frozen"]:
        gc.collect()
        gc.freeze()
        ranks.PROCESS["frozen"] = True


def run_variant(variant: dict[str, Any], out_dir: Path) -> VariantResult:
    """Run one variant (``Variant.to_dict()`` form) in this process; write and return its result."""
    wall0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    job = parse_job(variant["job"])
    from greentrain.experiment.build import check_training_args

    check_training_args(job)
    _freeze_imports()
    cuda = torch.cuda.is_available()
    result = _with_prediction(_base_result(variant, job, cuda), job)
    reason = not_applicable_reason(job, cuda)
    rank0 = ranks.rank_world()[0] == 0  # under torchrun (runtime.devices > 1) rank 0 alone writes the result
    if reason:
        result = replace(result, status="not_applicable", reason=reason, wall_s=time.perf_counter() - wall0)
        if rank0:
            write_result(out_dir / RESULT_FILE, result)
        return result
    threads = torch.get_num_threads()
    try:
        measured = _run_phases(job, int(variant["seed"]), out_dir, cuda, wall0)
    finally:
        torch.set_num_threads(threads)  # inline runs share the process with the caller
    if rank0:
        result = _assemble(result, job, measured, time.perf_counter() - wall0)
        write_result(out_dir / RESULT_FILE, result)
    ranks.finish()
    return result


@dataclass(slots=True)
class _Measured:
    other: Measurement | None = None
    train: Measurement | None = None
    eval: Measurement | None = None
    predict: Measurement | None = None
    in_train: _InTrainEval = field(default_factory=_InTrainEval)
    train_t0: float = 0.0
    step_times_s: list[float] = field(default_factory=list)
    params: int = 0
    trainable: int = 0
    hf_total_flos: float = 0.0
    precision_effective: str = ""
    eval_loss: float | None = None
    test_loss: float | None = None  # causal-lm: the test split's loss (its exp is the perplexity)
    scores: dict[str, Any] = field(default_factory=dict)
    lengths: tuple[Any, Any] = (None, None)  # data.LengthStats of the sources and the targets (usage.py)
    gpu_utilization_percent: float | None = None  # NVML over the train phase; None without a GPU reading
    generated_tokens: list[int] = field(default_factory=list)
    model_bytes: float = 0.0
    output_bytes: float = 0.0
    pruned: str = ""  # why Optuna's pruner stopped the training (experiment/pruning.py); "" when it did not


def _run_phases(job: Job, seed: int, out_dir: Path, cuda: bool, wall0: float) -> _Measured:
    from transformers import PrinterCallback, set_seed

    from greentrain.experiment.build import build_model, build_tokenizer, encode, training_arguments
    from greentrain.experiment.pruning import pruning_callback
    from greentrain.measure.hf import GreentrainTrainerCallback

    m = _Measured()
    threads = ranks.process_threads(job.num_threads, ranks.rank_world()[2])  # a pool's or a rank's share
    if threads is not None:
        torch.set_num_threads(threads)
    other = ranks.phase_tracker(out_dir, "other").start()
    try:
        set_seed(seed)
        d = job.data
        train, ev, test = load_splits(d.source, d.path, d.source_column, d.target_column,
                                      (d.train_size, d.eval_size, d.test_size), 0)
        tok = build_tokenizer(job, train)
        m.lengths = example_lengths(tok.backend_tokenizer, (train, ev, test), job)
        model = build_model(job, len(tok))
        m.params = sum(p.numel() for p in model.parameters())
        m.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        train_ds, eval_ds = encode(tok, train, job), encode(tok, ev, job)
        trainer_cls, early_stop = _trainer_class(job.task)
        cb = GreentrainTrainerCallback(out_dir=out_dir, jsonl_name=ranks.jsonl_name("train"), write_outputs=False,
                                       print_summary=False, count_flops=job.hooks)
        pruning = pruning_callback()  # a trial of a pruned search: reports each evaluation to Optuna
        callbacks = [cb] + ([early_stop(job.early_stopping.patience)] if job.early_stopping else []) + [pruning]
        trainer = trainer_cls(model=model, args=training_arguments(job, out_dir / "hf", seed, cuda),
                              train_dataset=train_ds, eval_dataset=eval_ds, callbacks=[c for c in callbacks if c])
        trainer.gt_callback, trainer.gt_in_train, trainer.gt_out_dir = cb, m.in_train, out_dir
        trainer.remove_callback(PrinterCallback)  # the runner reports; no metric dicts on stdout
    finally:
        m.other = other.stop()
    mp = str(getattr(trainer.accelerator, "mixed_precision", "no"))
    m.precision_effective = {"no": "fp32"}.get(mp, mp)
    m.train_t0 = time.perf_counter()
    try:
        trainer.train()
    finally:
        m.train = cb.tracker.stop()  # on_train_end stopped it already unless train() raised
    # NVML's utilisation, sampled by the train phase's Tracker with its energy (measure/records.Sampler)
    m.gpu_utilization_percent = m.train.gpu_utilization_percent if m.train is not None else None
    m.hf_total_flos = float(trainer.state.total_flos)
    m.step_times_s = _train_steps(out_dir / ranks.jsonl_name("train"), cb.tracker.t0, m.in_train.windows_s)
    if pruning is not None and pruning.pruned_at_step is not None:  # no final evaluation or generation
        return pruning.finish(m)
    ev_tracker = ranks.phase_tracker(out_dir, "eval").start()
    try:
        m.eval_loss = float(trainer.evaluate()["eval_loss"])
    finally:
        m.eval = ev_tracker.stop()
    _predict_phase(m, trainer, tok, test, job, seed, out_dir)
    from greentrain.experiment.build import save_model, tree_bytes

    if ranks.rank_world()[0] == 0:  # DDP: every rank holds the same weights; rank 0 writes (no collective)
        m.model_bytes = save_model(trainer, tok, out_dir / "model") if job.model.save else 0.0
        m.output_bytes = tree_bytes(out_dir)  # what the variant keeps (result.json aside)
    return m


def _predict_phase(m: _Measured, trainer: Any, tok: Any, test: Any, job: Job, seed: int, out_dir: Path) -> None:
    """Summaries of the test split and their ROUGE; a causal LM: its loss on the test split and the perplexity."""
    from greentrain.experiment.build import encode, generate, generated_tokens

    tracker = ranks.phase_tracker(out_dir, "predict").start()
    try:
        if job.task == "causal-lm":
            m.test_loss = float(trainer.evaluate(encode(tok, test, job), metric_key_prefix="test")["test_loss"])
            return
        rank, world, _ = ranks.rank_world()  # several ranks: each decodes its share, rank 0 scores them all
        preds = ranks.gather_in_order(generate(trainer.model, tok, tuple(ranks.share(test.sources, rank, world)),
                                               job))
        if preds is not None:
            m.scores = rouge(preds, test.targets, job.eval.metrics, seed=seed)
    finally:
        m.predict = tracker.stop()
    if preds is None:
        return
    write_text_atomic(out_dir / "predictions.jsonl", "".join(
        json.dumps({"prediction": p, "reference": r}) + "\n" for p, r in zip(preds, test.targets, strict=True)),
        "predictions")
    m.generated_tokens = generated_tokens(tok, preds)


def _assemble(r: VariantResult, job: Job, m: _Measured, wall_s: float) -> VariantResult:
    assert m.train is not None
    in_train_s = sum(b - a for a, b in m.in_train.windows_s)
    in_train_j = sum(x.it_energy_j for x in m.in_train.measurements)
    phases = [x for x in (m.other, m.train, m.eval, m.predict) if x is not None]
    train_s = m.train.duration_s - in_train_s
    eval_s = (m.eval.duration_s if m.eval else 0.0) + in_train_s
    predict_s = m.predict.duration_s if m.predict else 0.0
    energies = {"train": m.train.it_energy_j - in_train_j, "eval": getattr(m.eval, "it_energy_j", 0.0) + in_train_j,
                "predict": getattr(m.predict, "it_energy_j", 0.0), "other": getattr(m.other, "it_energy_j", 0.0)}
    energy_j = sum(energies.values())
    n = m.train.num_steps
    world = m.train.world_size  # the ranks the train phase gathered (runtime.devices): data parallel
    per_step = job.train.batch_size * job.train.grad_accum * world  # the global batch
    tokens_source = float(n * per_step * job.data.max_source_tokens)
    tokens_target = float(n * per_step * job.data.max_target_tokens)
    steps_s = sum(m.step_times_s)
    steady = m.step_times_s[1:] or m.step_times_s
    p = price(energy_j=energy_j, wall_s=wall_s, site=site_of(job.site), usd_per_hour=job.site.usd_per_hour)
    score = {k: v.mean for k, v in m.scores.items()}
    r1 = m.scores.get("rouge1")
    stopped = n if job.early_stopping is not None and n < job.train.max_steps and not m.pruned else None
    status, reason = ("ok", "") if m.train.status == "ok" else ("failed", m.train.status)
    return replace(
        r, status="pruned" if m.pruned and status == "ok" else status, reason=m.pruned or reason,
        precision_effective=m.precision_effective, num_steps=n, world_size=world, global_batch_size=per_step,
        samples=float(n * per_step),
        tokens_source=tokens_source, tokens_target=tokens_target, flop=m.train.flop,
        flop_per_step=m.train.flop_per_step, hf_total_flos=m.hf_total_flos, params=m.params,
        trainable_params=m.trainable, wall_s=wall_s, train_s=train_s, eval_s=eval_s, predict_s=predict_s,
        other_s=wall_s - train_s - eval_s - predict_s, step_time_s=sum(steady) / len(steady) if steady else 0.0,
        tokens_per_s=(tokens_source + tokens_target) / steps_s if steps_s > 0 else 0.0,
        samples_per_s=n * per_step / steps_s if steps_s > 0 else 0.0,
        peak_memory_bytes=m.train.memory_bytes,
        memory_source="cuda-peak" if m.train.peak_cuda_bytes > 0 else "peak-rss",
        train_energy_j=energies["train"], eval_energy_j=energies["eval"], predict_energy_j=energies["predict"],
        other_energy_j=energies["other"], energy_j=energy_j,
        gpu_energy_j=sum(x.gpu_energy_j for x in phases), cpu_energy_j=sum(x.cpu_energy_j for x in phases),
        ram_energy_j=sum(x.ram_energy_j for x in phases), energy_measured=m.train.all_measured,
        region=p.region, grid_g_co2e_per_kwh=p.grid_g_co2e_per_kwh, pue=p.pue,
        facility_energy_j=p.facility_energy_j, emissions_kg_co2e=p.emissions_kg_co2e,
        embodied_kg_co2e=p.embodied_kg_co2e, cost_usd=p.cost_usd, cost_basis=p.cost_basis,
        rouge1=score.get("rouge1"), rouge1_low=r1.low if r1 else None, rouge1_high=r1.high if r1 else None,
        rouge2=score.get("rouge2"), rougeL=score.get("rougeL"), rougeLsum=score.get("rougeLsum"),
        eval_loss=m.eval_loss, test_loss=m.test_loss,
        perplexity=math.exp(m.test_loss) if m.test_loss is not None else None, early_stopped_at_step=stopped,
        calibrated_train_s=calibrated_train_s(m.step_times_s, n),  # the steps run: an early stop is no rate error
        **usage_fields(job=job, train=m.train, gpu_utilization_percent=m.gpu_utilization_percent, energy_j=energy_j,
                       wall_s=wall_s, train_energy_j=energies["train"], train_s=train_s, pricing=p,
                       source_lengths=m.lengths[0], target_lengths=m.lengths[1],
                       generated_tokens=m.generated_tokens, model_bytes=m.model_bytes, output_bytes=m.output_bytes))


def failed_result(variant: dict[str, Any], reason: str, wall_s: float) -> VariantResult:
    """The record of a variant whose worker raised (the runner goes on with the others)."""
    return VariantResult(variant_id=str(variant["variant_id"]), config_hash=str(variant["config_hash"]),
                         axis_values=tuple((str(k), v) for k, v in variant.get("axis_values", [])),
                         seed=int(variant["seed"]), attempts=int(variant.get("attempt", 1)), status="failed",
                         reason=reason[:500], wall_s=wall_s,
                         wasted_energy_j=float(variant.get("wasted_energy_j", 0.0)))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the worker process: VARIANT.json in its variant folder; exit 0 ok or not applicable,
    1 failed (result.json says why), 2 bad input."""
    args = sys.argv[1:] if argv is None else argv
    ranks.die_with_parent(int(os.environ.get(PARENT_ENV, os.getppid())))  # the runner, or torchrun's agent
    path = Path(args[0])
    variant = json.loads(path.read_text(encoding="utf-8"))
    refused = ranks.launch(path, variant["job"], PARENT_ENV)  # runtime.devices > 1: this worker becomes torchrun
    if refused:
        print(f"greentrain experiment: error: variant {variant['variant_id']}: {refused}", file=sys.stderr)
        return 2
    wall0 = time.perf_counter()
    try:
        result = run_variant(variant, path.parent)
    except ConfigError as e:
        print(f"greentrain experiment: error: variant {variant['variant_id']}: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        if ranks.rank_world()[0] == 0:
            write_result(path.parent / RESULT_FILE, failed_result(variant, f"{type(e).__name__}: {e}",
                                                                  time.perf_counter() - wall0))
        print(f"greentrain experiment: variant {variant['variant_id']} failed: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    # a rank other than 0 has no result of its own (rank 0 assembles it): having run its phases, it succeeded (an
    # exit 1 would make its node's torchrun agent fail the launch and leave the other nodes' agents waiting)
    return 0 if result.status in ("ok", "not_applicable") or ranks.rank_world()[0] != 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
