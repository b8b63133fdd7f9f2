"""greentrain against Calculon (Isaev et al., SC'23; github.com/calculon-ai/calculon) on the rows of runs CSVs.

Every row is read with greentrain's runs reader (its defaults: the framework's ZeRO stage and recomputation,
dp from the chips, model presets and files), predicted by greentrain (`greentrain validate`'s prediction) and,
where Calculon's LLM model can express it, converted to Calculon's application and execution JSON with one of
its shipped system files and run through `calculon.llm.Llm`. Printed per file: the rows both score, each tool's
mean |predicted / measured tokens per second - 1| on them, how often greentrain is closer; then the same on the
rows Calculon expresses without an approximation (ZeRO-3 as optimizer sharding, op-level SAC as attention-only
recomputation, another chip variant as its base part).

Calculon is not a greentrain dependency: pass a checkout of its source (its own requirements installed):

    git clone https://github.com/calculon-ai/calculon /tmp/calculon
    .venv/bin/python benchmarks/vs_calculon.py --calculon /tmp/calculon tests/data/calibration/korthikanti*.csv

Conversion (Calculon's conventions; nothing tuned): Calculon has no gated MLP (its feed-forward width is 1.5x the
model's, the same FLOPs and parameters), no grouped-query attention (run as multi-head), no MoE, context
parallelism, sliding windows, state-space layers or fine-tuning (skipped, with the reason); bf16 runs use its
float16 tensor rate (the same on these parts); ranks are ordered tp, dp, pp over its two network tiers (8 per
node); data-parallel overlap is on for every framework but 2022 Megatron-LM (`megatron`) unless
--no-data-par-overlap. On Korthikanti et al. 2022 Table 5 with --no-fused-activation the converter gives
Calculon's own validation inputs (its `calculon llm-validation`, 3.65 % mean).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greentrain.calibrate.runs import Run, read_runs
from greentrain.calibrate.validate import measured_step_time_s, predict, run_efficiency
from greentrain.estimate.efficiency import efficiency_for, framework_names

SYSTEMS = {"a100-80gb": "a100_80g", "h100-sxm": "h100_80g_nvl8"}  # greentrain chip -> Calculon systems/*.json
SYSTEMS_APPROX = {"h100-sxm-96gb": "h100_80g_nvl8"}  # the same die and NVLink, other memory
CALCULON_NODE = 8  # network tier 0 (NVLink) of every shipped system file


@dataclass(frozen=True, slots=True, kw_only=True)
class Converted:
    """One row as Calculon's inputs, or why Calculon cannot express it (``skip``)."""

    app: dict[str, Any] = field(default_factory=dict)
    exe: dict[str, Any] = field(default_factory=dict)
    system: str = ""
    approximations: tuple[str, ...] = ()
    skip: str = ""


def _unsupported(run: Run) -> str:
    m, st, wl = run.scenario.model, run.strategy, run.scenario.workload
    checks = ((m.arch != "decoder", "encoder-decoder model"), (m.is_moe, "MoE model"),
              (m.is_mla, "multi-head latent attention"),
              (m.ssm != "none" or bool(m.layer_pattern), "state-space layers"),
              (bool(m.num_mtp_layers), "multi-token prediction"), (bool(m.sliding_window), "sliding-window attention"),
              (st.cp > 1, f"context parallelism cp={st.cp}"), (st.ep > 1, f"expert parallelism ep={st.ep}"),
              (wl.finetune.mode != "full", f"fine-tuning ({wl.finetune.mode})"),
              (bool(st.offload_activations), "partial activation offload"),
              (wl.precision not in ("bf16", "fp16", "fp8"), f"precision {wl.precision}"))
    return next((why for bad, why in checks if bad), "")


def _recompute(run: Run) -> tuple[str, str]:
    """Calculon's activation_recompute for the row, and an approximation note ("" exact; "!" cannot)."""
    st = run.strategy
    if st.recompute in ("none", "full"):
        return st.recompute, ""
    mode = run.selective_recompute or (efficiency_for("", run.framework).selective_recompute
                                       if run.framework in framework_names() else "attention")
    if mode in ("attention", "core_attn"):
        return "attn_only", ""
    if mode == "layer-1":
        return "full", ""
    if mode == "op":
        return "attn_only", "op-level SAC as attn_only"
    return "", f"!selective recompute '{mode}'"


def convert(run: Run, system_config: dict[str, Any] | None, *, fused_activation: bool = True,
            data_par_overlap: bool = True) -> Converted:
    """``system_config``: the parsed systems/<name>.json of the row's chip (None: look at the name only)."""
    sc, st, m, wl = run.scenario, run.strategy, run.scenario.model, run.scenario.workload
    chip = sc.cluster.chip.name
    if why := _unsupported(run):
        return Converted(skip=why)
    approx: list[str] = []
    system = SYSTEMS.get(chip) or SYSTEMS_APPROX.get(chip, "")
    if not system:
        return Converted(skip=f"no Calculon system file for chip {chip}")
    if chip in SYSTEMS_APPROX:
        approx.append(f"chip {chip} as {system}")
    datatype = "float8" if wl.precision == "fp8" else "float16"  # bf16: the same tensor-core rate
    if system_config is not None and datatype not in system_config.get("matrix", {}):
        return Converted(skip=f"precision {wl.precision}: {system} has no {datatype}")
    recompute, note = _recompute(run)
    if note.startswith("!"):
        return Converted(skip=note[1:] + " has no Calculon equivalent")
    approx += [note] if note else []
    if st.zero >= 3:
        approx.append("ZeRO-3 as optimizer_sharding (no per-layer weight all-gather)")
    cpn = min(sc.cluster.chips_per_node, CALCULON_NODE)
    sp = bool(st.sp) and st.tp > 1
    app = {"hidden": m.hidden_size, "feedforward": m.ffn_hidden_size * 3 // 2 if m.glu else m.ffn_hidden_size,
           "seq_size": wl.seq_len, "attn_heads": m.num_heads, "attn_size": m.head_dim, "num_blocks": m.num_layers}
    exe = {"num_procs": sc.cluster.num_chips, "tensor_par": st.tp, "pipeline_par": st.pp, "data_par": st.dp,
           "tensor_par_net": int(st.tp > cpn), "data_par_net": int(st.tp * st.dp > cpn),
           "pipeline_par_net": int(st.tp * st.dp * st.pp > cpn),
           "batch_size": wl.global_batch_size, "microbatch_size": st.micro_batch_size, "datatype": datatype,
           "fused_activation": fused_activation,
           "attention_type": "multiquery" if m.num_kv_heads == 1 < m.num_heads else "multihead",
           "activation_recompute": recompute, "pipeline_interleaving": st.vpp,
           "optimizer_sharding": st.zero >= 1 and st.dp > 1, "tensor_par_comm_type": "rs_ag" if sp else "ar",
           "tensor_par_overlap": "none", "seq_par_ag_redo": sp and recompute != "full",
           "data_par_overlap": data_par_overlap and st.dp > 1 and (run.framework or "megatron") != "megatron",
           "weight_offload": False, "activations_offload": False, "optimizer_offload": False, "training": True}
    return Converted(app=app, exe=exe, system=system, approximations=tuple(approx))


def calculon_step_s(calculon_dir: Path, c: Converted) -> float | None:
    """Calculon's step time of a converted row (None: Calculon refuses it). The time is computed before its
    memory check, so a row Calculon says would not fit (which ran) is still timed."""
    from calculon.io import read_json_file
    from calculon.llm import Llm
    from calculon.system import System

    syst = System(read_json_file(str(calculon_dir / "systems" / f"{c.system}.json")))
    try:
        model = Llm(Llm.Application(c.app), logging.getLogger("calculon"))
        model.compile(syst, Llm.Execution.from_json(c.exe))
    except (Llm.Error, AssertionError):
        return None
    try:
        model.run(syst)
    except Llm.Error as e:
        if not str(e).startswith("Mem tier"):
            return None
    except AssertionError:
        return None
    return float(model.get_total_time())


def _mean_abs_pct(xs: list[float]) -> str:
    return f"{100 * sum(map(abs, xs)) / len(xs):.1f} %" if xs else "-"


def score_file(path: Path, calculon_dir: Path, fused: bool, overlap: bool) -> list[tuple[float, float, bool]]:
    """(greentrain error, Calculon error, exact conversion) of every row both score."""
    import json

    out = []
    for run in read_runs(path):
        t_meas = measured_step_time_s(run)
        if not (run.measured.ran and t_meas):
            continue
        p = predict(run, run_efficiency(run))
        chip = run.scenario.cluster.chip.name
        sys_path = calculon_dir / "systems" / f"{SYSTEMS.get(chip) or SYSTEMS_APPROX.get(chip, '')}.json"
        c = convert(run, json.loads(sys_path.read_text()) if sys_path.is_file() else None, fused_activation=fused,
                    data_par_overlap=overlap)
        t_cal = None if c.skip else calculon_step_s(calculon_dir, c)
        if p.throughput_error is not None and t_cal:
            out.append((p.throughput_error, t_meas / t_cal - 1.0, not c.approximations))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="runs CSVs (docs/runs-csv.md)")
    ap.add_argument("--calculon", type=Path, required=True, help="a checkout of calculon-ai/calculon")
    ap.add_argument("--no-fused-activation", action="store_true")
    ap.add_argument("--no-data-par-overlap", action="store_true")
    a = ap.parse_args(argv)
    if not (a.calculon / "calculon" / "llm").is_dir():
        print(f"vs_calculon: --calculon={a.calculon}: not a Calculon checkout (no calculon/llm)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(a.calculon))
    print("| file | both score | greentrain | Calculon | greentrain closer | exact rows: both | greentrain | "
          "Calculon |")
    print("|---|---|---|---|---|---|---|---|")
    every: list[tuple[float, float, bool]] = []
    for path in a.runs:
        rows = score_file(path, a.calculon, not a.no_fused_activation, not a.no_data_par_overlap)
        every += rows
        _row(path.stem, rows)
    _row("all", every)
    return 0


def _row(name: str, rows: list[tuple[float, float, bool]]) -> None:
    g, c = [r[0] for r in rows], [r[1] for r in rows]
    exact = [r for r in rows if r[2]]
    closer = sum(abs(x) < abs(y) for x, y in zip(g, c, strict=True))
    print(f"| {name} | {len(rows)} | {_mean_abs_pct(g)} | {_mean_abs_pct(c)} | {closer} | {len(exact)} | "
          f"{_mean_abs_pct([r[0] for r in exact])} | {_mean_abs_pct([r[1] for r in exact])} |")


if __name__ == "__main__":
    raise SystemExit(main())
