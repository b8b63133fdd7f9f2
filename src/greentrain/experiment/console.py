"""Rich tables of an experiment: its plan, its status and its report (stdout)."""

from __future__ import annotations

from rich.table import Table

from greentrain import units
from greentrain.experiment.plan import ExperimentPlan
from greentrain.experiment.report import TABLE_COLUMNS, ExperimentReport, table_rows
from greentrain.report.console import stdout_console


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
    if plan.energy_j is None:
        console.print("time, energy, CO2e and $ are predicted only with site.chip (the chip the runs use); the "
                      "budget is then checked on measured totals while running")
    else:
        console.print(f"total: {units.j_to_kwh(plan.energy_j):.4g} kWh, "
                      f"{_f(plan.kg_co2e * 1e3 if plan.kg_co2e is not None else None, '.4g')} g CO2e, "
                      f"${_f(plan.cost_usd, '.4g')}")
    for line in plan.over_budget:
        console.print(f"[red]over budget[/red]: {line}")


def render_report(rep: ExperimentReport, findings: bool = True) -> None:
    t = Table(title=f"experiment {rep.name}")
    for c in TABLE_COLUMNS:
        t.add_column(c, justify="left" if c in ("variant", "status") else "right")
    for row in table_rows(rep):
        t.add_row(*row)
    console = stdout_console()
    console.print(t)
    counts: dict[str, int] = {}
    for r in rep.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()) + "   (* Pareto set: ROUGE-1 up, CO2e and $ down)")
    for r in rep.results:
        if r.status in ("not_applicable", "failed", "skipped_budget") and r.reason:
            console.print(f"{r.variant_id}: {r.status}: {r.reason}")
    if findings:
        for f in rep.findings:
            console.print(f"[bold]{f.kind}[/bold] {f.text}")
