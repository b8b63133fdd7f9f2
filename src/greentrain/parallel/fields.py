"""One record per Strategy field, and MeshAxis, the parallel axes: the command-line flags, the runs-CSV
columns, the StrategyTable columns and the per-layer cost keys are derived from these records, and each field
has one help text (the CLI prints it). A new axis or knob is one record here plus its field on Strategy
(tests/unit/parallel/test_fields.py checks that the two agree)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from greentrain.parallel.schedules import PIPELINE_SCHEDULES


@dataclass(frozen=True, slots=True)
class StrategyField:
    name: str  # the Strategy field, the YAML key and the runs-CSV column
    help: str
    kind: str  # degree (positive int) | int | bool | choice | text | layers
    flag: str = ""  # the command-line flag without "--" ("": none)
    csv: bool = True  # a runs-CSV column (calibrate/runs.py)
    table: bool = True  # a StrategyTable column (the vectorised search)
    layer_key: bool = False  # shards a layer's work: the vectorised estimator costs each distinct key once


FIELDS: dict[str, StrategyField] = {f.name: f for f in (
    StrategyField("dp", "data-parallel degree (replicas of each stage's weights)", "degree", flag="dp"),
    StrategyField("tp", "tensor-parallel degree (each layer's matrices split over tp ranks, inside a node)",
                  "degree", flag="tp", layer_key=True),
    StrategyField("pp", "pipeline-parallel degree (stages of consecutive layers)", "degree", flag="pp"),
    StrategyField("vpp", "model chunks per pipeline stage (> 1: the interleaved schedule)", "degree", flag="vpp"),
    StrategyField("cp", "context-parallel degree (each sequence split over cp ranks)", "degree", flag="cp",
                  layer_key=True),
    StrategyField("ep", "expert-parallel degree (experts spread over ep ranks of dp x cp x tp)", "degree",
                  flag="ep", layer_key=True),
    StrategyField("etp", "expert tensor-parallel degree (0: the framework's, as tp unless its profile says 1)",
                  "int", flag="etp", layer_key=True),
    StrategyField("zero", "ZeRO stage 0-3 over the data-parallel group", "int", flag="zero"),
    StrategyField("sp", "sequence parallelism (with tp > 1)", "bool", flag="sp"),
    StrategyField("recompute", "activation recomputation: none, selective or full", "choice", flag="recompute"),
    StrategyField("flash_attention", "fused attention (FlashAttention/SDPA); off: naive attention", "bool",
                  flag="flash_attention", table=False),
    StrategyField("micro_batch_size", "sequences per micro-batch", "degree", flag="micro_batch", csv=False,
                  layer_key=True),
    StrategyField("offload_optimizer", "optimizer states in host memory (ZeRO-Offload)", "bool",
                  flag="offload_optimizer", csv=False),
    StrategyField("schedule", "pipeline schedule (default: by vpp): " + "; ".join(
        f"{r.name}, {r.help}" for r in PIPELINE_SCHEDULES.values()), "choice", flag="schedule", csv=False,
        table=False),
    StrategyField("offload_activations", "layers whose saved activations wait in host memory between their "
                  "forward and backward, the first N of the model (Megatron Core cpu_offloading_num_layers, "
                  "Transformer Engine's CPU offload); 0: none; pp 1 only, below the model's layer count",
                  "int", flag="offload_activations"),
    StrategyField("stage_layers", "layers of each pipeline stage, first to last (default: the framework "
                  "places them)", "layers", flag="stage_layers", csv=False, table=False),
)}


class MeshAxis(str, Enum):
    """The parallel axes of a run's device mesh (Strategy's degrees). Ranks are laid out pp, dp, cp, tp from
    the outermost (tp innermost, inside a node); experts are carved out of dp x cp x tp (ep x etp per group)."""

    DP = "dp"
    TP = "tp"
    PP = "pp"
    VPP = "vpp"
    CP = "cp"
    EP = "ep"
    ETP = "etp"

    @property
    def field(self) -> StrategyField:
        return FIELDS[self.value]


STRATEGY_FLAGS = tuple(f.flag for f in FIELDS.values() if f.flag)  # cli/scenario_args.py
CSV_COLUMNS = tuple(f.name for f in FIELDS.values() if f.csv)  # calibrate/runs.py's strategy columns
TABLE_INT_FIELDS = tuple(f.name for f in FIELDS.values() if f.table and f.kind in ("degree", "int", "choice"))
TABLE_BOOL_FIELDS = tuple(f.name for f in FIELDS.values() if f.table and f.kind == "bool")
LAYER_KEY_FIELDS = tuple(f.name for f in FIELDS.values() if f.layer_key)  # estimate/vector.py's per-layer keys
POSITIVE_FIELDS = tuple(f.name for f in FIELDS.values() if f.kind == "degree")  # Strategy checks them >= 1


def flag_help(flag: str) -> str:
    """The help text of the field a command-line flag sets."""
    return next(f.help for f in FIELDS.values() if f.flag == flag)
