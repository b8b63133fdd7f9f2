"""Strategy: the parallel degrees and memory-saving choices of a run, and their feasibility checks.

Mesh axes, outermost first: pp, dp, cp, tp (tp innermost so that it stays inside a node, as Megatron-LM
and torchtitan lay ranks out). Expert parallelism is carved out of dp x cp (Megatron-core convention):
ep must divide dp * cp, and each expert-parallel group holds num_experts / ep experts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NoReturn

from greentrain.config import BOUNDS, MAX_BATCH_SEQUENCES, as_bool, as_choice, as_int, check_keys, require
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.hardware.cluster import MAX_CHIPS
from greentrain.model.spec import TransformerSpec
from greentrain.num import Num
from greentrain.parallel import derived
from greentrain.parallel.fields import POSITIVE_FIELDS
from greentrain.parallel.schedules import (
    PIPELINE_SCHEDULES,
    PipelineSchedule,
    check_schedule,
    get_schedule,
    implied_schedule,
    schedule_code,
)

RECOMPUTE = ("none", "selective", "full")
SCHEDULES = PIPELINE_SCHEDULES  # the pipeline schedules by name (parallel/schedules.py, one record each)
__all__ = ["RECOMPUTE", "SCHEDULES", "Strategy", "check_divisibility", "check_schedule"]

MAX_LAYERS = int(BOUNDS["num_layers"].hi)


@dataclass(frozen=True, slots=True, kw_only=True)
class Strategy:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    vpp: int = 1  # virtual pipeline stages (model chunks) per device; > 1 means an interleaved schedule
    cp: int = 1
    ep: int = 1
    # expert tensor parallelism (Megatron Core expert_tensor_parallel_size): experts' matrices split over etp
    # ranks; 0: as tp. Experts are laid out on the dp*cp*tp ranks of a stage, ep*etp of them per expert group.
    etp: int = 0
    sp: bool = False  # sequence parallelism (Korthikanti et al. 2022 §4.2.2), only meaningful with tp > 1
    zero: int = 0  # ZeRO stage 0..3 over the data-parallel group (Rajbhandari et al. 2020)
    recompute: str = "none"
    micro_batch_size: int = 1
    offload_optimizer: bool = False  # optimizer states (and master weights) in host memory (ZeRO-Offload)
    # layers whose saved activations wait in host memory (estimate/act_offload.py): the first N of the model
    offload_activations: int = 0
    # parallel/schedules.py's name; "": by vpp (interleaved when vpp > 1, else 1f1b); an explicit one must agree
    schedule: str = ""
    flash_attention: bool = True  # fused attention (FlashAttention/SDPA); False: Megatron-2022 naive attention
    # Layers of each pipeline stage, first to last, when the run pins them (Megatron-LM
    # --decoder-first/last-pipeline-num-layers, nanotron pp_layer_partition); (): the framework places them
    stage_layers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for f in POSITIVE_FIELDS:  # a degree past any cluster, a micro-batch past any global batch
            v, top = getattr(self, f), MAX_BATCH_SEQUENCES if f == "micro_batch_size" else MAX_CHIPS
            require(isinstance(v, int) and 1 <= v <= top, f"strategy.{f}", v, f"must be an integer in [1, {top:,}]")
        require(self.zero in (0, 1, 2, 3), "strategy.zero", self.zero, "must be 0, 1, 2 or 3")
        require(self.recompute in RECOMPUTE, "strategy.recompute", self.recompute,
                f"must be one of {', '.join(RECOMPUTE)}")
        if not self.schedule:
            object.__setattr__(self, "schedule", implied_schedule(self.vpp).name)
        check_schedule(self.schedule, self.vpp, "strategy.schedule", "strategy.vpp")  # refused, never rewritten
        if self.vpp > 1:
            require(self.pp > 1, "strategy.vpp", self.vpp, "an interleaved schedule needs pp > 1")
        if self.stage_layers:
            require(len(self.stage_layers) == self.pp, "strategy.stage_layers", list(self.stage_layers),
                    f"must give the layers of each of the pp = {self.pp} stages")
            require(all(isinstance(n, int) and n >= 0 for n in self.stage_layers), "strategy.stage_layers",
                    list(self.stage_layers), "must be whole numbers >= 0")
            ends = [1 if i in (0, len(self.stage_layers) - 1) else 0 for i in range(len(self.stage_layers))]
            require(all(n + e >= self.vpp for n, e in zip(self.stage_layers, ends, strict=True)),
                    "strategy.stage_layers", list(self.stage_layers),
                    f"every stage needs a layer in each of its vpp = {self.vpp} model chunks (the embedding and "
                    "the loss count as one on the first and last stage)")
        require(isinstance(self.offload_activations, int) and 0 <= self.offload_activations <= MAX_LAYERS,
                "strategy.offload_activations", self.offload_activations,
                f"must be a whole number of layers in [0, {MAX_LAYERS:,}]")
        if self.offload_activations:  # Megatron Core: "no support for Pipeline parallelism with CPU offloading"
            require(self.pp == 1, "strategy.offload_activations", self.offload_activations,
                    "needs pp = 1 (activation offloading runs without pipeline parallelism)")
        require(isinstance(self.etp, int) and 0 <= self.etp <= MAX_CHIPS, "strategy.etp", self.etp,
                f"must be an integer in [0, {MAX_CHIPS:,}] (0: as tp)")
        ranks = self.stage_ranks
        if ranks % (self.ep * self.expert_tp):
            fits = [e for e in range(1, ranks + 1) if ranks % (e * self.expert_tp) == 0]
            can = (f"ep can be {', '.join(map(str, fits[:8]))}" + (", ..." if len(fits) > 8 else "")) if fits \
                else f"no ep can with etp {self.expert_tp}"
            raise ConfigError("strategy.ep", self.ep, f"ep*etp = {self.ep}*{self.expert_tp} must divide dp*cp*tp = "
                              f"{ranks} (experts are laid out over a stage's ranks); {can}"
                              + ("" if self.expert_tp == 1 else "; etp 1 allows more"))

    # Derived names, each written once for a Strategy and a StrategyTable (parallel/derived.py)
    num_chips = property(derived.num_chips)
    stage_ranks = property(derived.stage_ranks)
    expert_tp = property(derived.expert_tp)  # etp, or tp when not given
    grad_group = property(derived.grad_group)  # dp x cp: the ranks that reduce their gradients together
    sequence_parallel = property(derived.sequence_parallel)

    @property
    def pipeline_schedule(self) -> PipelineSchedule:
        """The record of this strategy's pipeline schedule (parallel/schedules.py)."""
        return get_schedule(self.schedule)

    @property
    def schedule_code(self) -> Num:
        """The schedule as a number (a StrategyTable row's is the one its vpp implies)."""
        return schedule_code(self.schedule)

    def describe(self) -> str:
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}"]
        parts += [f"{k}={getattr(self, k)}" for k in ("vpp", "cp", "ep") if getattr(self, k) > 1]
        if self.etp and self.etp != self.tp:
            parts.append(f"etp={self.etp}")
        if self.sequence_parallel:
            parts.append("sp")
        parts += [f"zero={self.zero}", f"recompute={self.recompute}", f"mb={self.micro_batch_size}"]
        if self.offload_optimizer:
            parts.append("offload")
        if self.offload_activations:
            parts.append(f"offload_act={self.offload_activations}")
        if self.stage_layers:
            parts.append("layers=" + "/".join(map(str, self.stage_layers)))
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["stage_layers"] = list(self.stage_layers)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "strategy") -> Strategy:
        check_keys(data, [f.name for f in dataclasses.fields(cls)], where)
        kw: dict[str, Any] = {}
        for k, v in data.items():
            f = f"{where}.{k}"
            if k in ("sp", "offload_optimizer", "flash_attention"):
                kw[k] = as_bool(v, f)
            elif k == "recompute":
                kw[k] = as_choice(v, f, RECOMPUTE)
            elif k == "schedule":
                kw[k] = as_choice(v, f, SCHEDULES)
            elif k == "stage_layers":
                if not isinstance(v, (list, tuple)):
                    raise ConfigError(f, v, "must be a list of layer counts, one per pipeline stage")
                kw[k] = tuple(as_int(n, f"{f}[{i}]", minimum=0) for i, n in enumerate(v))
            else:
                kw[k] = as_int(v, f, minimum=0)
        return cls(**kw)


def check_divisibility(strategy: Strategy, model: TransformerSpec, *, num_chips: int,
                       global_batch_size: int, seq_len: int) -> None:
    """Raise InfeasibleError naming the first degree that does not divide what it splits. The search calls it on
    every mesh: each rule is tested first and its message built only when it fails."""
    s, m = strategy, model
    dp, tp, pp, vpp, cp, ep = s.dp, s.tp, s.pp, s.vpp, s.cp, s.ep
    layers = m.total_layers
    if dp * tp * pp * cp != num_chips:
        _fail(s, f"dp*tp*pp*cp = {dp}*{tp}*{pp}*{cp} = {s.num_chips} != num_chips = {num_chips}")
    # Any split of the layers over pp stages (estimate/pipeline.py places them), and of each stage over its vpp
    # model chunks (Narayanan et al. 2021 §2.2.2; chunks need not be equal: Megatron Core's
    # decoder_first/last_pipeline_num_layers and account_for_embedding/loss_in_pipeline_split, which Llama 3
    # 405B's 126 layers on pp 16 used, Dubey et al. 2024 §3.3.2)
    if not (layers >= pp and layers + 2 >= pp * vpp):
        _fail(s, f"layers ({layers}) < pp ({pp})" if layers < pp else
              f"layers + 2 ({layers + 2}) < pp*vpp ({pp * vpp}): every model chunk needs a layer (the "
              "embedding and the loss count as one each)")
    if s.offload_activations >= layers:  # Transformer Engine asserts num_layers <= model_layers - 1
        raise InfeasibleError(f"strategy {s.describe()}: offload_activations ({s.offload_activations}) must be "
                              f"below the model's {layers} layers (one layer's activations stay on the device)")
    if s.stage_layers and sum(s.stage_layers) != layers:
        _fail(s, f"stage_layers sum to {sum(s.stage_layers)}, the model has {layers} layers")
    if m.num_heads % tp:
        _fail(s, f"num_heads ({m.num_heads}) % tp ({tp}) = {m.num_heads % tp}")
    if m.num_kv_heads % tp and tp % m.num_kv_heads:
        _fail(s, f"num_kv_heads ({m.num_kv_heads}) and tp ({tp}): neither divides the other")
    if m.ffn_hidden_size % tp:
        _fail(s, f"ffn_hidden_size ({m.ffn_hidden_size}) % tp ({tp}) != 0")
    if m.num_experts % ep:
        _fail(s, f"num_experts ({m.num_experts}) % ep ({ep}) != 0")
    if m.is_moe and m.expert_ffn_hidden_size % s.expert_tp:
        _fail(s, f"expert_ffn_hidden_size ({m.expert_ffn_hidden_size}) % etp ({s.expert_tp}) != 0")
    if ep != 1 and not m.is_moe:
        _fail(s, f"ep = {ep} needs a mixture-of-experts model")
    if seq_len % cp:
        _fail(s, f"seq_len ({seq_len}) % cp ({cp}) != 0")
    if s.sequence_parallel and seq_len % (tp * cp):
        _fail(s, f"seq_len ({seq_len}) % (tp*cp = {tp * cp}) != 0 with sequence parallelism")
    per_dp = dp * s.micro_batch_size
    if global_batch_size % per_dp:
        _fail(s, f"global_batch_size ({global_batch_size}) % (dp*micro_batch = {per_dp}) = "
              f"{global_batch_size % per_dp}")
    n_micro = global_batch_size // per_dp
    if not s.pipeline_schedule.micro_batches_fit(n_micro, pp):
        _fail(s, f"micro-batches per step ({n_micro}) % pp ({pp}) != 0 (the {s.schedule} schedule needs a "
              "multiple of pp)")


def _fail(s: Strategy, what: str) -> NoReturn:
    raise InfeasibleError(f"strategy {s.describe()} does not divide the model: {what}")
