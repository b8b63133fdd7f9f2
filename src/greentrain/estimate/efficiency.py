"""Efficiency of the estimator: what a chip's kernels and links reach and what a training framework costs
besides them, loaded from efficiency.yaml (data, each figure with its source) and optionally from a calibration
profile written by `greentrain calibrate`.

``efficiency_for(chip, framework)`` merges the chip's entry over ``chips.default`` and the framework's over
``frameworks.default``; a chip without data falls back to the default and says so in ``chip_source``.

Each field of ``Efficiency`` is a knob: its ``Knob`` metadata (``knob(level, kind, *rules)``) says which entry
gives it, how YAML spells and converts it, the rules it must pass and whether a calibration profile may set it;
the key lists, parsing, checks and errors below are derived from it. A framework entry may carry an ``offload:``
block, its offload executor's knobs (``offload_block``; read by offload/config.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from greentrain.config import check_keys, load_mapping
from greentrain.errors import ConfigError, did_you_mean
from greentrain.estimate.kernels import attention_kernel_fields
from greentrain.estimate.knobs import (
    FRACTION,
    KERNEL_TIME,
    NON_NEGATIVE,
    NUMERIC_KINDS,
    UNIT_RANGE,
    Knob,
    at_most,
    finite,
    knob,
    one_of,
)
from greentrain.estimate.recompute import check_selective_mode, is_selective_mode
from greentrain.model.finetune import LORA_DTYPES
from greentrain.model.loss import LOSS_KERNELS  # what each keeps and moves: model/loss.py
from greentrain.results.calibration import CalibrationProfile
from greentrain.results.codec import canonical_kind
from greentrain.workload import FP8_RECIPES, GRAD_DTYPES

DEFAULT_FRAMEWORK = "megatron"
EAGER_OPS = ("norm", "rope", "glu", "gelu")  # element-wise ops a framework may run as eager chains (model/ops.py)
_SOME_EAGER_OPS = (lambda v: all(k in EAGER_OPS for k in v), f"must be a subset of {', '.join(EAGER_OPS)}")
PRECISION_RECIPES = ("mixed", "pure-bf16")  # fp32 master and optimizer states, or bf16 throughout
OFFLOAD_KEY = "offload"  # a framework's offload-executor knobs, read by offload/config.py
DEFAULT_FP8_RECIPE = "tensorwise"  # current scaling: Megatron-Bridge 'fp8-cs', torchao's default float8 recipe
MOE_OVERLAPS = ("none", "compute")  # estimate/moe.py ep_pass_s: the all-to-alls exposed, or behind the compute
MOE_GROUPED_GEMMS = ("per_expert", "one")  # estimate/moe.py expert_kernels_s: a GEMM per local expert, or one
PARALLEL_AXES = ("tp", "pp", "cp", "ep")  # model-parallel axes a framework may run beside data parallelism
AXIS_NAMES = {"tp": "tensor", "pp": "pipeline", "cp": "context", "ep": "expert"}


def knobs() -> dict[str, Knob]:
    """Every Efficiency field's Knob, in field order."""
    return {f.name: f.metadata["knob"] for f in dataclasses.fields(Efficiency)}


def yaml_keys(level: str) -> tuple[str, ...]:
    """The keys an efficiency.yaml entry of ``level`` (chip or framework) may have."""
    extra = (OFFLOAD_KEY,) if level == "framework" else ()
    return ("source", *(k.yaml_key or n for n, k in knobs().items() if k.level == level), *extra)


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    # A default that is a figure (not 0 or off) is the one of efficiency.yaml's `default` chip or framework entry,
    # where its source is written (A100 FlashAttention-2 fits, gpu-small-kernels' launch floor, ZeRO-Offload's Adam)
    # --- the chip: fractions of datasheet peaks that kernels and collectives reach ---
    matmul_max: float = knob("chip", "fraction", FRACTION)
    matmul_half_dim: float = knob("chip", "count", NON_NEGATIVE)
    attention_max_d64: float = knob("chip", "fraction", FRACTION, default=0.567)
    attention_max_d128: float = knob("chip", "fraction", FRACTION, default=0.628)
    attention_half_seq_causal: float = knob("chip", "count", NON_NEGATIVE, default=540.0)
    attention_half_seq: float = knob("chip", "count", NON_NEGATIVE, default=150.0)
    memory: float = knob("chip", "fraction", FRACTION)
    eager_indexed_memory: float = knob("chip", "fraction", UNIT_RANGE, default=0.0)  # compute._fixed; 0: as memory
    intra_node_link: float = knob("chip", "fraction", FRACTION)
    inter_node_link: float = knob("chip", "fraction", FRACTION)
    # pinned host <-> device copies over the host link (catalog host_link) / its per-direction peak: offloaded
    # activations and optimizer states (estimate), the offload executor's streams (offload/plan.py)
    host_link: float = knob("chip", "fraction", FRACTION, default=0.85)
    # the shortest time a kernel occupies the device, and the launch gap eager PyTorch adds between two kernels
    # that CUDA graphs remove (estimate/compute.py prices each kernel at max(roofline, floor) + gap)
    kernel_floor_s: float = knob("chip", "seconds", KERNEL_TIME, default=1.3e-6)
    kernel_gap_s: float = knob("chip", "seconds", KERNEL_TIME, default=1.3e-6)
    # how much longer a compute kernel takes while a collective runs beside it (step_terms.overlap_cost_s): 0.76 is
    # 1.76x as long; at most twice as long
    overlap_slowdown: float = knob("chip", "fraction", UNIT_RANGE, default=0.0)
    # --- the framework: fixed costs, overlap and allocator ---
    # what its GEMM and attention kernels reach of the chip's microbenchmark figures
    kernel_efficiency: float = knob("framework", "fraction", FRACTION, default=1.0)
    cuda_graphs: bool = knob("framework", "bool", default=False)  # CUDA graphs replayed: no launch gap between kernels
    # adjacent element-wise ops fuse into one kernel (torch.compile)
    fuse_elementwise: bool = knob("framework", "bool", default=False)
    # host time to issue one layer's forward + backward for one micro-batch
    host_layer_s: float = knob("framework", "seconds", NON_NEGATIVE, at_most(1.0, "s"), default=0.0)
    # added to host_layer_s per tensor-parallel rank when the pipeline spans nodes (step_terms.micro_batch_s)
    host_layer_s_per_tp_pp_nodes: float = knob("framework", "seconds", NON_NEGATIVE, at_most(0.1, "s"),
                                               default=0.0)
    grad_accum_bytes_per_param: float = knob("framework", "bytes", NON_NEGATIVE, default=0.0)  # per micro-batch
    step_overhead_s: float = knob("framework", "seconds", NON_NEGATIVE, default=0.0)
    dp_bucket_bytes: float = knob("framework", "bytes", NON_NEGATIVE, default=0.0)  # 0: one bucket after the backward
    dp_bucket_params: float = knob("framework", "count", NON_NEGATIVE, default=0.0)  # or max(this, per_rank x dp)
    dp_bucket_params_per_rank: float = knob("framework", "count", NON_NEGATIVE, default=0.0)
    dp_bucket_per_layer: bool = knob("framework", "bool", default=False)
    grads_set_to_none: bool = knob("framework", "bool", default=False)  # gradients freed between steps (memory.py)
    dp_overlap: bool = knob("framework", "bool", default=False)
    # ZeRO-1/2's weight all-gather overlaps the next step's first forward (Megatron Core overlap_param_gather)
    dp_gather_overlap: bool = knob("framework", "bool", default=False)
    fp8_weights: bool = knob("framework", "bool", default=False)  # an fp8 run's weights in fp8 (state_dtypes.py)
    lora_dtype: str = knob("framework", "choice", one_of(LORA_DTYPES), default="model")  # LoRA adapters' (finetune.py)
    # how layers are placed on pipeline stages (estimate/pipeline.py)
    pipeline_balance: str = knob("framework", "choice", one_of(("even", "cost"), "must be even or cost"),
                                 default="even", calibrated=True)
    zero_stages: tuple[int, ...] = knob("framework", "stages", (lambda v: bool(v) and all(  # the ZeRO stages it runs
        z in (0, 1, 2, 3) for z in v), "must be a non-empty subset of 0, 1, 2, 3"), default=(0, 1, 2, 3))
    # the model-parallel axes it has beside data parallelism (a strategy using another is refused, search skips it)
    parallelisms: tuple[str, ...] = knob("framework", "axes", (lambda v: all(k in PARALLEL_AXES for k in v),
                                                               f"must be a subset of {', '.join(PARALLEL_AXES)}"),
                                         default=PARALLEL_AXES)
    # it can keep the optimizer states in host memory and step them there (ZeRO-Offload, FSDP's CPUOffload,
    # Megatron Core's optimizer_cpu_offload); False: a strategy that offloads is refused, search never picks one
    optimizer_offload: bool = knob("framework", "bool", default=True, calibrated=False)
    # it can keep the first layers' saved activations in host memory (Transformer Engine's CPU offload: Megatron
    # Core cpu_offloading, NeMo; torchtune's enable_activation_offloading); False: a strategy that offloads
    # activations is refused, search never picks one (estimate/act_offload.py)
    activation_offload: bool = knob("framework", "bool", default=False, calibrated=False)
    # a fused GLU kernel (False: act(gate) * up keeps act(gate) for the backward)
    fused_glu: bool = knob("framework", "bool", default=True)
    eager_ops: tuple[str, ...] = knob("framework", "ops", _SOME_EAGER_OPS, default=())  # EAGER_OPS as eager chains
    # its eager chains are Hugging Face's, priced at the chip's eager_indexed_memory (compute._fixed)
    eager_indexed: bool = knob("framework", "bool", default=False, calibrated=False)
    # its fused RoPE kernel takes YaRN's scale (False: a model with rope_mscale != 1 runs rope eager: compose.py)
    scaled_rope_fused: bool = knob("framework", "bool", default=True, calibrated=False)
    # of those, the ones its own MoE models fuse: norm everywhere, glu in the experts (compose.model_efficiency)
    moe_fused_ops: tuple[str, ...] = knob("framework", "ops", _SOME_EAGER_OPS, default=())
    # ZeRO-1+ shards the fp32 master copy with the optimizer states
    zero_shards_master: bool = knob("framework", "bool", default=True)
    # with a pipeline, the sharded weights stay gathered and the gradients accumulate unsharded (in the reduce
    # dtype) until the last micro-batch: ZeRO-1's memory whatever the ZeRO stage (compose.state_bytes)
    pp_gathers_state: bool = knob("framework", "bool", default=False)
    # at ZeRO 3 the weight shards are the fp32 master the optimizer steps: no 16-bit shard (state_bytes_per_param)
    shards_are_master: bool = knob("framework", "bool", default=False)
    # ZeRO-1/2 still all-reduce gradients (then all-gather the weights)
    zero_all_reduce: bool = knob("framework", "bool", default=False)
    reserved_bytes: float = knob("framework", "bytes", NON_NEGATIVE, yaml_key="reserved_gib")
    fragmentation: float = knob("framework", "fraction", NON_NEGATIVE, at_most(1.0), default=0.0)
    cpu_adam_params_per_s_per_node: float = knob("framework", "rate", (lambda v: finite(v) and v > 0,
                                                                       "must be > 0"), default=1.0e10)
    chip_source: str = knob("", "text", default="")
    # False: the chip has no microbenchmark entry and takes the default's figures
    chip_has_data: bool = knob("", "bool", default=True, calibrated=False)
    framework: str = knob("", "text", default=DEFAULT_FRAMEWORK)
    framework_source: str = knob("", "text", default="")
    # --- the kernels the framework runs (estimate/kernels.py, estimate/recompute.py) ---
    # whose curve the attention_* figures above are (kernels.ATTENTION_KERNELS; kernels.py checks the name)
    attention_kernel: str = knob("framework", "choice", default="fa2")
    # False: the kernel materialises the scores (SDPA math)
    attention_fused: bool = knob("kernel", "bool", default=True, calibrated=False)
    attention_source: str = knob("kernel", "text", default="")
    # LOSS_KERNELS: what the cross-entropy keeps and moves (model/loss.py) per logit
    loss_kernel: str = knob("framework", "choice", one_of(LOSS_KERNELS), default="fp32")
    # what `recompute: selective` saves (recompute.SELECTIVE_MODES)
    selective_recompute: str = knob("framework", "choice", (is_selective_mode, ""), default="attention")
    # the framework's default precision recipe (PRECISION_RECIPES)
    precision_recipe: str = knob("framework", "choice", one_of(PRECISION_RECIPES), default="mixed")
    # the gradient buffer its mixed-precision recipes reduce in (workload.GRAD_DTYPES), for a run that does not say
    grad_dtype: str = knob("framework", "choice", one_of(GRAD_DTYPES), default="fp32")
    # what it recomputes (none, full or a selective mode) and its ZeRO stage when a run does not say (runs CSV)
    default_recompute: str = knob("framework", "choice", (lambda v: v in ("none", "full") or is_selective_mode(v), ""),
                                  default="none")
    default_zero: int = knob("framework", "count", NON_NEGATIVE, at_most(3.0), default=0, calibrated=False)
    # the fp8 recipe it runs for precision fp8 without an fp8_recipe (workload.FP8_RECIPES; fp8.py recipe_for)
    fp8_recipe: str = knob("framework", "choice", one_of(FP8_RECIPES), default=DEFAULT_FP8_RECIPE)
    # its fp8 linears keep the 1-byte copy of each GEMM input for the backward (estimate/fp8.py saved_input_savings)
    fp8_saves_inputs: bool = knob("framework", "bool", default=False, calibrated=False)
    # how its MoE token dispatcher meets the compute (estimate/moe.py; sources in efficiency.yaml's default entry):
    # its all-to-alls exposed or hidden behind another micro-batch's compute, fp8 dispatch, a host sync of the
    # tokens-per-expert counts each pass, and one GEMM per local expert or one grouped kernel for all
    moe_overlap: str = knob("framework", "choice", one_of(MOE_OVERLAPS), default="none", calibrated=False)
    moe_dispatch_fp8: bool = knob("framework", "bool", default=False, calibrated=False)
    # a token crosses the network once per destination node and is forwarded over NVLink there (DeepEP's normal
    # kernels, HybridEP), instead of once per remote expert (estimate/moe.py ep_pass_s)
    moe_node_forwarding: bool = knob("framework", "bool", default=False, calibrated=False)
    moe_host_sync: bool = knob("framework", "bool", default=True, calibrated=False)
    # the routed rows are permuted on the sending side and regrouped by local expert after the all-to-all, and the
    # inverse after the experts (model/routing.py's four passes); false: DeepEP sends each token in place and only
    # the receiving rank permutes (two passes)
    moe_sender_permutes: bool = knob("framework", "bool", default=True, calibrated=False)
    moe_grouped_gemm: str = knob("framework", "choice", one_of(MOE_GROUPED_GEMMS), default="per_expert",
                                 calibrated=False)
    # the routing weights multiply the experts' outputs, which the backward then keeps (estimate/memory.py)
    moe_weights_outputs: bool = knob("framework", "bool", default=False, calibrated=False)
    # the experts' activation in the epilogues of their grouped GEMMs with the quantization around it (forward: act
    # and the second GEMM's input cast; backward: its gradient and cast): no kernel, no memory pass (compute.py)
    moe_fused_act: bool = knob("framework", "bool", default=False, calibrated=False)
    default_etp: int = knob("framework", "count", NON_NEGATIVE, default=0, calibrated=False)  # MoE etp if unset

    def __post_init__(self) -> None:
        for name, k in _RULED:
            k.check(name, getattr(self, name))

    @property
    def launch_gap_s(self) -> float:
        """The gap each kernel adds: none when the framework replays CUDA graphs."""
        return 0.0 if self.cuda_graphs else self.kernel_gap_s

    def lacks(self, *, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1) -> tuple[str, ...]:
        """The axes among these degrees (those > 1) the framework has no parallelism for (``parallelisms``)."""
        degrees = {"tp": tp, "pp": pp, "cp": cp, "ep": ep}
        return tuple(a for a, d in degrees.items() if d > 1 and a not in self.parallelisms)

    def lacks_message(self, axes: tuple[str, ...]) -> str:
        """'the ddp framework has no tensor parallelism (tp); it runs data parallelism only'."""
        named = " or ".join(f"{AXIS_NAMES[a]} parallelism ({a})" for a in axes)
        runs = f"{', '.join(self.parallelisms)} beside data parallelism" if self.parallelisms else \
            "data parallelism only"
        return f"the {self.framework} framework has no {named}; it runs {runs}"

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


_RULED = tuple((n, k) for n, k in knobs().items() if k.rules)  # the fields __post_init__ checks
CHIP_KEYS = yaml_keys("chip")
FRAMEWORK_KEYS = yaml_keys("framework")


@cache
def _data() -> dict[str, Any]:  # read once; callers copy what they change
    text = resources.files("greentrain.estimate").joinpath("efficiency.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def framework_names() -> tuple[str, ...]:
    return tuple(k for k in _data()["frameworks"] if k != "default")


def offload_framework_names() -> tuple[str, ...]:
    """The frameworks whose entry carries an ``offload:`` block: those `greentrain offload` plans."""
    return tuple(k for k, v in _data()["frameworks"].items() if k != "default" and OFFLOAD_KEY in (v or {}))


def offload_block(framework: str) -> dict[str, Any]:
    """The ``offload:`` block of ``framework``'s entry: its offload executor's knobs (offload/config.py reads
    them); one line naming the frameworks that have one when it has none."""
    names = offload_framework_names()
    if framework not in names:
        raise ConfigError("offload.framework", framework, "must be a framework whose efficiency.yaml entry has an "
                          f"offload block{did_you_mean(framework, names)}")
    return dict(_data()["frameworks"][framework][OFFLOAD_KEY])


def chip_names() -> tuple[str, ...]:
    return tuple(k for k in _data()["chips"] if k != "default")


def _fields(chip: dict[str, Any], fw: dict[str, Any]) -> dict[str, Any]:
    """The Efficiency fields a merged chip entry and framework entry give, each parsed by its Knob."""
    by_key = {k.yaml_key or n: (n, k) for n, k in knobs().items() if k.level in ("chip", "framework")}
    kw: dict[str, Any] = {}
    for key, v in (*chip.items(), *fw.items()):
        if key in ("source", OFFLOAD_KEY):
            continue
        name, k = by_key[key]
        kw[name] = k.parse(v, f"efficiency.{key}", key)
    return kw


@cache
def efficiency_for(chip: str = "", framework: str = DEFAULT_FRAMEWORK, attention_kernel: str = "",
                   selective_recompute: str = "", *, loss_kernel: str = "") -> Efficiency:
    """The efficiency of ``chip`` (a catalog name; "" or unknown: the default) under ``framework``, with the
    framework's attention kernel, selective-recomputation mode and loss kernel unless ``attention_kernel`` /
    ``selective_recompute`` / ``loss_kernel`` override them."""
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
    check_keys(merged_chip, yaml_keys("chip"), f"efficiency.chips.{chip or 'default'}")
    check_keys(merged_fw, yaml_keys("framework"), f"efficiency.frameworks.{framework}")
    source = str(merged_chip.get("source", "")) if chip_entry else (
        f"{chip or 'chip'}: {base_chip['source']}")
    kw = _fields(merged_chip, merged_fw)
    if selective_recompute:
        kw["selective_recompute"] = check_selective_mode(selective_recompute)
    if loss_kernel:
        if loss_kernel not in LOSS_KERNELS:
            raise ConfigError("loss_kernel", loss_kernel,
                              f"is not a known loss kernel{did_you_mean(loss_kernel, LOSS_KERNELS)}")
        kw["loss_kernel"] = loss_kernel
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
    loss_kernel: str = ""  # "" : the framework's (--loss-kernel)

    def __post_init__(self) -> None:
        if self.framework not in framework_names():
            raise ConfigError("framework", self.framework,
                              f"is not a known framework{did_you_mean(self.framework, framework_names())}")
        if self.attention_kernel or self.selective_recompute or self.loss_kernel:  # fail early on an unknown name
            efficiency_for("", self.framework, self.attention_kernel, self.selective_recompute,
                           loss_kernel=self.loss_kernel)
        if self.calibration:
            with_calibration(efficiency_for("", self.framework), self.calibration)  # fail early on a bad file

    def for_chip(self, chip: str) -> Efficiency:
        eff = efficiency_for(chip, self.framework, self.attention_kernel, self.selective_recompute,
                             loss_kernel=self.loss_kernel)
        if not self.calibration:
            return eff
        fitted = calibration_target(self.calibration)  # its constants are that chip's and framework's
        for what, have, want in (("on chip", fitted[0], chip), ("for framework", fitted[1], self.framework)):
            if have and want and have != want:
                raise ConfigError("calibration", self.calibration, f"was fitted {what} {have}, not {want}")
        return with_calibration(eff, self.calibration)


@cache
def calibration_target(path: str | Path) -> tuple[str, str]:
    """(chip, framework) a calibration profile was fitted for ("" where it does not say; a chip by its name)."""
    from greentrain.hardware.catalog import chips

    data = load_mapping(Path(path), field="calibration")
    chip, framework = str(data.get("chip") or "").strip(), str(data.get("framework") or "").strip()
    return next((c.name for c in chips().values() if chip.lower() in (c.name, *c.aliases)), chip), framework


@cache
def with_calibration(eff: Efficiency, path: str | Path) -> Efficiency:
    """``eff`` with the constants of a calibration profile (`greentrain calibrate -o PROFILE.yaml`) replaced."""
    data = load_mapping(Path(path), field="calibration")
    allowed = ("kind", "schema_version", "chip", "framework", "constants", "provenance", "error")
    check_keys(data, allowed, "calibration")
    if canonical_kind(data.get("kind")) != CalibrationProfile.KIND:  # greentrain-calibration before 0.2.0
        raise ConfigError("calibration.kind", data.get("kind"), f"must be '{CalibrationProfile.KIND}'")
    if data.get("framework") not in (None, "", *framework_names()):  # calibrate writes a known one
        raise ConfigError("calibration.framework", data.get("framework"), "is not a known framework"
                          + did_you_mean(str(data.get("framework")), framework_names()))
    chip = data.get("chip")  # the chip it was fitted on: a catalog name or the name of the user's chip file
    if chip is not None and (not isinstance(chip, str) or not chip.strip()):
        raise ConfigError("calibration.chip", chip, "must name the chip the profile was fitted on (or be left out)")
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
    fitted = {n: k for n, k in knobs().items() if k.calibrated}
    check_keys(constants, tuple(fitted), "calibration.constants")
    kw: dict[str, Any] = {}
    for name, v in constants.items():
        label = f"calibration.constants.{name}"
        if fitted[name].kind in NUMERIC_KINDS and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ConfigError(label, v, "must be a number")
        kw[name] = fitted[name].parse(v, label)
    return dataclasses.replace(eff, chip_source=f"{eff.chip_source}; calibrated by {Path(path).name}", **kw)
