"""`greentrain plan` output: a Rich table and the same numbers as JSON (units in every key)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from greentrain.estimate.run import RunEstimate
from greentrain.model.ops import active_params_without_input_embedding, trainable_params
from greentrain.report.formats import dur, gib, mass, num


def _training(run: RunEstimate) -> dict[str, Any]:
    """Which parameters train (workload.finetune) and how many."""
    from greentrain.estimate.state_dtypes import workload_finetune

    spec, ft = run.scenario.model, workload_finetune(run.scenario.workload, _eff(run))
    trainable = trainable_params(spec, ft)
    if ft.mode == "lora":
        said = "" if run.scenario.workload.finetune.lora_dtype else " (the framework's)"
        dtype = {"model": "the model's dtype", "fp32-autocast": "fp32 under autocast"}.get(str(ft.lora_dtype), "fp32")
        summary = f"LoRA rank {ft.lora_rank} on {','.join(ft.lora_targets)}, adapters in {dtype}{said}" \
            + (f", dropout {ft.lora_dropout:g}" if ft.lora_dropout else "")
    elif ft.mode == "freeze":
        summary = f"frozen: {', '.join(ft.freeze)}"
    else:
        summary = "full (every parameter trains)"
    return {"mode": ft.mode, "freeze": list(ft.freeze), "lora_rank": ft.lora_rank if ft.mode == "lora" else 0,
            "lora_targets": list(ft.lora_targets) if ft.mode == "lora" else [],
            "lora_dtype": ft.lora_dtype if ft.mode == "lora" else None,
            "lora_dropout": ft.lora_dropout if ft.mode == "lora" else 0.0, "trainable_params": trainable,
            "summary": f"{summary}; {trainable / 1e6:,.1f} M trainable parameters"}


def plan_to_dict(run: RunEstimate, *, default_batch: bool = False) -> dict[str, Any]:
    """``default_batch``: the global batch is the built-in default, not the user's (the output says so)."""
    sc, st, fp, s = run.scenario, run.step, run.footprint, run.strategy
    return {
        "model": sc.model.name,
        "num_params": sc.model.num_params(),
        "num_active_params": sc.model.num_active_params(),  # greentrain's count: the input embedding included
        "num_active_params_without_input_embedding": active_params_without_input_embedding(sc.model),  # cards'
        "chip": sc.cluster.chip.name,
        "num_chips": sc.cluster.num_chips,
        "chips_per_node": sc.cluster.chips_per_node,
        "strategy": {**s.to_dict(), "chosen_by_planner": run.strategy_chosen},
        "precision": sc.workload.precision,
        "fp8_recipe": _fp8_recipe(run),  # "" unless fp8 (estimate/fp8.py: the run's, else its framework's)
        "fp8_weights": _fp8_weights(run),  # the weights kept and gathered in fp8: the run's, else its framework's
        "grad_dtype": _grad_dtype(run),  # the gradient buffer's (estimate/state_dtypes.py, as the estimate took it)
        "grad_dtype_is_framework_default": not sc.workload.grad_dtype,
        "optimizer_state": _optimizer_state(run),  # moments' dtype, master copy: the run's, else its framework's
        "global_batch_size": sc.workload.global_batch_size,
        "global_batch_is_default": default_batch,
        "seq_len": sc.workload.seq_len,
        "training": _training(run),
        "step_time_s": st.step_time_s,
        "step_breakdown_s": {
            "compute": st.compute_time_s - st.recompute_time_s - st.offload_wait_time_s,
            "recompute": st.recompute_time_s, "offload_wait": st.offload_wait_time_s,
            "tp_comm": st.tp_comm_time_s, "cp_comm": st.cp_comm_time_s, "ep_comm": st.ep_comm_time_s,
            "pp_comm": st.pp_comm_time_s, "dp_comm": st.dp_comm_time_s, "grad_accum": st.grad_accum_time_s,
            "host_wait": st.host_wait_time_s, "bubble": st.bubble_time_s, "optimizer": st.optimizer_time_s,
        },
        "num_micro_batches": st.num_micro_batches,
        "tokens_per_step": st.tokens_per_step,
        "tokens_per_s": st.tokens_per_s,
        "flop_per_step": st.model_flop_per_step,
        "hardware_flop_per_step": st.hardware_flop_per_step,
        "mfu": st.mfu,
        "hfu": st.hfu,
        "utilization": st.utilization,
        "memory_bytes_per_device": _memory(run),
        "num_steps": run.num_steps,
        "train_tokens": run.train_tokens,
        "run_time_s": run.run_time_s,
        "device_hours": fp.device_hours,
        "power_w_per_chip": fp.power_w_per_chip,
        "host_power_w_per_chip": fp.host_power_w_per_chip,
        "energy_kwh": fp.energy_kwh,
        "cost_usd": fp.cost_usd,
        "cost_basis": fp.cost_basis,
        "emissions_kg_co2e": fp.emissions_kg_co2e,
        "operational_kg_co2e": fp.operational_kg_co2e,
        "embodied_kg_co2e": fp.embodied_kg_co2e,
        "region": sc.site.region,
        "grid_g_co2e_per_kwh": sc.site.grid_g_co2e_per_kwh,
        "pue": sc.site.pue,
        "efficiency": _efficiency(run),
        "error_band": error_band(run),
    }


def error_band(run: RunEstimate) -> dict[str, Any]:
    """How far to trust the prediction: the throughput error band of the closest validated class
    (calibrate/bands.py); ``outside`` when the scenario is outside every validated class."""
    from greentrain.calibrate.bands import scenario_band

    match = scenario_band(run.scenario, run.efficiency.framework if run.efficiency else "", run.step.compute_share)
    b = match.band
    return {"summary": match.describe(), "outside": match.outside, "how": match.how,
            "band": b.band if b else None, "runs": b.runs if b else 0, "class": b.label if b else ""}


def _memory(run: RunEstimate) -> dict[str, float]:
    mem = run.step.memory
    return {"total": mem.total_bytes, "weights": mem.weights_bytes, "gradients": mem.gradients_bytes,
            "optimizer": mem.optimizer_bytes, "activations": mem.activations_bytes,
            "temporary": mem.temporary_bytes, "reserved": mem.reserved_bytes,
            "capacity": run.step.memory_capacity_bytes, "host_offloaded": mem.host_bytes}


def _fp8_recipe(run: RunEstimate) -> str:
    from greentrain.estimate import fp8

    w = run.scenario.workload
    return fp8.recipe_for(w.precision, w.fp8_recipe, run.efficiency.framework if run.efficiency else "megatron",
                          run.scenario.cluster.chip.name)


def _grad_dtype(run: RunEstimate) -> str:
    from greentrain.estimate.state_dtypes import workload_grad_dtype

    return workload_grad_dtype(run.scenario.workload, _eff(run))


def _eff(run: RunEstimate) -> Any:
    from greentrain.estimate.efficiency import efficiency_for

    return run.efficiency or efficiency_for(run.scenario.cluster.chip.name)


def _fp8_weights(run: RunEstimate) -> bool:
    from greentrain.estimate.state_dtypes import workload_fp8_weights

    return workload_fp8_weights(run.scenario.workload, _eff(run))


def _optimizer_state(run: RunEstimate) -> dict[str, Any]:
    """The optimizer moments' dtype and the master copy the estimate used (estimate/memory.py: the run's, else
    its framework's precision recipe)."""
    from greentrain.estimate.state_dtypes import workload_master_weights, workload_optimizer_dtype

    w, eff = run.scenario.workload, _eff(run)
    return {"optimizer_dtype": workload_optimizer_dtype(w, eff), "master_weights": workload_master_weights(w, eff),
            "is_framework_default": not w.optimizer_dtype and w.master_weights is None}


def _state_text(run: RunEstimate, state: dict[str, Any]) -> str:
    text = f"{state['optimizer_dtype']} moments, " + ("an fp32 master copy" if state["master_weights"] else
                                                      "no fp32 master (pure bf16)")
    if not state["is_framework_default"]:
        return text
    framework = run.efficiency.framework if run.efficiency else "megatron"
    return f"{text} ({framework}'s default; --optimizer-dtype, --master-weights to change)"


def _grad_text(run: RunEstimate, dtype: str) -> str:
    if run.scenario.workload.grad_dtype:
        return dtype
    framework = run.efficiency.framework if run.efficiency else "megatron"
    return f"{dtype} ({framework}'s default; --grad-dtype to change)"


def _fp8_text(run: RunEstimate, recipe: str, weights: bool) -> str:
    w = run.scenario.workload
    text = recipe + ("" if w.fp8_recipe else " (the framework's default; --fp8-recipe to change)")
    said = "" if w.fp8_weights is not None else ", the framework's default"
    return text + (f"; weights kept and gathered in fp8 (--fp8-weights{said})" if weights else "")


def _efficiency(run: RunEstimate) -> dict[str, Any]:
    """What the prediction rests on: the framework profile and whether the chip has microbenchmark data."""
    eff, chip = run.efficiency, run.scenario.cluster.chip.name
    if eff is None:
        return {}
    return {"framework": eff.framework, "chip_has_data": eff.chip_has_data, "chip_source": eff.chip_source,
            "calibrated": "calibrated by" in eff.chip_source, "selective_recompute": eff.selective_recompute,
            "summary": f"{eff.framework} profile; " + (f"{chip} microbenchmarks" if eff.chip_has_data else
                                                      f"no microbenchmark data for {chip}: A100 figures used")}


def _step_table(d: dict[str, Any], step_time_s: float) -> Table:
    t = Table(title="time per step (slowest pipeline stage)", show_header=True, header_style="bold")
    t.add_column("per step", justify="left")
    t.add_column("time", justify="right")
    t.add_column("share", justify="right")
    for name, value in d["step_breakdown_s"].items():
        if value > 0 or name in ("compute",):
            t.add_row(name.replace("_", " "), dur(value), f"{value / step_time_s:6.1%}")
    t.add_row("[bold]step[/bold]", f"[bold]{dur(step_time_s)}[/bold]", "100.0%")
    return t


def render_plan(run: RunEstimate, console: Console, *, default_batch: bool = False) -> None:
    d = plan_to_dict(run, default_batch=default_batch)
    sc, st = run.scenario, run.step
    active = (f", {sc.model.num_active_params() / 1e9:.2f} B active with the input embedding, "
              f"{active_params_without_input_embedding(sc.model) / 1e9:.2f} B without (model cards' count)"
              if sc.model.is_moe else "")
    title = (f"{sc.model.name} ({sc.model.num_params() / 1e9:.2f} B params{active}) on {sc.cluster.num_chips} x "
             f"{sc.cluster.chip.name}; {run.strategy.describe()}"
             + (" (chosen by the planner)" if run.strategy_chosen else ""))
    console.print(f"[bold]{title}[/bold]")
    console.print(_step_table(d, st.step_time_s))
    m = Table(title="memory per device", show_header=True, header_style="bold")
    m.add_column("part")
    m.add_column("size", justify="right")
    for k, v in d["memory_bytes_per_device"].items():
        if k not in ("capacity", "host_offloaded") or v:
            m.add_row(k.replace("_", " "), gib(v))
    console.print(m)
    r = Table(title="throughput and footprint", show_header=False)
    r.add_column("metric")
    r.add_column("value", justify="right")
    rows = [
        ("MFU / HFU", f"{st.mfu:.1%} / {st.hfu:.1%}"),
        ("tokens/s", f"{st.tokens_per_s:,.0f}"),
        ("batch", f"{d['global_batch_size']:,} sequences x {d['seq_len']:,} tokens"
                  + (" (the default: set global_batch_size)" if default_batch else "")),
        ("training", d["training"]["summary"]), ("gradients", _grad_text(run, d["grad_dtype"])),
        ("optimizer state", _state_text(run, d["optimizer_state"])),
        ("steps", f"{run.num_steps:,} x {st.tokens_per_step:,} tokens"),
        ("run time", dur(run.run_time_s)),
        ("device-hours", num(d["device_hours"])),
        ("power per chip (+ host)", f"{d['power_w_per_chip']:.0f} W (+ {d['host_power_w_per_chip']:.0f} W)"),
        ("energy", f"{num(d['energy_kwh'])} kWh (PUE {d['pue']:.2f})"),
        ("cost", f"${num(d['cost_usd'])} ({d['cost_basis']})"),
        ("CO2e", f"{mass(d['emissions_kg_co2e'])} (operational {mass(d['operational_kg_co2e'])}, "
                 f"embodied {mass(d['embodied_kg_co2e'])})"),
        ("grid", f"{d['grid_g_co2e_per_kwh']:.0f} g CO2e/kWh" + (  # a given intensity is not the region's own
            f" (custom intensity, not {d['region']}'s grid)" if d["region"] and run.scenario.site.source ==
            "given" else f" ({d['region']})" if d["region"] else " (custom intensity)")),
    ]
    rows += [("fp8 recipe", _fp8_text(run, d["fp8_recipe"], d["fp8_weights"]))] if d["fp8_recipe"] else []
    if d["efficiency"]:
        rows.append(("efficiency", d["efficiency"]["summary"]))
        if run.strategy.recompute == "selective":  # what the framework's selective recomputation repeats and frees
            rows.append(("selective recompute", f"{d['efficiency']['selective_recompute']} (--selective-recompute "
                                                "to change; `greentrain catalog frameworks`)"))
    rows.append(("expected error", d["error_band"]["summary"]))
    if run.strategy_chosen:
        from greentrain.search.engine import DEFAULT_MEMORY_HEADROOM, TIE_TOLERANCE

        rows.append(("planner", f"leaves {DEFAULT_MEMORY_HEADROOM:.0%} of device memory free by default "
                                f"(--memory-headroom); times within {TIE_TOLERANCE:.0%} of the fastest count as "
                                "ties, the one with the most free memory wins, then the least CO2e"))
    for k, v in rows:
        r.add_row(k, v)
    console.print(r)
