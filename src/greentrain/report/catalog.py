"""`greentrain catalog` output: what greentrain knows (chips, models, regions, links, frameworks, pipeline
schedules) as Rich tables or JSON.

The tables show human units (TFLOP/s, GiB, TB/s, $/h); the JSON records are the SI, unit-named fields of the
dataclasses themselves (``peak_bf16_flop_per_s``, ``memory_bytes``, ``bytes_per_s``). Every figure comes from
the catalogs (hardware/catalog/*.yaml, model/presets/*.yaml, footprint/data/*.csv, estimate/efficiency.yaml) and
the pipeline schedule records (parallel/schedules.py), which name their sources;
this module only selects and formats.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from rich.table import Table

from greentrain import units
from greentrain.hardware.catalog import chips, links
from greentrain.hardware.chip import Chip, Link
from greentrain.model.load import load_preset, preset_names
from greentrain.model.ops import active_params_without_input_embedding
from greentrain.model.spec import TransformerSpec


# ---- formatting helpers --------------------------------------------------------------------------------
def _num(x: float, digits: int = 1) -> str:
    """A figure for a table; '-' for 0, which the catalogs use for 'unknown' or 'not supported'."""
    return f"{x:,.{digits}f}" if x else "-"


def _table(title: str, columns: tuple[str, ...], left: tuple[str, ...]) -> Table:
    """A table whose ``left`` columns are left-aligned (the rest are numbers); the first never wraps."""
    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if col in left else "right", no_wrap=i == 0)
    return table


def _record(obj: Any) -> dict[str, Any]:
    """A dataclass as a JSON object (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(obj).items()}


# ---- chips ----------------------------------------------------------------------------------------------
def _bf16_cell(chip: Chip) -> str:
    """The bf16 peak; chips without bf16 (V100, T4) show their fp16 tensor rate, marked."""
    if chip.peak_bf16_flop_per_s:
        return _num(chip.peak_bf16_flop_per_s / units.TFLOP)
    return f"{_num(chip.peak_fp16_flop_per_s / units.TFLOP)} (fp16)"


def _chips() -> tuple[list[dict[str, Any]], Table]:
    table = _table("Chips (dense peaks; sources in hardware/catalog/chips.yaml)",
                   ("name", "vendor", "bf16 TFLOP/s", "fp8 TFLOP/s", "memory GiB", "bandwidth TB/s", "TDP W",
                    "price $/h", "node"), left=("name", "vendor", "node"))
    records = []
    for chip in chips().values():
        records.append(_record(chip))
        node = f"{chip.chips_per_node} x {chip.intra_node_link or '-'}, {chip.inter_node_link or '-'}"
        table.add_row(chip.name, chip.vendor, _bf16_cell(chip), _num(chip.peak_fp8_flop_per_s / units.TFLOP),
                      _num(units.bytes_to_gib(chip.memory_bytes), 0),
                      _num(chip.memory_bytes_per_s / units.TB, 2), _num(chip.tdp_w, 0),
                      _num(chip.price_usd_per_s * units.HOUR_S, 2), node)
    return records, table


# ---- models ---------------------------------------------------------------------------------------------
def _model_record(spec: TransformerSpec) -> dict[str, Any]:
    fields = ("name", "family", "arch", "num_layers", "num_encoder_layers", "hidden_size", "num_heads",
              "num_kv_heads", "ffn_hidden_size", "vocab_size", "num_experts", "top_k")
    record: dict[str, Any] = {f: getattr(spec, f) for f in fields}
    record.update(num_params=spec.num_params(), num_active_params=spec.num_active_params(),
                  num_active_params_without_input_embedding=active_params_without_input_embedding(spec))
    return record


def _models() -> tuple[list[dict[str, Any]], Table]:
    table = _table("Model presets (model/presets/*.yaml; parameters from TransformerSpec.num_params; active: "
                   "greentrain's count, with the input embedding; card: without it, as model cards count)",
                   ("name", "family", "arch", "layers", "hidden", "heads/kv", "experts", "params B",
                    "active B", "active B (card)"),
                   left=("name", "family", "arch"))
    records = []
    for name in preset_names():
        spec = load_preset(name)
        records.append(_model_record(spec))
        layers = (f"{spec.num_encoder_layers}+{spec.num_layers}" if spec.arch == "encoder-decoder"
                  else str(spec.num_layers))
        experts = f"{spec.num_experts} top-{spec.top_k}" if spec.is_moe else "-"
        table.add_row(spec.name, spec.family, spec.arch, layers, str(spec.hidden_size),
                      f"{spec.num_heads}/{spec.num_kv_heads}", experts, f"{spec.num_params() / 1e9:,.2f}",
                      f"{spec.num_active_params() / 1e9:,.2f}",
                      f"{active_params_without_input_embedding(spec) / 1e9:,.2f}")
    return records, table


# ---- frameworks -----------------------------------------------------------------------------------------
def _frameworks() -> tuple[list[dict[str, Any]], Table]:
    from greentrain.estimate import fp8
    from greentrain.estimate.efficiency import efficiency_for, framework_names, offload_block, offload_framework_names

    table = _table("Frameworks (estimate/efficiency.yaml; kernel efficiency: fitted where the source says so; "
                   "offload: activations to host memory, and its executor's knobs for `greentrain offload`)",
                   ("name", "attention", "loss", "selective saves", "ZeRO", "beside dp", "overlap", "kernel eff.",
                    "precision", "offload", "source"),
                   left=("name", "attention", "loss", "selective saves", "ZeRO", "beside dp", "overlap", "precision",
                         "offload", "source"))
    records = []
    offloaded = offload_framework_names()
    for name in framework_names():
        e = efficiency_for("", name)
        block = offload_block(name) if name in offloaded else None
        records.append({"name": name, "attention_kernel": e.attention_kernel, "loss_kernel": e.loss_kernel,
                        "selective_recompute": e.selective_recompute, "default_recompute": e.default_recompute,
                        "zero_stages": list(e.zero_stages), "parallelisms": list(e.parallelisms),
                        "optimizer_offload": e.optimizer_offload, "activation_offload": e.activation_offload,
                        "dp_overlap": e.dp_overlap,
                        "kernel_efficiency": e.kernel_efficiency, "host_layer_s": e.host_layer_s,
                        "precision_recipe": e.precision_recipe, "fp8_recipe": fp8.framework_recipe(name),
                        "fp8_saves_inputs": e.fp8_saves_inputs, "fp8_weights": e.fp8_weights,
                        "lora_dtype": e.lora_dtype,
                        "elementwise": {"eager_ops": list(e.eager_ops), "moe_fused_ops": list(e.moe_fused_ops),
                                        "fused_glu": e.fused_glu, "scaled_rope_fused": e.scaled_rope_fused,
                                        "grads_set_to_none": e.grads_set_to_none,
                                        "eager_indexed": e.eager_indexed},
                        "moe": {"overlap": e.moe_overlap, "dispatch_fp8": e.moe_dispatch_fp8,
                                "node_forwarding": e.moe_node_forwarding,
                                "host_sync": e.moe_host_sync, "sender_permutes": e.moe_sender_permutes,
                                "grouped_gemm": e.moe_grouped_gemm},
                        "offload": block, "source": e.framework_source,
                        "attention_source": e.attention_source})
        table.add_row(name, e.attention_kernel, e.loss_kernel, e.selective_recompute,
                      ",".join(map(str, e.zero_stages)), ",".join(e.parallelisms) or "-",
                      "yes" if e.dp_overlap else "no",
                      f"{e.kernel_efficiency:.2f}", f"{e.precision_recipe}; fp8 {fp8.framework_recipe(name)}"
                      + (", fp8 weights" if e.fp8_weights else "")
                      + (f"; LoRA {e.lora_dtype}" if e.lora_dtype != "model" else ""),
                      "; ".join(x for x in ("activations" if e.activation_offload else "",
                                            f"executor (optimizer: {block['optimizer_on']})" if block else "") if x),
                      e.framework_source)
    return records, table


# ---- pipeline schedules ---------------------------------------------------------------------------------
# The shape each record's rules are shown at: 8 pipeline stages, 16 micro-batches per step, and 2 model chunks per
# device for a schedule that interleaves (a common Megatron-LM setting; any shape would do, the rules are the
# records')
_SHOWN_PP, _SHOWN_MICRO, _SHOWN_VPP = 8, 16, 2


def _doc(rule: Callable[..., Any]) -> str:
    """A rule's docstring on one line: what it computes and its source."""
    return " ".join((rule.__doc__ or "").split())


def _schedules() -> tuple[list[dict[str, Any]], Table]:
    from greentrain.parallel.schedules import PIPELINE_SCHEDULES

    table = _table(f"Pipeline schedules (parallel/schedules.py; bubble and held at pp {_SHOWN_PP}, "
                   f"{_SHOWN_MICRO} micro-batches, vpp {_SHOWN_VPP} where interleaved)",
                   ("name", "what it runs", "model chunks", "micro-batches", "searched",
                    "bubble (micro-batch times)", "held by stage 0 (micro-batches)", "source"),
                   left=("name", "what it runs", "model chunks", "micro-batches", "searched", "source"))
    records = []
    for r in PIPELINE_SCHEDULES.values():
        vpp = _SHOWN_VPP if r.interleaved else 1
        bubble = float(r.bubble(_SHOWN_PP, vpp))  # in micro-batch times
        held = float(r.held(0, _SHOWN_PP, vpp, _SHOWN_MICRO))  # micro-batches of activations on the first stage
        records.append({"name": r.name, "help": r.help, "interleaved": r.interleaved,
                        "micro_batch_multiple_of_pp": r.micro_batch_multiple_of_pp, "searched": r.searched,
                        "source": r.source, "bubble_rule": _doc(r.bubble), "held_rule": _doc(r.held),
                        "order_rule": _doc(r.order),
                        "shown_at": {"pp": _SHOWN_PP, "vpp": vpp, "num_micro_batches": _SHOWN_MICRO},
                        "bubble_micro_batches": bubble, "held_micro_batches_stage_0": held})
        table.add_row(r.name, r.help, "vpp > 1" if r.interleaved else "1",
                      "multiple of pp" if r.micro_batch_multiple_of_pp else "any", "yes" if r.searched else "no",
                      f"{bubble:.2f}", f"{held:.2f}", r.source)
    return records, table


# ---- links ----------------------------------------------------------------------------------------------
def _links() -> tuple[list[dict[str, Any]], Table]:
    table = _table("Links (per chip, per direction; sources in hardware/catalog/links.yaml)",
                   ("name", "kind", "GB/s", "Gbit/s", "latency us", "ring step us"), left=("name", "kind"))
    records = []
    link: Link
    for link in links().values():
        records.append(_record(link))
        step = "" if link.kind in ("intra-node", "host") else _num(link.ring_step_overhead_s * 1e6, 1)  # networks
        table.add_row(link.name, link.kind, _num(link.bytes_per_s / units.GB, 2),
                      _num(link.bytes_per_s / units.GBIT, 0), _num(link.latency_s * 1e6, 1), step)
    return records, table


# ---- regions --------------------------------------------------------------------------------------------
def _regions() -> tuple[list[dict[str, Any]], Table]:
    from greentrain.footprint.regions import list_regions  # imported here: only this branch needs it

    table = _table("Regions (footprint/data/*.csv; every row names its source and year)",
                   ("code", "name", "kind", "provider", "g CO2e/kWh", "PUE", "$/kWh", "year"),
                   left=("code", "name", "kind", "provider"))
    records = []
    for region in list_regions():
        records.append(_record(region))
        table.add_row(region.code, region.name, region.kind, region.provider or "-",
                      f"{region.grid_g_co2e_per_kwh:,.0f}", f"{region.pue:.2f}",
                      _num(region.electricity_usd_per_kwh, 3), str(region.year))
    return records, table


_LISTERS: dict[str, Callable[[], tuple[list[dict[str, Any]], Table]]] = {
    "chips": _chips, "models": _models, "regions": _regions, "links": _links, "frameworks": _frameworks,
    "schedules": _schedules,
}
KINDS = tuple(_LISTERS)


def catalog_listing(kind: str) -> tuple[list[dict[str, Any]], Table]:
    """One catalog as JSON records (the dataclasses' SI, unit-named fields) and as a table (human units)."""
    return _LISTERS[kind]()
