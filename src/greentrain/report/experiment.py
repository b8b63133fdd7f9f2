"""Rendering of ``greentrain experiment`` (issue 17: renderers live in report/): the plan, status and report tables
(Rich), the report files (results.csv/.json, emissions.csv with CodeCarbon's columns, predictions.csv, report.md),
the plots (``write_plots``, in report/experiment_plots.py) and the progress bar over variants and steps.

``greentrain.experiment`` computes (results, findings, Pareto set, re-pricing) and imports neither Rich nor
matplotlib; this module only presents what it computed.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from greentrain import units
from greentrain.experiment.plan import ExperimentPlan
from greentrain.experiment.report import ExperimentReport, emissions_rows, prediction_rows
from greentrain.experiment.results import VariantResult, write_text_atomic
from greentrain.files import all_or_none
from greentrain.report.console import stdout_console
from greentrain.report.experiment_plots import write_plots as write_plots  # `experiment --plot` imports it here

# ---- files --------------------------------------------------------------------------------------------------


def _csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow(row)
    return buf.getvalue()


def _write(path: Path, text: str) -> None:
    write_text_atomic(path, text, "report")


def write_report_files(out_dir: Path, rep: ExperimentReport) -> list[Path]:
    """results.json/.csv, emissions.csv, predictions.csv, report.md (each written atomically)."""
    from greentrain.measure.outputs import CODECARBON_COLUMNS

    paths = []
    results_json = json.dumps(rep.to_dict(), indent=1)
    fields = [f.name for f in dataclasses.fields(VariantResult)]
    files = {"results.json": results_json,
             "results.csv": _csv_text(fields, [r.to_dict() for r in rep.results]),
             "emissions.csv": _csv_text(list(CODECARBON_COLUMNS), emissions_rows(rep, rep.name)),
             "predictions.csv": _csv_text(["variant_id", "quantity", "predicted", "measured", "error"],
                                          prediction_rows(rep)),
             "report.md": markdown(rep)}
    with all_or_none():  # the five files agree with each other: all of them or none
        for name, text in files.items():
            _write(out_dir / name, text)
        paths.append(out_dir / name)
    return paths


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


QUALITY_COLUMNS = {"rouge1": (("ROUGE-1", "rouge1"), ("ROUGE-L", "rougeL")),
                   "perplexity": (("eval loss", "eval_loss"), ("perplexity", "perplexity"))}


def _storage(rep: ExperimentReport) -> bool:
    return any(r.storage_cost_usd is not None for r in rep.results)


def table_columns(rep: ExperimentReport) -> tuple[str, ...]:
    quality = tuple(label for label, _ in QUALITY_COLUMNS[rep.quality.field])
    return ("variant", "status", "train s", "tokens/s", "util %", "mean W", "peak MiB", "GFLOP/step", "energy Wh",
            "g CO2e", "$", *(("$ storage",) if _storage(rep) else ()), *quality, "pred FLOP err", "calib. time err")


def utilization_cell(r: VariantResult) -> str:
    """The train phase's utilisation, labelled by what it is: ``gpu 87`` (NVML) or ``cpu 48`` (CPU time)."""
    if r.gpu_utilization_percent is not None:
        return f"gpu {r.gpu_utilization_percent:.0f}"
    return "-" if r.cpu_utilization_percent is None else f"cpu {r.cpu_utilization_percent:.0f}"


def _pareto_note(rep: ExperimentReport) -> str:
    return f"Pareto set: {rep.quality.label} {rep.quality.direction}, CO2e and $ down"


def table_rows(rep: ExperimentReport) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for r in rep.results:
        ok = r.status in ("ok", "pruned")  # a pruned trial: what it measured until Optuna stopped it
        status = r.status + (" *" if r.variant_id in rep.pareto else "")
        e = r.error("flop_per_step")
        c = r.error("calibrated_train_s")
        rows.append((r.variant_id, status, _fmt(r.train_s if ok else None, ".3g"),
                     _fmt(r.tokens_per_s if ok else None, ".4g"), utilization_cell(r) if ok else "-",
                     _fmt(r.mean_power_w if ok else None, ".3g"),
                     _fmt(r.peak_memory_bytes / units.MIB if ok else None, ".4g"),
                     _fmt(r.flop_per_step / 1e9 if ok else None, ".4g"),
                     _fmt(units.j_to_kwh(r.facility_energy_j) * 1e3 if ok else None, ".4g")
                     + ("" if r.energy_measured or not ok else " est"),
                     _fmt(r.emissions_kg_co2e * 1e3 if ok and r.emissions_kg_co2e is not None else None, ".4g"),
                     _fmt(r.cost_usd if ok else None, ".4g"),
                     *((_fmt(r.storage_cost_usd if ok else None, ".2g"),) if _storage(rep) else ()),
                     *(_fmt(getattr(r, f), ".2f" if f.startswith("rouge") else ".4g")
                       for _, f in QUALITY_COLUMNS[rep.quality.field]),
                     _fmt(e, "+.1%"), _fmt(c, "+.1%")))
    return rows


def repeat_columns(rep: ExperimentReport) -> tuple[str, ...]:
    return ("variant", "seeds", "train s", "energy Wh", "g CO2e", "$", rep.quality.label)


def repeat_rows(rep: ExperimentReport) -> list[tuple[str, ...]]:
    """Mean ± sd over the seeds, per variant run with repeats (energy as measured, before PUE)."""
    scale = {"energy_j": 1e3 / 3.6e6, "emissions_kg_co2e": 1e3}  # Wh, g
    rows = []
    for x in rep.repeats:
        cells = []
        for f in ("train_s", "energy_j", "emissions_kg_co2e", "cost_usd", rep.quality.field):
            m, sd = x.mean(f), x.sd(f)
            k = scale.get(f, 1.0)
            cells.append("-" if m is None or sd is None else f"{m * k:.4g} ± {sd * k:.2g}")
        rows.append((x.variant_id, str(x.runs), *cells))
    return rows


def repriced_columns() -> tuple[str, ...]:
    return ("region", "variant", "g/kWh", "g CO2e", "$", "$/kWh", "electricity $")


def repriced_rows(rep: ExperimentReport) -> list[tuple[str, ...]]:
    """Each ok variant in each re-priced region: CO2e, $ on the experiment's basis, the region's electricity bill."""
    return [(x.region, x.variant_id, _fmt(x.grid_g_co2e_per_kwh, ".4g"),
             _fmt(x.emissions_kg_co2e * 1e3 if x.emissions_kg_co2e is not None else None, ".4g"),
             _fmt(x.cost_usd, ".4g") + (f" {x.cost_basis}" if x.cost_usd is not None else ""),
             _fmt(x.electricity_usd_per_kwh, ".4g"), _fmt(x.electricity_cost_usd, ".4g")) for x in rep.repriced]


def markdown(rep: ExperimentReport) -> str:
    columns = table_columns(rep)
    lines = [f"# Experiment {rep.name}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(rep)]
    q = rep.quality
    lines += ["", f"`*`: in the Pareto set ({q.label} {q.direction}, CO2e and $ down). `est`: energy estimated, "
              "not metered. `util %`: the training phase's GPU utilisation from NVML (`gpu`), else its CPU "
              "utilisation (`cpu`: CPU seconds / (time x logical CPUs)). `mean W`: IT energy / wall time.", ""]
    if rep.repriced:
        columns = repriced_columns()
        lines += ["## Re-priced in other regions (the same measurements)", "", "| " + " | ".join(columns) + " |",
                  "|" + "---|" * len(columns), *("| " + " | ".join(row) + " |" for row in repriced_rows(rep)), ""]
    if rep.repeats:
        columns = repeat_columns(rep)
        lines += ["## Over the seeds (mean ± sd)", "", "| " + " | ".join(columns) + " |",
                  "|" + "---|" * len(columns), *("| " + " | ".join(row) + " |" for row in repeat_rows(rep)), ""]
    lines += ["## Findings", ""]
    lines += [f"- **{f.kind}** {f.text}" for f in rep.findings]
    notes = sorted({r.reason for r in rep.results if r.status in ("not_applicable", "failed") and r.reason})
    if notes:
        lines += ["", "## Not run as asked", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# ---- console ------------------------------------------------------------------------------------------------


def _f(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def render_plan(plan: ExperimentPlan) -> None:
    t = Table(title=f"experiment {plan.name}: {len(plan.rows)} variant(s), predicted by the planner")
    for c in ("variant", "settings", "steps", "GFLOP/step", "tokens/step", "memory MiB", "chip", "train s",
              "energy Wh", "g CO2e", "$"):
        t.add_column(c, justify="left" if c in ("variant", "settings", "chip") else "right")
    for r in plan.rows:
        p = r.prediction
        t.add_row(r.variant_id, r.settings, str(r.num_steps), _f(p.flop_per_step / 1e9, ".4g"),
                  _f(p.tokens_per_step, ".0f"), _f(p.memory_bytes / units.MIB, ".4g"), p.chip or "-",
                  _f(p.train_s, ".3g"), _f(units.j_to_kwh(p.energy_j) * 1e3 if p.energy_j is not None else None,
                                           ".4g"),
                  _f(p.kg_co2e * 1e3 if p.kg_co2e is not None else None, ".4g"), _f(p.cost_usd, ".4g"))
    console = stdout_console()
    console.print(t)
    if plan.search_trials:
        console.print(f"search: {plan.search_trials} Optuna trial(s), each predicted as the base; the totals are "
                      f"{plan.search_trials} x the base")
    if plan.energy_j is None:
        console.print("time, energy, CO2e and $ are predicted only with site.chip (the chip the runs use); the "
                      "budget is then checked on measured totals while running")
    else:
        console.print(f"total: {units.j_to_kwh(plan.energy_j):.4g} kWh, "
                      f"{_f(plan.kg_co2e * 1e3 if plan.kg_co2e is not None else None, '.4g')} g CO2e, "
                      f"${_f(plan.cost_usd, '.4g')}")
    for line in plan.over_budget:
        console.print(f"[red]over budget[/red]: {line}")
    for f in plan.truncation:  # token lengths against the max lengths, before anything trains
        console.print(f"[bold]{f.kind}[/bold] {f.text}")


def render_report(rep: ExperimentReport, findings: bool = True) -> None:
    t = Table(title=f"experiment {rep.name}")
    for c in table_columns(rep):
        t.add_column(c, justify="left" if c in ("variant", "status") else "right")
    for row in table_rows(rep):
        t.add_row(*row)
    console = stdout_console()
    console.print(t)
    counts: dict[str, int] = {}
    for r in rep.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()) + f"   (* {_pareto_note(rep)})")
    if rep.repriced:
        again = Table(title="re-priced in other regions (the same measurements)")
        for c in repriced_columns():
            again.add_column(c, justify="left" if c in ("region", "variant") else "right")
        for row in repriced_rows(rep):
            again.add_row(*row)
        console.print(again)
    if rep.repeats:
        over = Table(title="over the seeds (mean ± sd)")
        for c in repeat_columns(rep):
            over.add_column(c, justify="left" if c == "variant" else "right")
        for row in repeat_rows(rep):
            over.add_row(*row)
        console.print(over)
    for r in rep.results:
        if r.status in ("not_applicable", "failed", "skipped_budget") and r.reason:
            console.print(f"{r.variant_id}: {r.status}: {r.reason}")
    if findings:
        for f in rep.findings:
            console.print(f"[bold]{f.kind}[/bold] {f.text}")


# ---- plots --------------------------------------------------------------------------------------------------


# ---- progress -----------------------------------------------------------------------------------------------


class RichProgress:
    """The runner's progress (``runner.Progress``) as a Rich bar over variants and over the current variant's
    steps, read from its ``train.jsonl`` twice a second (on stderr; transient)."""

    def __init__(self, total_variants: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.path: Path | None = None
        self._stop = False
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self.variants = self.progress.add_task("variants", total=total_variants)
        self.steps = self.progress.add_task("steps", total=1)
        self.progress.start()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop:
            p = self.path
            if p is not None and p.is_file():
                with contextlib.suppress(OSError):
                    self.progress.update(self.steps, completed=p.read_text(encoding="utf-8").count('"type":"step"'))
            time.sleep(0.5)

    def begin(self, variant_id: str, max_steps: int, folder: Path) -> None:
        self.path = folder / "train.jsonl"
        self.progress.update(self.steps, description=variant_id[:40], total=max_steps, completed=0)

    def end(self) -> None:
        self.path = None
        self.progress.advance(self.variants)

    def close(self) -> None:
        self._stop = True
        self.progress.stop()
