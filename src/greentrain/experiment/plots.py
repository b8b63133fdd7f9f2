"""The experiment's plots (matplotlib through greentrain.plotting): quality vs CO2e with the Pareto set,
cost vs CO2e with the re-priced regions as ghosts, and the prediction errors."""

from __future__ import annotations

from pathlib import Path

from greentrain.experiment.report import ExperimentReport
from greentrain.experiment.results import VariantResult
from greentrain.plotting import pyplot, save_figure


def _ok(rep: ExperimentReport) -> list[VariantResult]:
    return [r for r in rep.results if r.status == "ok" and r.emissions_kg_co2e is not None]


def _g(r: VariantResult) -> float:
    return (r.emissions_kg_co2e or 0.0) * 1e3


def pareto_plot(rep: ExperimentReport, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    rows = [r for r in _ok(rep) if r.rouge1 is not None]
    costs = [r.cost_usd or 0.0 for r in rows]
    top = max(costs, default=0.0) or 1.0
    for r, c in zip(rows, costs, strict=True):
        front = r.variant_id in rep.pareto
        ax.scatter(_g(r), r.rouge1, s=40 + 260 * c / top, alpha=0.8,
                   edgecolors="black" if front else "none", color="tab:green" if front else "tab:gray")
        ax.annotate(r.variant_id, (_g(r), r.rouge1), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    ax.set_xlabel("g CO2e (operational + embodied)")
    ax.set_ylabel("ROUGE-1")
    ax.set_title(f"{rep.name}: quality vs CO2e (marker area ~ $; outlined: Pareto set)", fontsize=9)
    return save_figure(fig, path)


def cost_plot(rep: ExperimentReport, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for x in rep.repriced:
        if x.emissions_kg_co2e is not None and x.cost_usd is not None:
            ax.scatter(x.emissions_kg_co2e * 1e3, x.cost_usd, color="tab:gray", alpha=0.3, s=20)
            ax.annotate(f"{x.variant_id} @ {x.region}", (x.emissions_kg_co2e * 1e3, x.cost_usd), fontsize=5,
                        alpha=0.5)
    for r in _ok(rep):
        if r.cost_usd is not None:
            ax.scatter(_g(r), r.cost_usd, color="tab:blue", s=40)
            ax.annotate(r.variant_id, (_g(r), r.cost_usd), fontsize=7)
    ax.set_xlabel("g CO2e")
    ax.set_ylabel("$")
    ax.set_title(f"{rep.name}: cost vs CO2e (grey: re-priced in other regions)", fontsize=9)
    return save_figure(fig, path)


def error_plot(rep: ExperimentReport, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    rows = [r for r in rep.results if r.status == "ok"]
    names = ("flop_per_step", "calibrated_train_s", "train_s", "energy_j")
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        xs = [i + k * width for i in range(len(rows))]
        ys = [100 * (r.error(name) or 0.0) for r in rows]
        ax.bar(xs, ys, width=width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))], [r.variant_id for r in rows], rotation=20,
                  fontsize=7)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_ylabel("(predicted - measured) / measured, %")
    ax.legend(fontsize=7)
    ax.set_title(f"{rep.name}: prediction errors (absent bars: not predicted)", fontsize=9)
    return save_figure(fig, path)


def write_plots(rep: ExperimentReport, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [pareto_plot(rep, folder / "pareto.png"), cost_plot(rep, folder / "cost_vs_co2.png"),
            error_plot(rep, folder / "prediction_error.png")]
