"""HTML sections of the analyses beside a training run: seed 001's traffic and batch-time results, the offload
heatmap and the experiment report, and any other registered kind's fields (a training run's kinds:
report/html_sections.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from greentrain import units
from greentrain.report import heatmap
from greentrain.report import html_plots as plots
from greentrain.report.formats import dur, energy, mass, num, pct, si, signed_pct
from greentrain.report.html_parts import (
    figure,
    key_figures,
    notes,
    provenance,
    table,
)
from greentrain.report.html_validation import validation_section
from greentrain.results.analyses import BatchTimeResult, OffloadHeatmapResult, TrafficResult
from greentrain.results.calibration import ValidationResult
from greentrain.results.experiment import ExperimentResult
from greentrain.results.view import ResultView


def traffic_section(t: TrafficResult, source: str) -> str:
    degrees = " ".join(f"{k.lower()}={v}" for k, v in t.degrees.items())
    scenario = f"{t.num_params / 1e9:,.1f} B parameters on {t.num_chips:,} chips; {degrees}"
    figs = [("FLOP, whole run", si(t.flop_total, "FLOP")), ("Tx per chip", si(t.tx_bytes_per_chip, "B")),
            ("Rx per chip", si(t.rx_bytes_per_chip, "B"))]
    if t.runtime_s is not None:
        figs.append(("run time", dur(t.runtime_s)))
    body = (provenance("Predicted by greentrain traffic (seed 001's counting model); nothing measured", source,
                       scenario) + key_figures(figs))
    body += figure(plots.paired_bars(["sent (Tx)", "received (Rx)"], [t.tx_elements_fwd, t.rx_elements_fwd],
                                     [t.tx_elements_bwd, t.rx_elements_bwd], ("forward", "backward"),
                                     "elements over the run", "network elements by pass"),
                   "Elements sent and received over the whole run, forward and backward passes.")
    if t.dp_sweep:
        chips = [float(p.get("num_chips", 0)) for p in t.dp_sweep]
        body += figure(plots.line(chips, [float(p.get("rx_bytes_per_chip", 0.0)) for p in t.dp_sweep],
                                  ("chips (data-parallel degree swept)", "Rx bytes per chip"),
                                  "received bytes per chip over the run", log=True),
                       "The same run at other data-parallel degrees.")
    rows = [("forward", si(t.flop_fwd, "FLOP"), f"{t.tx_elements_fwd:.3e}", f"{t.rx_elements_fwd:.3e}"),
            ("backward", si(t.flop_bwd, "FLOP"), f"{t.tx_elements_bwd:.3e}", f"{t.rx_elements_bwd:.3e}")]
    return body + table(("pass", "FLOP", "Tx elements", "Rx elements"), rows, caption="per pass, whole run")


def batch_time_section(b: BatchTimeResult, source: str) -> str:
    c = b.config
    scenario = (f"{c.get('num_layers')} layers, d_model {c.get('d_model')}, {c.get('num_experts')} experts "
                f"({c.get('num_routed_experts')} routed), pp={c.get('pp')} tp={c.get('tp')} dp={c.get('dp')}, "
                f"{b.num_chips:,} x {b.chip.get('name')}")
    parts = [("compute (full FLOP time)", b.full_flop_time_s), ("network not hidden", b.full_net_time_s),
             ("pipeline bubble", b.bubble_time_s), ("gradient reduction", b.grad_reduction_time_s)]
    figs = [("batch time", dur(b.batch_time_s)), ("utilization", pct(b.utilization)),
            ("run time", dur(b.run_time_s)), ("batches", f"{b.num_batches:,}")]
    return (provenance("Predicted by greentrain batch-time (seed 001's pipelined MoE model); nothing measured",
                       source, scenario) + key_figures(figs)
            + figure(plots.bars([k for k, _ in parts], [v for _, v in parts], "seconds per batch",
                                "time per batch by part"), "Predicted time per batch, by part.")
            + table(("part", "time"), [(k, dur(v)) for k, v in parts] + [("batch", dur(b.batch_time_s))],
                    caption="time per batch"))


MAX_OPEN_ROWS = 40  # a longer table of cells is folded (<details>), its row count in the summary


def _best_cell(h: OffloadHeatmapResult) -> tuple[str, str] | None:
    """The key figure: the best cell of the metric (highest, or lowest where lower is better) and where it is."""
    st = heatmap.style(h.metric)
    fits = [c for c in h.cells if c.get("fits") and isinstance(c.get(h.metric), (int, float))]
    if not fits:
        return None
    pick = min if st.lower_is_better else max
    best = pick(fits, key=lambda c: float(c[h.metric]))
    v = float(best[h.metric])
    text = {"tokens_per_s": f"{v:,.0f} tokens/s", "mfu": pct(v)}.get(h.metric, f"{v:.3g} {st.label}")
    where = (f"{best.get('model')}, seq {int(best.get('seq_len', 0)):,}, device {float(best.get('device_gib', 0)):g}"
             f" / host {float(best.get('host_gib', 0)):g} GiB")
    name = {"tokens_per_s": "tokens/s", "mfu": "MFU"}.get(h.metric, h.metric.replace("_", " "))
    return f"{'lowest' if st.lower_is_better else 'highest'} {name}", f"{text} ({where})"


def offload_heatmap_section(h: OffloadHeatmapResult, source: str) -> str:
    fits = [c for c in h.cells if c.get("fits")]
    scenario = f"{len(h.cells):,} cells (model x chip x sequence x device cap x host cap), {h.framework} framework"
    best = _best_cell(h)
    figs = [("cells", f"{len(h.cells):,}"), ("fit", f"{len(fits):,}"), *([best] if best else [])]
    body = (provenance(f"Predicted by greentrain offload heatmap ({h.metric}); nothing measured", source,
                       scenario) + key_figures(figs))
    if h.cells:
        grid = heatmap.grid_from_cells(h.cells, h.metric)
        svg, written = plots.heatmaps(grid, h.metric, f"{heatmap.style(h.metric).label} by memory caps")
        groups = len(grid.rows) * len(grid.cols)
        body += figure(svg, f"Rows: model and chip; columns: sequence length; x: device memory cap, y: host memory "
                            f"cap; one colour scale. Hatched cells do not fit. All {groups} groups are drawn"
                            + ("." if written else "; the cells are too small to write in: the table below has "
                                                    "every value."), wide=True)
    rows = [(c.get("model"), c.get("chip"), c.get("seq_len"), f"{float(c.get('device_gib', 0)):g}",
             f"{float(c.get('host_gib', 0)):g}", "yes" if c.get("fits") else "no",
             f"{float(c.get('tokens_per_s') or 0):,.0f}", pct(float(c.get("mfu") or 0)), c.get("bound", ""))
            for c in h.cells]
    cells = table(("model", "chip", "seq", "device GiB", "host GiB", "fits", "tokens/s", "MFU", "bound"),
                  rows, numeric_from=2, caption="every cell")
    if len(rows) > MAX_OPEN_ROWS:
        cells = f"<details><summary>every cell ({len(rows):,} rows)</summary>{cells}</details>"
    return body + cells


def _opt(v: Any, fmt: Callable[[float], str]) -> str:
    return fmt(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _rel(pred: Any, meas: Any) -> float | None:
    ok = all(isinstance(v, (int, float)) for v in (pred, meas)) and meas
    return (pred - meas) / meas if ok else None


def _utilization(v: Mapping[str, Any]) -> str:
    """The training phase's utilisation, labelled: GPU (NVML) where measured, else CPU (CPU time)."""
    gpu, cpu = v.get("gpu_utilization_percent"), v.get("cpu_utilization_percent")
    if isinstance(gpu, (int, float)):
        return f"GPU {gpu:.0f} %"
    return f"CPU {cpu:.0f} %" if isinstance(cpu, (int, float)) else "-"


def experiment_section(e: ExperimentResult, source: str) -> str:
    ran = [v for v in e.variants if v.get("status") == "ok"]
    scenario = f"experiment {e.name}: {len(e.variants)} variant(s), {len(ran)} run; quality: {e.quality.get('label')}"
    rows = [(v.get("variant_id"), v.get("status"), _opt(v.get("train_s"), dur), _opt(v.get("predicted_train_s"), dur),
             signed_pct(_rel(v.get("predicted_train_s"), v.get("train_s"))),
             _opt(v.get("energy_j"), lambda j: energy(units.j_to_kwh(j))), _utilization(v),
             _opt(v.get("mean_power_w"), lambda w: f"{num(w)} W"),
             _opt(v.get("emissions_kg_co2e"), mass), _opt(v.get("cost_usd"), lambda u: f"${num(u)}"),
             _opt(v.get(str(e.quality.get("field"))), lambda q: f"{q:.4g}")) for v in e.variants]
    body = (provenance("Measured by greentrain experiment run, each variant also predicted by the planner", source,
                       scenario)
            + key_figures([("variants run", str(len(ran))), ("Pareto set", ", ".join(e.pareto) or "-")]))
    timed = [v for v in ran if isinstance(v.get("train_s"), (int, float))
             and isinstance(v.get("predicted_train_s"), (int, float))]
    if timed:
        body += figure(plots.paired_bars([str(v.get("variant_id")) for v in timed],
                                         [float(v["predicted_train_s"]) for v in timed],
                                         [float(v["train_s"]) for v in timed], ("predicted", "measured"),
                                         "training seconds", "training time per variant"),
                       "Predicted against measured training time of each variant.")
    body += _quality_plot(e, ran)
    body += table(("variant", "status", "train", "predicted", "error", "energy", "utilisation", "mean power", "CO2e",
                   "cost",
                   str(e.quality.get("label", "quality"))), rows, numeric_from=2, caption="variants")
    return body + notes(str(f.get("text", "")) for f in e.findings)


def _quality_plot(e: ExperimentResult, ran: Sequence[Mapping[str, Any]]) -> str:
    """Quality against CO2e, coloured by cost, the Pareto set ringed, each variant named (as pareto.png)."""
    field, label = str(e.quality.get("field")), str(e.quality.get("label", "quality"))
    pts = [v for v in ran if all(isinstance(v.get(k), (int, float)) for k in (field, "emissions_kg_co2e", "cost_usd"))]
    if not pts:
        return ""
    better = "" if e.quality.get("higher_is_better", True) else " (lower is better)"
    svg = plots.scatter([1e3 * float(v["emissions_kg_co2e"]) for v in pts], [float(v[field]) for v in pts],
                        [float(v["cost_usd"]) for v in pts], ("CO2e (g, operational + embodied)", label + better,
                                                              "cost (USD)"),
                        [i for i, v in enumerate(pts) if v.get("variant_id") in e.pareto],
                        f"{label} against CO2e", point_labels=[str(v.get("variant_id")) for v in pts],
                        marked_label="Pareto set")
    return figure(svg, f"Each variant run: {label} against CO2e, coloured by cost; ringed: the Pareto set "
                       f"({label} {'down' if better else 'up'}, CO2e and cost down).")


def fields_section(view: ResultView, source: str) -> str:
    """A kind without a section of its own (calibration, validation, an experiment's plan, variant or
    manifest): its top-level numbers and words as key figures, its lists and mappings counted."""
    items: list[tuple[str, str]] = []
    for key, value in view.fields_dict().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            items.append((key, num(value)))
        elif isinstance(value, (str, bool)):
            items.append((key, str(value)))
        elif isinstance(value, (list, tuple, dict)):
            items.append((key, f"{len(value)} entries"))
    return provenance(f"A greentrain {view.KIND} result", source, view.KIND) + key_figures(items)


ANALYSES_SECTIONS: dict[type[ResultView], tuple[str, Callable[[Any, str], str]]] = {
    TrafficResult: ("Traffic", traffic_section), BatchTimeResult: ("Batch time", batch_time_section),
    OffloadHeatmapResult: ("Offload heatmap", offload_heatmap_section),
    ExperimentResult: ("Experiment", experiment_section), ValidationResult: ("Validation", validation_section),
}
