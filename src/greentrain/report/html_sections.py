"""One HTML section per result kind: what was predicted or measured, from which file and scenario, the key
figures, the tables and the plots (report/html_plots.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from greentrain import units
from greentrain.report import html_plots as plots
from greentrain.report.formats import dur, energy, gib, mass, num, pct, si, signed_pct
from greentrain.report.html_parts import (
    figure,
    key_figures,
    notes,
    provenance,
    table,
)
from greentrain.results.kinds import (
    CompareResult,
    FootprintResult,
    PlanResult,
    RegionsResult,
    SearchResultView,
    SimStepView,
    SimSwarmView,
    TrackResult,
)
from greentrain.results.view import ResultView

STRATEGY_KEYS = (("dp", 1), ("tp", 1), ("pp", 1), ("vpp", 1), ("cp", 1), ("ep", 1), ("zero", None),
                 ("recompute", None), ("micro_batch_size", None))  # (key, value left out when equal)


def strategy_text(s: Mapping[str, Any]) -> str:
    """``dp=8 tp=8 zero=1 recompute=selective mb=1`` from a strategy mapping (degrees of 1 left out but dp)."""
    parts = [f"{'mb' if k == 'micro_batch_size' else k}={s[k]}" for k, skip in STRATEGY_KEYS
             if k in s and (k == "dp" or s[k] != skip)]
    return " ".join(parts)


def _plan_scenario(p: PlanResult) -> str:
    x = p.extra
    params = f" ({x['num_params'] / 1e9:.2f} B params)" if isinstance(x.get("num_params"), (int, float)) else ""
    batch = (f"; {x['global_batch_size']:,} sequences of {x['seq_len']:,} tokens a step"
             + (" (the default batch)" if x.get("global_batch_is_default") is True else "")
             if isinstance(x.get("global_batch_size"), int) and isinstance(x.get("seq_len"), int) else "")
    training = x.get("training")
    if isinstance(training, Mapping) and isinstance(training.get("summary"), str):
        batch += f"; training: {training['summary']}"
    chosen = " (chosen by the planner)" if p.strategy.get("chosen_by_planner") else ""
    return (f"{p.model}{params} on {p.num_chips} x {p.chip}; {strategy_text(p.strategy)}{chosen}{batch}; "
            f"{p.num_steps:,} steps; {p.region or 'given grid'} at {p.grid_g_co2e_per_kwh:.0f} g CO2e/kWh, "
            f"PUE {p.pue:.2f}")


def plan_figures(p: PlanResult) -> list[tuple[str, str]]:
    return [("step time", dur(p.step_time_s)), ("MFU", pct(p.mfu)), ("tokens/s", f"{p.tokens_per_s:,.0f}"),
            ("run time", dur(p.run_time_s)), ("energy", energy(p.energy_kwh)),
            ("CO2e", mass(p.emissions_kg_co2e)), ("cost", f"${num(p.cost_usd)}"),
            ("memory per device", gib(p.memory_bytes_per_device.get("total", 0.0)))]


def plan_section(p: PlanResult, source: str) -> str:
    parts = [(k, v) for k, v in p.step_breakdown_s.items() if v > 0 or k == "compute"]
    step_rows = [(k.replace("_", " "), dur(v), pct(v / p.step_time_s if p.step_time_s else 0.0)) for k, v in parts]
    mem = [(k.replace("_", " "), gib(v)) for k, v in p.memory_bytes_per_device.items()
           if k not in ("capacity", "host_offloaded") or v]
    svg = plots.bars([k.replace("_", " ") for k, _ in parts], [v for _, v in parts], "seconds per step",
                     "time per step by part (slowest pipeline stage)")
    eff = p.extra.get("efficiency") or {}
    band = p.extra.get("error_band") or {}  # calibrate/bands.py via report/plan.py
    return (provenance("Predicted by greentrain plan (analytical model); nothing measured", source,
                       _plan_scenario(p))
            + key_figures(plan_figures(p))
            + figure(svg, f"Predicted step time {dur(p.step_time_s)}, by part.")
            + '<div class="cols">'
            + table(("per step", "time", "share"), step_rows, caption="time per step (slowest pipeline stage)")
            + table(("part", "size"), mem, caption="memory per device") + "</div>"
            + table(("footprint", "value"), [
                ("operational CO2e", mass(p.operational_kg_co2e)), ("embodied CO2e", mass(p.embodied_kg_co2e)),
                ("HFU", pct(p.hfu)), ("efficiency", eff.get("summary", "") if isinstance(eff, Mapping) else ""),
                ("expected error", band.get("summary", "") if isinstance(band, Mapping) else "")],
                caption="footprint and efficiency"))


def search_section(s: SearchResultView, source: str) -> str:
    rows = [(r.rank, r.chip, r.num_chips, r.region or "-", r.describe, f"{units.s_to_days(r.run_time_s):.2f}",
             f"{r.cost_usd:,.0f}", f"{r.emissions_kg_co2e:,.0f}", f"{r.energy_kwh:,.0f}",
             f"{units.bytes_to_gib(r.total_memory_bytes_per_device):.1f}", pct(r.mfu)) for r in s.ranked]
    best = s.ranked[0] if s.ranked else None
    scenario = _plan_scenario(best.estimate) if best is not None and best.estimate is not None else (
        "the file holds no full estimate of the best strategy")
    figs = [("candidates", f"{s.num_candidates:,}"), ("feasible", f"{s.num_feasible:,}"),
            ("search time", dur(s.search_time_s))]
    if best is not None:
        figs += [("best step time", dur(best.step_time_s)), ("best MFU", pct(best.mfu)),
                 ("best energy", energy(best.energy_kwh)), ("best CO2e", mass(best.emissions_kg_co2e)),
                 ("best cost", f"${num(best.cost_usd)}")]
    body = (provenance(f"Predicted by greentrain search, ranked by {s.objective}; nothing measured", source,
                       f"best strategy: {scenario}") + key_figures(figs))
    if s.ranked:
        body += figure(_search_scatter(s), "The ranked strategies (numbered by rank, coloured by CO2e) and the "
                                           "Pareto front of the whole search (P1, P2, ... as in the front's table), "
                                           "by run time and cost.")
    body += table(("#", "chip", "chips", "region", "strategy", "days", "USD", "kg CO2e", "kWh", "GiB/dev", "MFU"),
                  rows, numeric_from=5, caption=f"top {len(rows)} strategies by {s.objective}")
    front = [(f"P{k}", str(c.get("chip")), c.get("num_chips"), c.get("region") or "-", c.get("describe"),
              f"{units.s_to_days(_f(c, 'run_time_s')):.2f}", f"{_f(c, 'cost_usd'):,.0f}",
              f"{_f(c, 'emissions_kg_co2e'):,.0f}") for k, c in enumerate(_front(s), 1)]
    if front:
        body += table(("#", "chip", "chips", "region", "strategy", "days", "USD", "kg CO2e"), front, numeric_from=5,
                      caption=f"Pareto front: run time x cost x CO2e ({len(front)} "
                              f"{'strategy' if len(front) == 1 else 'strategies'})")
    return body + notes(str(n) for n in s.extra.get("notes", []) if isinstance(n, str))


def _f(c: Mapping[str, Any], key: str) -> float:
    v = c.get(key)
    return float(v) if isinstance(v, (int, float)) else 0.0


def _front(s: SearchResultView) -> list[Mapping[str, Any]]:
    """The Pareto front by run time (P1 the fastest), as `search --plot` numbers it."""
    return sorted(s.pareto, key=lambda c: _f(c, "run_time_s"))


def _search_scatter(s: SearchResultView) -> str:
    front = {(str(c.get("chip")), c.get("num_chips"), str(c.get("describe")), str(c.get("region")))
             for c in s.pareto}
    marked = [i for i, r in enumerate(s.ranked) if (r.chip, r.num_chips, r.describe, r.region) in front]
    return plots.scatter([units.s_to_days(r.run_time_s) for r in s.ranked], [r.cost_usd for r in s.ranked],
                         [r.emissions_kg_co2e for r in s.ranked], ("run time (days)", "cost (USD)", "kg CO2e"),
                         marked, "ranked strategies and the Pareto front",
                         front=[(units.s_to_days(_f(c, "run_time_s")), _f(c, "cost_usd")) for c in _front(s)],
                         point_labels=[str(i + 1) for i in range(len(s.ranked))],
                         marked_label="ranked and on the front")


def sim_step_section(r: SimStepView, source: str) -> str:
    given = r.extra.get("scenario")  # simulate step --json writes it since issue 17
    scenario = (f"{given + '; ' if isinstance(given, str) else ''}{r.schedule} schedule, pp={r.pp}, vpp={r.vpp}, "
                f"{r.num_micro_batches} micro-batches")
    figs = [("simulated step time", dur(r.step_time_s)), ("predicted (analytical)", dur(r.analytic_step_time_s)),
            ("simulated vs analytical", signed_pct(r.error_vs_analytic)), ("bubble", pct(r.bubble_fraction)),
            ("pipeline", dur(r.pipeline_time_s))]
    rows = [(st.get("stage", i), dur(float(st.get("compute_s", 0.0))), dur(float(st.get("send_s", 0.0))),
             dur(float(st.get("idle_s", 0.0))), f"{float(st.get('slowdown', 1.0)):g}x")
            for i, st in enumerate(r.stages)]
    svg = plots.paired_bars([f"stage {row[0]}" for row in rows], [float(st.get("compute_s", 0.0)) for st in r.stages],
                            [float(st.get("idle_s", 0.0)) for st in r.stages], ("compute", "idle"), "seconds",
                            "compute and idle time per pipeline stage")
    return (provenance("Simulated by greentrain simulate step (discrete events), against the analytical "
                       "prediction; nothing measured", source, scenario)
            + key_figures(figs) + figure(svg, "Per pipeline stage: compute and idle time in one step.")
            + table(("stage", "compute", "send", "idle", "slowdown"), rows, caption="pipeline stages"))


def sim_swarm_section(r: SimSwarmView, source: str) -> str:
    scenario = (f"{r.num_devices} devices train {r.model}, {r.num_tasks_per_round:,} tasks a round, "
                f"scheduler {r.scheduler}")
    times = list(r.round_times_s)
    figs = [("total time", dur(r.total_time_s)), ("rounds", str(len(times))),
            ("mean round", dur(sum(times) / len(times)) if times else "-")]
    rows = [(rd.get("round", i), dur(float(rd.get("time_s", 0.0))), pct(float(rd.get("utilization", 0.0))),
             f"{float(rd.get('bytes_moved', 0.0)) / units.GB:,.2f}", rd.get("requeued", 0))
            for i, rd in enumerate(r.rounds)]
    svg = plots.line(list(range(len(times))), times, ("round", "seconds"), "time per round")
    return (provenance("Simulated by greentrain simulate swarm (discrete events); nothing measured", source,
                       scenario)
            + key_figures(figs) + figure(svg, "Simulated time of each round.")
            + table(("round", "time", "of swarm FLOP/s", "GB moved", "re-queued"), rows, caption="rounds"))


def track_section(t: TrackResult, source: str) -> str:
    x = t.extra
    hw = x.get("gpu_model") or x.get("cpu_model") or "unnamed hardware"
    meters = ", ".join(f"{m.get('name')} {'measured' if m.get('measured') else 'estimated'}" for m in t.meters)
    where = (f"{t.region or 'given grid'} at {t.grid_g_co2e_per_kwh:.0f} g CO2e/kWh"
             if t.grid_g_co2e_per_kwh is not None else "no region or grid intensity (energy only)")
    scenario = (f"{t.num_steps} steps on {hw} ({x.get('world_size', 1)} rank(s)); meters: {meters or 'none'}; "
                f"{where}, PUE {t.pue:g}")
    figs = [("step time", dur(t.step_time_s)), ("tokens/s", f"{t.tokens_per_s:,.1f}"),
            ("FLOP per step", si(t.flop_per_step, "FLOP")), ("FLOP/s", si(t.flop_per_s, "FLOP/s")),
            ("energy per step", f"{t.energy_j_per_step:.3g} J"), ("energy", energy(units.j_to_kwh(t.energy_j))),
            ("CO2e", mass(t.emissions_kg_co2e) if t.emissions_kg_co2e is not None else "needs a region"),
            ("peak memory", gib(t.memory_bytes)), ("average IT power", f"{t.power_w:.1f} W")]
    other = max(t.step_time_s - t.forward_s - t.backward_s, 0.0)
    phases = [("first step (warm-up, FLOP counting)", dur(t.first_step_time_s)), ("steady step", dur(t.step_time_s)),
              ("forward", dur(t.forward_s)), ("backward", dur(t.backward_s)),
              ("optimizer and the rest", dur(other))]
    body = (provenance(f"Measured by greentrain track (status {t.status}); nothing predicted", source, scenario)
            + key_figures(figs) + table(("phase", "time"), phases, caption="phases of a step"))
    if t.modules:
        names = [m.name for m in t.modules]
        body += figure(plots.paired_bars(names, [m.forward_s * 1e3 for m in t.modules],
                                         [m.backward_s * 1e3 for m in t.modules], ("forward", "backward"),
                                         "ms per step", "time per module"),
                       "Measured forward and backward time per module, per step.")
        body += table(("module", "fwd", "bwd", "fwd FLOP", "bwd FLOP", "energy J"),
                      [(m.name, dur(m.forward_s), dur(m.backward_s), si(m.forward_flop, ""), si(m.backward_flop, ""),
                        f"{m.energy_j:.3g}") for m in t.modules], caption="per module, per step")
    return body + notes(str(n) for n in x.get("notes", []) if isinstance(n, str))


def compare_section(c: CompareResult, source: str) -> str:
    rows = [(r.quantity, f"{r.predicted:.4g}", f"{r.measured:.4g}", signed_pct(r.relative_error)) for r in c.rows]
    scored = [r for r in c.rows if r.relative_error is not None]
    body = (provenance("Predicted (greentrain plan) against measured (greentrain track) by greentrain compare",
                       source, "the plan and the measurement given to compare")
            + key_figures([(r.quantity.replace("_", " "), signed_pct(r.relative_error)) for r in c.rows]))
    if scored:
        body += figure(plots.bars([r.quantity for r in scored], [100 * (r.relative_error or 0.0) for r in scored],
                                  "relative error, % ((predicted - measured) / measured)", "prediction error"),
                       "Relative error of each predicted quantity against the measurement.")
    body += table(("quantity", "predicted", "measured", "error"), rows, caption="predicted vs measured")
    return body + notes(c.warnings)


def footprint_section(f: FootprintResult, source: str) -> str:
    x = f.extra
    how = "measured" if x.get("power_measured") else "predicted"
    scenario = (f"{f.num_chips} chips for {dur(f.run_time_s)} at {f.power_w_per_chip:.0f} W each ({how} power); "
                f"{f.region or 'given grid'} at {f.grid_g_co2e_per_kwh:.0f} g CO2e/kWh, PUE {f.pue:.2f}")
    figs = [("energy", energy(f.energy_kwh)), ("CO2e", mass(f.emissions_kg_co2e)),
            ("operational", mass(f.operational_kg_co2e)), ("embodied", mass(f.embodied_kg_co2e)),
            ("cost", f"${num(f.cost_usd)}")]
    body = provenance(f"Priced by greentrain footprint from a {how} power", source, scenario)
    bs = f.best_start
    if bs:
        figs.append(("best start", str(bs.get("best_start_time", ""))))
        body += key_figures(figs) + table(("best start for this job", "value"), [
            ("job length", f"{float(bs.get('job_hours', 0.0)):g} h"), ("start at", bs.get("best_start_time", "")),
            ("mean intensity then", f"{float(bs.get('best_mean_g_co2e_per_kwh', 0.0)):.0f} g/kWh"),
            ("starting now", f"{float(bs.get('now_mean_g_co2e_per_kwh', 0.0)):.0f} g/kWh"),
            ("saving vs now", pct(float(bs.get("saving_vs_now_fraction", 0.0))))])
    else:
        body += key_figures(figs)
    return body + notes(str(n) for n in x.get("notes", []) if isinstance(n, str))


def regions_section(r: RegionsResult, source: str) -> str:
    rows = [(g.co2e_rank, g.region, g.name, f"{g.grid_g_co2e_per_kwh:,.0f}", f"{g.pue:.2f}",
             f"{g.energy_kwh:,.0f}", f"{g.emissions_kg_co2e:,.1f}", f"{g.cost_usd:,.2f}", g.cost_rank)
            for g in r.regions]
    first = r.regions[0] if r.regions else None
    scenario = (f"{first.num_chips} chips for {dur(first.run_time_s)} at {first.power_w_per_chip:.0f} W each"
                if first else "no region")
    figs = [("greenest", str(rows[0][1]) if rows else "-"),
            ("its CO2e", mass(first.emissions_kg_co2e) if first else "-"),
            ("its energy", energy(first.energy_kwh) if first else "-")]
    svg = plots.bars([str(row[1]) for row in rows], [g.emissions_kg_co2e for g in r.regions], "kg CO2e",
                     "CO2e of the run by region")
    return (provenance("Priced by greentrain footprint --compare-regions (predicted)", source, scenario)
            + key_figures(figs) + figure(svg, "The same run's CO2e in each region, greenest first.")
            + table(("#", "region", "name", "grid g/kWh", "PUE", "energy kWh", "CO2e kg", "cost USD", "cost #"),
                    rows, numeric_from=3, caption="regions ranked by CO2e"))


SECTIONS: dict[type[ResultView], tuple[str, Callable[[Any, str], str]]] = {
    PlanResult: ("Plan", plan_section), SearchResultView: ("Search", search_section),
    SimStepView: ("Simulated step", sim_step_section), SimSwarmView: ("Simulated swarm", sim_swarm_section),
    TrackResult: ("Measurement", track_section), CompareResult: ("Predicted vs measured", compare_section),
    FootprintResult: ("Footprint", footprint_section), RegionsResult: ("Regions", regions_section),
}
