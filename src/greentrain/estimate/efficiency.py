"""Efficiency of the estimator: what a chip's kernels and links reach and what a training framework costs
besides them, loaded from efficiency.yaml (data, each figure with its source) and optionally from a calibration
profile written by `greentrain calibrate`.

``efficiency_for(chip, framework)`` merges the chip's entry over ``chips.default`` and the framework's over
``frameworks.default``; a chip without data falls back to the default and says so in ``chip_source``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from greentrain import units
from greentrain.config import as_bool, check_keys, load_mapping, require
from greentrain.errors import ConfigError, did_you_mean
from greentrain.estimate.kernels import attention_kernel_fields
from greentrain.estimate.recompute import check_selective_mode
from greentrain.results.calibration import CalibrationProfile
from greentrain.results.codec import canonical_kind

DEFAULT_FRAMEWORK = "megatron"
CHIP_KEYS = ("source", "matmul_max", "matmul_half_dim", "attention_max_d64", "attention_max_d128",
             "attention_half_seq_causal", "attention_half_seq", "memory", "intra_node_link", "inter_node_link",
             "kernel_floor_s", "kernel_gap_s")
FRAMEWORK_KEYS = ("source", "kernel_efficiency", "host_layer_s", "host_layer_s_per_tp_pp_nodes",
                  "grad_accum_bytes_per_param", "step_overhead_s",
                  "dp_bucket_bytes", "dp_bucket_per_layer", "dp_overlap", "pipeline_balance", "zero_all_reduce",
                  "zero_shards_master", "zero_stages", "fused_glu", "eager_ops", "reserved_gib", "fragmentation",
                  "cpu_adam_params_per_s_per_node", "attention_kernel", "loss_kernel", "selective_recompute",
                  "precision_recipe", "default_recompute", "cuda_graphs", "fuse_elementwise")
EAGER_OPS = ("norm", "rope", "glu")  # element-wise ops a framework may run as eager kernel chains (model/ops.py)
LOSS_KERNELS = ("fp32", "fused", "chunked")  # memory.loss_bytes_per_logit
PRECISION_RECIPES = ("mixed", "pure-bf16")  # fp32 master and optimizer states, or bf16 throughout
_BOOLS = ("dp_overlap", "dp_bucket_per_layer", "zero_all_reduce", "zero_shards_master", "fused_glu", "cuda_graphs",
          "fuse_elementwise")
_FRACTIONS = ("matmul_max", "attention_max_d64", "attention_max_d128", "memory", "intra_node_link",
              "inter_node_link", "kernel_efficiency")


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    # --- the chip: fractions of datasheet peaks that kernels and collectives reach ---
    matmul_max: float
    matmul_half_dim: float
    attention_max_d64: float = 0.567
    attention_max_d128: float = 0.628
    attention_half_seq_causal: float = 540.0
    attention_half_seq: float = 150.0
    memory: float
    intra_node_link: float
    inter_node_link: float
    # the shortest time a kernel occupies the device, and the launch gap eager PyTorch adds between two kernels
    # that CUDA graphs remove (estimate/compute.py prices each kernel at max(roofline, floor) + gap)
    kernel_floor_s: float = 1.3e-6
    kernel_gap_s: float = 1.3e-6
    # --- the framework: fixed costs, overlap and allocator ---
    kernel_efficiency: float = 1.0  # what its GEMM and attention kernels reach of the chip's microbenchmark figures
    cuda_graphs: bool = False  # the framework replays CUDA graphs: no launch gap between kernels
    fuse_elementwise: bool = False  # adjacent element-wise ops fuse into one kernel (torch.compile)
    host_layer_s: float = 0.0  # host time to issue one layer's forward + backward for one micro-batch
    # added to host_layer_s per tensor-parallel rank when the pipeline spans nodes (step_terms.micro_batch_s)
    host_layer_s_per_tp_pp_nodes: float = 0.0
    grad_accum_bytes_per_param: float = 0.0  # memory traffic per micro-batch accumulating gradients
    step_overhead_s: float = 0.0
    dp_bucket_bytes: float = 0.0  # 0: one bucket after the backward
    dp_bucket_per_layer: bool = False
    dp_overlap: bool = False
    pipeline_balance: str = "even"  # how layers are placed on pipeline stages (estimate/pipeline.py)
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)  # the ZeRO stages the framework runs
    fused_glu: bool = True  # a fused GLU kernel (False: act(gate) * up keeps act(gate) for the backward)
    eager_ops: tuple[str, ...] = ()  # element-wise ops run as chains of eager kernels (EAGER_OPS; model/ops.py)
    zero_shards_master: bool = True  # ZeRO-1+ shards the fp32 master copy with the optimizer states
    zero_all_reduce: bool = False  # ZeRO-1/2 still all-reduce gradients (then all-gather the weights)
    reserved_bytes: float
    fragmentation: float = 0.0
    cpu_adam_params_per_s_per_node: float = 1.0e10
    chip_source: str = ""
    chip_has_data: bool = True  # False: the chip has no microbenchmark entry and takes the default's figures
    framework: str = DEFAULT_FRAMEWORK
    framework_source: str = ""
    # --- the kernels the framework runs (estimate/kernels.py, estimate/recompute.py) ---
    attention_kernel: str = "fa2"  # whose curve the attention_* figures above are (kernels.ATTENTION_KERNELS)
    attention_fused: bool = True  # False: the kernel materialises the scores (SDPA math)
    attention_source: str = ""
    loss_kernel: str = "fp32"  # LOSS_KERNELS: what the cross-entropy keeps per logit
    selective_recompute: str = "attention"  # what `recompute: selective` saves (recompute.SELECTIVE_MODES)
    precision_recipe: str = "mixed"  # the framework's default precision recipe (PRECISION_RECIPES)
    default_recompute: str = "none"  # what it recomputes when a run does not say (none, full or a selective mode)

    def __post_init__(self) -> None:
        for f in _FRACTIONS:
            v = getattr(self, f)
            require(isinstance(v, (int, float)) and 0 < v <= 1, f"efficiency.{f}", v, "must be in (0, 1]")
        for f in ("kernel_floor_s", "kernel_gap_s"):
            v = getattr(self, f)
            require(isinstance(v, (int, float)) and 0 <= v <= 1e-4, f"efficiency.{f}", v, "must be in [0, 1e-4] s")
        for f in ("matmul_half_dim", "attention_half_seq_causal", "attention_half_seq", "host_layer_s",
                  "host_layer_s_per_tp_pp_nodes",
                  "grad_accum_bytes_per_param", "step_overhead_s", "dp_bucket_bytes", "reserved_bytes",
                  "fragmentation"):
            v = getattr(self, f)
            require(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, f"efficiency.{f}", v,
                    "must be a finite number >= 0")
        require(bool(self.zero_stages) and all(z in (0, 1, 2, 3) for z in self.zero_stages),
                "efficiency.zero_stages", self.zero_stages, "must be a non-empty subset of 0, 1, 2, 3")
        require(all(k in EAGER_OPS for k in self.eager_ops), "efficiency.eager_ops", list(self.eager_ops),
                f"must be a subset of {', '.join(EAGER_OPS)}")
        require(self.pipeline_balance in ("even", "cost"), "efficiency.pipeline_balance", self.pipeline_balance,
                "must be even or cost")
        require(self.host_layer_s <= 1.0, "efficiency.host_layer_s", self.host_layer_s, "must be <= 1 s")
        require(self.host_layer_s_per_tp_pp_nodes <= 0.1, "efficiency.host_layer_s_per_tp_pp_nodes",
                self.host_layer_s_per_tp_pp_nodes, "must be <= 0.1 s")
        require(self.loss_kernel in LOSS_KERNELS, "efficiency.loss_kernel", self.loss_kernel,
                f"must be one of {', '.join(LOSS_KERNELS)}")
        require(self.precision_recipe in PRECISION_RECIPES, "efficiency.precision_recipe", self.precision_recipe,
                f"must be one of {', '.join(PRECISION_RECIPES)}")
        check_selective_mode(self.selective_recompute)
        if self.default_recompute not in ("none", "full"):
            check_selective_mode(self.default_recompute)
        require(self.fragmentation <= 1.0, "efficiency.fragmentation", self.fragmentation, "must be <= 1")
        require(self.cpu_adam_params_per_s_per_node > 0, "efficiency.cpu_adam_params_per_s_per_node",
                self.cpu_adam_params_per_s_per_node, "must be > 0")

    @property
    def launch_gap_s(self) -> float:
        """The gap each kernel adds: none when the framework replays CUDA graphs."""
        return 0.0 if self.cuda_graphs else self.kernel_gap_s

    def matmul(self, m: float, k: float, n: float) -> float:
        """Fraction of peak a (m x k) @ (k x n) reaches: saturating in each dimension."""
        h = self.matmul_half_dim
        return self.matmul_max * (m / (m + h)) * (k / (k + h)) * (n / (n + h))

    def attention(self, head_dim: float, seq_kv: float, causal: bool) -> float:
        """Fraction of peak a fused attention kernel reaches (forward + backward, FLOPs it executes)."""
        w = min(1.0, max(0.0, (head_dim - 64.0) / 64.0))
        top = self.attention_max_d64 + w * (self.attention_max_d128 - self.attention_max_d64)
        half = self.attention_half_seq_causal if causal else self.attention_half_seq
        return top * seq_kv / (seq_kv + half)


@cache
def _data() -> dict[str, Any]:  # read once; callers copy what they change
    text = resources.files("greentrain.estimate").joinpath("efficiency.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def framework_names() -> tuple[str, ...]:
    return tuple(k for k in _data()["frameworks"] if k != "default")


def chip_names() -> tuple[str, ...]:
    return tuple(k for k in _data()["chips"] if k != "default")


def _fields(chip: dict[str, Any], fw: dict[str, Any]) -> dict[str, Any]:
    kw: dict[str, Any] = {k: float(v) for k, v in chip.items() if k != "source"}
    for k, v in fw.items():
        if k == "source":
            continue
        if k in _BOOLS:
            kw[k] = as_bool(v, f"efficiency.{k}")
        elif k == "reserved_gib":
            kw["reserved_bytes"] = units.gib_to_bytes(float(v))
        elif k in ("pipeline_balance", "attention_kernel", "loss_kernel", "selective_recompute", "precision_recipe",
                   "default_recompute"):
            kw[k] = str(v)
        elif k == "zero_stages":
            kw[k] = tuple(int(z) for z in v)
        elif k == "eager_ops":
            kw[k] = tuple(str(x) for x in v)
        else:
            kw[k] = float(v)
    return kw


@cache
def efficiency_for(chip: str = "", framework: str = DEFAULT_FRAMEWORK, attention_kernel: str = "",
                   selective_recompute: str = "") -> Efficiency:
    """The efficiency of ``chip`` (a catalog name; "" or unknown: the default) under ``framework``, with the
    framework's attention kernel and selective-recomputation mode unless ``attention_kernel`` /
    ``selective_recompute`` override them."""
    data = _data()
    frameworks = data["frameworks"]
    if framework not in frameworks or framework == "default":
        raise ConfigError("framework", framework,
                          f"is not a known framework{did_you_mean(framework, framework_names())}")
    chips = data["chips"]
    chip_entry = chips.get(chip)
    base_chip, base_fw = dict(chips["default"]), dict(frameworks["default"])
    merged_chip = {**base_chip, **(chip_entry or {})}
    merged_fw = {**base_fw, **frameworks[framework]}
    check_keys(merged_chip, CHIP_KEYS, f"efficiency.chips.{chip or 'default'}")
    check_keys(merged_fw, FRAMEWORK_KEYS, f"efficiency.frameworks.{framework}")
    source = str(merged_chip.get("source", "")) if chip_entry else (
        f"{chip or 'chip'}: {base_chip['source']}")
    kw = _fields(merged_chip, merged_fw)
    if selective_recompute:
        kw["selective_recompute"] = check_selective_mode(selective_recompute)
    kw.update(attention_kernel_fields(data.get("attention_kernels", {}), attention_kernel or kw.get(
        "attention_kernel", "fa2"), chip, kw))
    return Efficiency(chip_source=source, chip_has_data=chip_entry is not None, framework=framework,
                      framework_source=str(merged_fw.get("source", "")), **kw)


def default_efficiency() -> Efficiency:
    """The default chip's figures under the default framework (kept for callers that know no chip)."""
    return efficiency_for("", DEFAULT_FRAMEWORK)


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """Which efficiency to predict with: a framework, and optionally a calibration profile; per chip."""

    framework: str = DEFAULT_FRAMEWORK
    calibration: str = ""  # a `greentrain calibrate` output file, "" for none
    attention_kernel: str = ""  # "" : the framework's (--attention-kernel)
    selective_recompute: str = ""  # "" : the framework's (--selective-recompute)

    def __post_init__(self) -> None:
        if self.framework not in framework_names():
            raise ConfigError("framework", self.framework,
                              f"is not a known framework{did_you_mean(self.framework, framework_names())}")
        if self.attention_kernel or self.selective_recompute:  # fail early on an unknown name
            efficiency_for("", self.framework, self.attention_kernel, self.selective_recompute)
        if self.calibration:
            with_calibration(efficiency_for("", self.framework), self.calibration)  # fail early on a bad file

    def for_chip(self, chip: str) -> Efficiency:
        eff = efficiency_for(chip, self.framework, self.attention_kernel, self.selective_recompute)
        return with_calibration(eff, self.calibration) if self.calibration else eff


@cache
def with_calibration(eff: Efficiency, path: str | Path) -> Efficiency:
    """``eff`` with the constants of a calibration profile (`greentrain calibrate -o PROFILE.yaml`) replaced."""
    data = load_mapping(Path(path), field="calibration")
    allowed = ("kind", "schema_version", "chip", "framework", "constants", "provenance", "error")
    check_keys(data, allowed, "calibration")
    if canonical_kind(data.get("kind")) != CalibrationProfile.KIND:  # greentrain-calibration before 0.2.0
        raise ConfigError("calibration.kind", data.get("kind"), f"must be '{CalibrationProfile.KIND}'")
    constants = data.get("constants")
    if not isinstance(constants, dict) or not constants:
        raise ConfigError("calibration.constants", constants, "must be a non-empty mapping")
    version = data.get("schema_version", 1)
    if version not in (1, 2):
        raise ConfigError("calibration.schema_version", version, "must be 1 or 2 (this greentrain's newest)")
    if version == 1 and data.get("provenance") and "reserved_bytes" in constants:
        raise ConfigError("calibration.constants.reserved_bytes", constants["reserved_bytes"],
                          "was fitted against the device total before peak memory was compared as the "
                          "allocator's: refit with greentrain calibrate")
    names = [f.name for f in dataclasses.fields(Efficiency) if f.name not in (
        "chip_source", "chip_has_data", "framework", "framework_source", "attention_kernel", "attention_fused",
        "attention_source", "loss_kernel", "selective_recompute", "precision_recipe", "default_recompute")]
    check_keys(constants, names, "calibration.constants")
    kw: dict[str, Any] = {}
    for k, v in constants.items():
        if k in _BOOLS:
            kw[k] = as_bool(v, f"calibration.constants.{k}")
        elif k == "pipeline_balance":
            kw[k] = str(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"calibration.constants.{k}", v, "must be a number")
        else:
            kw[k] = float(v)
    return dataclasses.replace(eff, chip_source=f"{eff.chip_source}; calibrated by {Path(path).name}", **kw)
