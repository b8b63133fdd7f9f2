"""fp8 training as it runs (data: estimate/fp8.yaml): what fp8 GEMMs reach on a chip, and the memory-bound
quantization kernels an fp8 recipe adds around every GEMM, so that fp8 costs what it costs rather than half
the bf16 time.

- ``gemm_ratio(chip)``: the fp8 GEMM's maximum achievable fraction of the fp8 peak over the bf16 one, both from
  the same microbenchmark table (MAMF, ml-engineering; AMD MAF for MI300X). estimate/compute.py runs fp8 GEMMs
  on the bf16 efficiency curve times the fp8 peak times this ratio (H100 0.88, B200 0.98).
- ``Recipe``: the bytes a recipe's quantization moves per element of the forward GEMM's activation input and
  of the backward's output gradient (tensorwise current scaling, delayed, rowwise, MXFP8); the GEMMs that
  stay bf16 (attention core, LM head, router) have none (compute.compute_peaks decides which run in fp8).
- ``recipe_for``: which recipe a run uses: the workload's ``fp8_recipe``, else its framework's default (the
  ``fp8_recipe`` knob of its efficiency.yaml record); MXFP8 only on chips whose tensor cores take block scales
  (``mxfp8_chips``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from greentrain.errors import ConfigError, did_you_mean
from greentrain.estimate.efficiency import DEFAULT_FP8_RECIPE, efficiency_for

DEFAULT_RECIPE = DEFAULT_FP8_RECIPE


@cache
def _data() -> dict[str, Any]:
    text = resources.files("greentrain.estimate").joinpath("fp8.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def gemm_ratio(chip: str) -> float:
    """fp8 GEMM efficiency over the bf16 one on ``chip`` (a catalog name); 1 where no figure is published."""
    entry = _data()["chips"].get(chip)
    if not entry:
        return 1.0
    return float(entry["fp8_matmul_max"]) / float(entry["bf16_matmul_max"])


def chip_source(chip: str) -> str:
    entry = _data()["chips"].get(chip)
    return str(entry["source"]) if entry else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    """Quantization traffic of an fp8 recipe: per element, ``e_reads`` reads of the high-precision tensor (of
    ``e`` bytes each) and ``writes`` bytes written (fp8 copies and scales)."""

    name: str
    e_reads: float
    writes: float
    source: str = ""
    kernels: float = 1.0  # kernels launched per quantized operand (each priced by estimate/compute.py kernels_s)
    gemm_factor: float = 1.0  # the fp8 GEMM's speed with this recipe's scales over its speed with tensorwise ones

    def bytes_per_element(self, e: float) -> float:
        return self.e_reads * e + self.writes


def recipe_names() -> tuple[str, ...]:
    """The recipes fp8.yaml prices: the same names as workload.FP8_RECIPES (a test checks)."""
    return tuple(_data()["recipes"])


@cache
def recipe(name: str = DEFAULT_RECIPE) -> Recipe:
    """An fp8 recipe by name (tensorwise, delayed, rowwise, mxfp8)."""
    key = name.strip().lower()
    table = _data()["recipes"]
    if key not in table:
        raise ConfigError("fp8_recipe", name, f"is not a known fp8 recipe{did_you_mean(key, list(table))} "
                          f"(the recipes: {', '.join(table)})")
    r = table[key]
    return Recipe(name=key, e_reads=float(r["e_reads"]), writes=float(r["writes"]), source=str(r.get("source", "")),
                  kernels=float(r.get("kernels", 1)), gemm_factor=float(r.get("gemm_factor", 1.0)))


def mxfp8_chips() -> tuple[str, ...]:
    return tuple(_data().get("mxfp8_chips", ()))


def framework_recipe(framework: str) -> str:
    """The recipe ``framework`` runs when a run says fp8 and no recipe (its efficiency.yaml record's
    ``fp8_recipe``; the framework level does not depend on the chip)."""
    return efficiency_for("", framework).fp8_recipe


def check_chip(name: str, chip: str, field: str = "fp8_recipe") -> str:
    """``name`` (a known recipe), refused on a chip that cannot run it: MXFP8 needs Blackwell's block-scaled
    tensor cores (fp8.yaml mxfp8_chips)."""
    key = recipe(name).name
    if key == "mxfp8" and chip not in mxfp8_chips():
        raise ConfigError(field, name, f"needs a chip with MXFP8 tensor cores ({', '.join(mxfp8_chips())}; "
                          f"Blackwell), not {chip}: use tensorwise, delayed or rowwise")
    return key


@cache
def recipe_for(precision: str, fp8_recipe: str, framework: str, chip: str) -> str:
    """The recipe a run uses ("" unless fp8): its own ``fp8_recipe``, else its framework's, checked on ``chip``."""
    if precision.lower() != "fp8":
        return ""
    return check_chip(fp8_recipe or framework_recipe(framework), chip)


def cast_bytes_per_element(precision: str, e: float, name: str = DEFAULT_RECIPE) -> float:
    """Bytes the recipe's quantization moves per element of a quantized GEMM operand (0 unless fp8)."""
    if precision.lower() != "fp8":
        return 0.0
    return recipe(name).bytes_per_element(e)


def _saved_input_parts(spec: Any, tokens: float, d: float, *, moe: bool) -> dict[str, float]:
    """Bytes each fp8 GEMM input of one layer keeps less, ``d`` = e - 1 per element, by the accounting of
    estimate/memory.py: the QKV projection input and a dense MLP's first GEMM input (replicated), the output
    projection's and the second GEMMs' inputs and MoE's permuted top_k copies (split). The router stays bf16."""
    t, h = tokens, spec.hidden_size
    parts = {"qkv_in": d * t * h, "out_in": d * t * spec.attn_out_width}
    if moe:
        shared_f = spec.num_shared_experts * (spec.shared_expert_ffn_hidden_size or spec.expert_ffn_hidden_size)
        parts.update(routed_in=d * t * spec.top_k * (h + spec.expert_ffn_hidden_size), shared_in=d * t * shared_f)
    else:
        parts.update(fc1_in=d * t * h, fc2_in=d * t * spec.ffn_hidden_size)
    return parts


def saved_input_savings(spec: Any, tokens: float, e: float, *, moe: bool) -> tuple[float, float]:
    """(replicated, split) bytes one attention + MLP layer keeps less when its fp8 GEMM inputs are kept as fp8
    (1 byte) instead of ``e`` (_saved_input_parts)."""
    if e <= 1.0:
        return 0.0, 0.0
    p = _saved_input_parts(spec, tokens, e - 1.0, moe=moe)
    repl = p["qkv_in"] + p.get("fc1_in", 0.0)
    return repl, sum(p.values()) - repl


def saved_input_module_bytes(spec: Any, tokens: float, e: float, *, moe: bool) -> dict[str, float]:
    """What Megatron Core's recompute modules free (estimate/memory.py LayerActivation fields) when the fp8 GEMM
    inputs are kept as fp8 copies (saved_input_savings): a whole-block checkpoint (mlp, moe, shared_experts) frees
    the 1-byte copies its block keeps; an output-discarding one frees the 16-bit output only, which an fp8 GEMM
    consumer no longer keeps (moe_act; MLA's input norm, whose output the fp8 down-projections quantize). The
    router stays bf16: the norm before a MoE block still frees its output."""
    if e <= 1.0:
        return {}
    p, t = _saved_input_parts(spec, tokens, e - 1.0, moe=moe), tokens
    out: dict[str, float] = {"norm_out_bytes": -e * t * spec.hidden_size} if spec.kv_lora_rank else {}
    if moe:
        out.update(moe_split_bytes=-(p["routed_in"] + p["shared_in"]), shared_expert_bytes=-p["shared_in"],
                   moe_act_bytes=-e * t * spec.top_k * spec.expert_ffn_hidden_size)
    else:
        out.update(mlp_repl_bytes=-p["fc1_in"], mlp_split_bytes=-p["fc2_in"])
    return out
