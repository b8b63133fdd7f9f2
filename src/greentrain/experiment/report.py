"""The experiment's exit: status and report tables (Rich), results.csv/.json, emissions.csv (CodeCarbon's
columns, one row per variant and phase), predictions.csv, report.md and the plots. Reads only the output folder,
so ``report`` works on a finished, interrupted or running experiment; re-pricing needs no re-run.
"""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from greentrain import units
from greentrain.errors import ConfigError
from greentrain.experiment.cost import price, reprice_regions, site_of
from greentrain.experiment.findings import Finding, RepeatSummary, all_findings, pareto_set, repeat_summaries
from greentrain.experiment.job import SiteSpec, parse_job
from greentrain.experiment.results import PHASES, Quality, VariantResult, quality_of, read_result
from greentrain.experiment.runner import previous_attempts, variant_dir
from greentrain.results.experiment import ExperimentResult


@dataclass(frozen=True, slots=True, kw_only=True)
class Repriced:
    region: str
    variant_id: str
    grid_g_co2e_per_kwh: float | None
    emissions_kg_co2e: float | None
    cost_usd: float | None
    cost_basis: str
    electricity_usd_per_kwh: float | None = None  # the region's price (catalog region data); None: unknown
    electricity_cost_usd: float | None = None  # the run's electricity bill there (facility energy x that price)
    pue: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentReport:
    name: str
    results: tuple[VariantResult, ...]
    findings: tuple[Finding, ...]
    pareto: tuple[str, ...]
    quality: Quality  # ROUGE-1 (summarization) or perplexity (causal-lm)
    repriced: tuple[Repriced, ...]
    wasted_energy_j: float
    num_failed_attempts: int
    repeats: tuple[RepeatSummary, ...] = ()  # with repeats > 1: mean and sd over the seeds

    def to_dict(self) -> dict[str, Any]:
        return {**ExperimentResult.head(), "name": self.name,
                "variants": [r.to_dict() for r in self.results],
                "pareto": list(self.pareto),
                "quality": {"field": self.quality.field, "label": self.quality.label,
                            "higher_is_better": self.quality.higher_is_better},
                "findings": [{"kind": f.kind, "text": f.text, "variants": list(f.variants),
                              "numbers": dict(f.numbers)} for f in self.findings],
                "repriced": [dataclasses.asdict(x) for x in self.repriced],
                "wasted_energy_j": self.wasted_energy_j, "num_failed_attempts": self.num_failed_attempts,
                "repeats": [{"variant_id": x.variant_id, "runs": x.runs,
                             **{f"{f}_{k}": v for f, m, sd in x.stats for k, v in (("mean", m), ("sd", sd))}}
                            for x in self.repeats]}


def _manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / "experiment.json"
    if not path.is_file():
        raise ConfigError("dir", str(out_dir), "is not an experiment output folder (no experiment.json)")
    from greentrain.config import load_mapping

    man = load_mapping(path, field="dir")  # a truncated or edited file: one line, not a traceback
    variants = man.get("variants")
    ok = isinstance(variants, list) and all(isinstance(v, dict) and isinstance(v.get("variant_id"), str)
                                            and "config_hash" in v and isinstance(v.get("axis_values"), list)
                                            for v in variants)
    if not ok:  # {"a": NaN} was a KeyError traceback
        raise ConfigError("dir", str(path), "is not an experiment manifest: variants must be a list of "
                          "{variant_id, config_hash, axis_values}")
    return man


def load_results(out_dir: Path) -> tuple[dict[str, Any], list[VariantResult]]:
    """The manifest and one result per variant (``pending`` for those not run, or run with another hash)."""
    man = _manifest(out_dir)
    out = []
    for v in man["variants"]:
        r = read_result(variant_dir(out_dir, v["variant_id"]) / "result.json")
        if r is None or r.config_hash != v["config_hash"]:
            r = VariantResult(variant_id=v["variant_id"], config_hash=v["config_hash"],
                              axis_values=tuple((str(k), x) for k, x in v["axis_values"]), status="pending")
        out.append(r)
    return man, out


def reprice(results: list[VariantResult], site: SiteSpec, regions: list[str]) -> list[Repriced]:
    """The measured energy and billed time of each ok variant priced in other regions: CO2e at the region's grid
    and PUE; $ on the experiment's basis (an hourly price stays the same; the electricity basis takes the region's
    price) and the region's electricity bill beside it."""
    out = []
    for region in regions:
        s = site_of(site, region)
        for r in results:
            if r.status != "ok":
                continue
            p = price(energy_j=r.energy_j, wall_s=r.wall_s, site=s, usd_per_hour=site.usd_per_hour)
            out.append(Repriced(region=region, variant_id=r.variant_id, grid_g_co2e_per_kwh=p.grid_g_co2e_per_kwh,
                                emissions_kg_co2e=p.emissions_kg_co2e, cost_usd=p.cost_usd, cost_basis=p.cost_basis,
                                electricity_usd_per_kwh=p.electricity_usd_per_kwh,
                                electricity_cost_usd=p.electricity_cost_usd, pue=p.pue))
    return out


def where_findings(results: Sequence[VariantResult], rep: Sequence[Repriced]) -> list[Finding]:
    """F10 across regions: F1 (cheapest vs greenest, with its cause) over every ok variant at the site and in each
    re-priced region (options named ``variant@region``); the same measurements, so only the regions' prices, grids
    and PUEs separate an option from the same variant elsewhere."""
    if not rep:
        return []
    options = [dataclasses.replace(r, variant_id=f"{r.variant_id}@{r.region or 'site'}") for r in results
               if r.status == "ok"]
    by_id = {r.variant_id: r for r in results}
    for x in rep:
        options.append(dataclasses.replace(
            by_id[x.variant_id], variant_id=f"{x.variant_id}@{x.region}", region=x.region,
            grid_g_co2e_per_kwh=x.grid_g_co2e_per_kwh, pue=x.pue, emissions_kg_co2e=x.emissions_kg_co2e,
            cost_usd=x.cost_usd, cost_basis=x.cost_basis, electricity_usd_per_kwh=x.electricity_usd_per_kwh,
            electricity_cost_usd=x.electricity_cost_usd))
    from greentrain.experiment.findings import cheapest_vs_greenest

    regions = len({x.region for x in rep})
    return [dataclasses.replace(f, kind="F10", text=f"where to run (the site and {regions} re-priced region(s)): "
                                f"{f.text}") for f in cheapest_vs_greenest(options)]


def _region_findings(rep: list[Repriced]) -> list[Finding]:
    """F10: each re-priced region's total CO2e and $ over the ok variants, and its greenest variant."""
    out = []
    for region in dict.fromkeys(x.region for x in rep):
        rows = [x for x in rep if x.region == region and x.emissions_kg_co2e is not None]
        if not rows:
            continue
        g = sum((x.emissions_kg_co2e or 0.0) for x in rows) * 1e3
        usd = sum((x.cost_usd or 0.0) for x in rows)
        green = min(rows, key=lambda x: x.emissions_kg_co2e or 0.0)
        bills = [x.electricity_cost_usd for x in rows if x.electricity_cost_usd is not None]
        bill = f" (${sum(bills):.4g} of electricity at ${rows[0].electricity_usd_per_kwh:.4g}/kWh)" if bills else ""
        out.append(Finding(kind="F10", text=f"in {region} ({rows[0].grid_g_co2e_per_kwh:.4g} g/kWh): {g:.4g} g CO2e "
                           f"and ${usd:.4g}{bill} for the {len(rows)} ok variant(s); greenest {green.variant_id}",
                           variants=(green.variant_id,),
                           numbers=(("g_co2e", g), ("cost_usd", usd), ("electricity_cost_usd", sum(bills)))))
    return out


def build_report(out_dir: Path | Sequence[Path], regions: list[str] | None = None) -> ExperimentReport:
    """The report of one output folder, or of several of the same experiment merged (experiment/merge.py)."""
    if isinstance(out_dir, Path):
        man, results = load_results(out_dir)
        every_attempt = previous_attempts(out_dir)
    else:
        from greentrain.experiment.merge import load_merged

        man, results, every_attempt = load_merged(out_dir, load_results)
    site = parse_job({"site": man.get("site", {})}).site
    regions = list(reprice_regions(site, site.reprice if regions is None else regions,
                                   "site.reprice" if regions is None else "--reprice"))
    rep = reprice(results, site, regions)
    attempts = [a for a in every_attempt if a.wasted]
    wasted = sum(a.energy_j for a in attempts)
    findings = all_findings(results, attempts_energy_j=wasted, num_attempts=len(attempts),
                            max_steps={v["variant_id"]: int(v.get("max_steps", 0)) for v in man["variants"]})
    from greentrain.experiment.pruning import pruning_finding  # F12: a search's pruned trials and their energy

    findings += pruning_finding(results, {v["variant_id"]: int(v.get("max_steps", 0)) for v in man["variants"]})
    return ExperimentReport(name=str(man["name"]), results=tuple(results),
                            findings=tuple(findings + _region_findings(rep)
                                           + where_findings(results, rep)), pareto=tuple(pareto_set(results)),
                            quality=quality_of(results, str(man.get("task", "summarization"))),
                            repriced=tuple(rep), wasted_energy_j=wasted, num_failed_attempts=len(attempts),
                            repeats=tuple(repeat_summaries(results)))


def emissions_rows(rep: ExperimentReport, project: str) -> list[dict[str, Any]]:
    """CodeCarbon's emissions.csv columns, one row per variant and phase (each phase counted once)."""
    rows = []
    for r in rep.results:
        if r.status != "ok":
            continue
        for phase in PHASES:
            seconds = getattr(r, f"{phase}_s")
            energy = getattr(r, f"{phase}_energy_j")
            facility_kwh = units.j_to_kwh(energy * r.pue)
            kg = facility_kwh * r.grid_g_co2e_per_kwh / 1e3 if r.grid_g_co2e_per_kwh is not None else ""
            share = r.pue * energy / r.energy_j if r.energy_j else 0.0  # parts x PUE: they sum to energy_consumed
            watts = {p: getattr(r, f"{p}_energy_j") * share / r.pue / seconds if seconds > 0 else "" for p in
                     ("cpu", "gpu", "ram")}  # the phase's mean IT power of each part, as CodeCarbon's *_power
            util = phase == "train"  # utilisation is measured over the training phase
            when = datetime.fromtimestamp(r.started_unix, tz=timezone.utc).isoformat() if r.started_unix else ""
            rows.append({"timestamp": when, "project_name": project, "run_id": f"{r.variant_id}:{phase}",
                         "experiment_id": r.config_hash, "duration": seconds, "emissions": kg,
                         "emissions_rate": kg / seconds if kg != "" and seconds > 0 else "",
                         "cpu_energy": units.j_to_kwh(r.cpu_energy_j * share),
                         "gpu_energy": units.j_to_kwh(r.gpu_energy_j * share),
                         "ram_energy": units.j_to_kwh(r.ram_energy_j * share), "energy_consumed": facility_kwh,
                         "region": r.region, "os": platform.platform(), "python_version": platform.python_version(),
                         "cpu_count": r.cpu_count, "gpu_model": r.device if r.device != "cpu" else "",
                         "gpu_count": 1 if r.device != "cpu" else 0, "tracking_mode": "process", "pue": r.pue,
                         "cpu_power": watts["cpu"], "gpu_power": watts["gpu"], "ram_power": watts["ram"],
                         "cpu_utilization_percent": _blank(r.cpu_utilization_percent if util else None),
                         "gpu_utilization_percent": _blank(r.gpu_utilization_percent if util else None)})
    return rows


def _blank(x: float | None) -> float | str:
    return "" if x is None else x


def prediction_rows(rep: ExperimentReport) -> list[dict[str, Any]]:
    rows = []
    for r in rep.results:
        if r.status != "ok":
            continue
        for what, pred, meas in (("flop_per_step", r.predicted_flop_per_step, r.flop_per_step),
                                 ("tokens_per_step", r.predicted_tokens_per_step,
                                  (r.tokens_source + r.tokens_target) / r.num_steps if r.num_steps else None),
                                 ("train_s", r.predicted_train_s, r.train_s),
                                 ("calibrated_train_s", r.calibrated_train_s, r.train_s),
                                 ("energy_j", r.predicted_energy_j, r.energy_j),
                                 ("kg_co2e", r.predicted_kg_co2e, r.emissions_kg_co2e),
                                 ("cost_usd", r.predicted_cost_usd, r.cost_usd),
                                 ("memory_bytes", r.predicted_memory_bytes, r.peak_memory_bytes)):
            err = (pred - meas) / meas if pred is not None and meas else None
            rows.append({"variant_id": r.variant_id, "quantity": what, "predicted": pred, "measured": meas,
                         "error": err})
    return rows
