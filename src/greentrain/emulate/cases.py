"""What to emulate: one frozen, validated description per op (no torch: checked before any rank starts).

MatMul policies are derived from the shardings exactly as seed 003 derives them
(levendlee/ml-labs `parallelism/tensor_parallelism/matmul.py`, `MatMulSharding`; see seed-systems.md §3.5):
    Unsharded        A, B and C all full
    MatchedInner     A sharded only on dim 1, B only on dim 0, C full, and A[1] == B[0]
    UnmatchedInner   as above with A[1] != B[0]
    Outer            otherwise, if B[1] is full
    Full             otherwise
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from greentrain.emulate.sharding import Mesh2D, TensorSharding
from greentrain.errors import ConfigError, did_you_mean
from greentrain.parallel import schedules

REL_TOLERANCE = 1e-5  # |out - ref|_max / |ref|_max, float32 (issue 7: "float32, 1e-5 relative")


class MatMulPolicy(str, Enum):
    UNSHARDED = "unsharded"
    MATCHED_INNER = "matched_inner"
    UNMATCHED_INNER = "unmatched_inner"
    OUTER = "outer"
    FULL = "full"


class Schedule(str, Enum):
    """The pipeline schedules emulate runs on torch.distributed (emulate/pipeline.py builds their sends and
    receives): registered schedules (parallel/schedules.py), by their record's name. Any other registered
    schedule is priced by plan and simulate but not emulated (`emulate pipeline --schedule` refuses it)."""

    GPIPE = schedules.GPIPE.name
    ONE_F_ONE_B = schedules.ONE_F_ONE_B.name


def derive_policy(a: TensorSharding, b: TensorSharding, c: TensorSharding) -> MatMulPolicy:
    """Seed 003 `MatMulSharding.policy`, rule for rule."""
    if a.full and b.full and c.full:
        return MatMulPolicy.UNSHARDED
    a_inner_only = a.dims[0].full and not a.dims[1].full
    b_inner_only = not b.dims[0].full and b.dims[1].full
    if a_inner_only and b_inner_only and c.full:
        return MatMulPolicy.MATCHED_INNER if a.dims[1] == b.dims[0] else MatMulPolicy.UNMATCHED_INNER
    return MatMulPolicy.OUTER if b.dims[1].full else MatMulPolicy.FULL


def parse_policy(text: str) -> MatMulPolicy:
    names = [p.value for p in MatMulPolicy]
    key = text.strip().lower().replace("-", "_")
    if key not in names:
        raise ConfigError("policy", text, "unknown MatMul policy" + did_you_mean(text, names))
    return MatMulPolicy(key)


def _positive(field: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(field, value, "must be an integer >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class MatMulCase:
    """C(m x n) = A(m x k) @ B(k x n) over ``mesh``; ``policy`` (if given) must equal the derived one."""

    mesh: Mesh2D
    m: int
    k: int
    n: int
    a: TensorSharding
    b: TensorSharding
    c: TensorSharding
    policy: MatMulPolicy | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("m", "k", "n"):
            _positive(name, getattr(self, name))
        self.a.check(self.mesh, (self.m, self.k), "a")
        self.b.check(self.mesh, (self.k, self.n), "b")
        self.c.check(self.mesh, (self.m, self.n), "c")
        derived = derive_policy(self.a, self.b, self.c)
        if self.policy is not None and self.policy is not derived:
            raise ConfigError("policy", self.policy.value,
                              f"the shardings a={self.a} b={self.b} c={self.c} give {derived.value}")
        if derived is MatMulPolicy.FULL:
            blocks = {(self.a.dims[0].shard_index(self.mesh, r), self.b.dims[1].shard_index(self.mesh, r))
                      for r in range(self.mesh.num_devices)}
            if len(blocks) != self.a.dims[0].num_shards * self.b.dims[1].num_shards:
                raise ConfigError("b", str(self.b), "full sharding needs m (a dim 0) and n (b dim 1) "
                                  "sharded over different mesh axes")

    @property
    def derived_policy(self) -> MatMulPolicy:
        return derive_policy(self.a, self.b, self.c)

    @property
    def world_size(self) -> int:
        return self.mesh.num_devices

    @property
    def label(self) -> str:
        return f"matmul {self.derived_policy.value} a={self.a} b={self.b} c={self.c}"


# The GSPMD feed-forward shardings over mesh axes X and Y (seed `ffn.py`, GSPMD paper, Xu et al. 2021, §3.3):
# x1=(X,_,Y) w1=(X,Y) b1=(Y) w2=(Y,X) b2=(Y) o=(X,_,Y)


@dataclass(frozen=True, slots=True, kw_only=True)
class FfnCase:
    """o = relu(x @ w1 + b1) @ w2 + b2 with x (batch, seq, d_model); GSPMD-sharded or unsharded."""

    mesh: Mesh2D
    batch: int
    seq: int
    d_model: int
    d_ff: int
    gspmd: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch", "seq", "d_model", "d_ff"):
            _positive(name.replace("_", "-"), getattr(self, name))
        if not self.gspmd:
            return
        x, y = self.mesh.x_size, self.mesh.y_size
        for field, size, div in (("batch", self.batch, x), ("d-model", self.d_model, x * y),
                                 ("d-ff", self.d_ff, y)):
            if size % div:
                raise ConfigError(field, size, f"must be divisible by {div} for GSPMD on a {self.mesh} mesh")

    @property
    def policy(self) -> str:
        return "gspmd" if self.gspmd else "unsharded"

    @property
    def world_size(self) -> int:
        return self.mesh.num_devices

    @property
    def label(self) -> str:
        return f"ffn {self.policy}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MlpCase:
    """Megatron-LM MLP (Shoeybi et al. 2019, §3, Fig. 3a): column-parallel w1, row-parallel w2, over ``tp`` ranks;
    forward and backward."""

    tp: int
    tokens: int
    d_model: int
    d_ff: int
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("tp", "tokens", "d_model", "d_ff"):
            _positive(name.replace("_", "-"), getattr(self, name))
        if self.d_ff % self.tp:
            raise ConfigError("d-ff", self.d_ff, f"must be divisible by tp={self.tp}")

    @property
    def policy(self) -> str:
        return "megatron"

    @property
    def world_size(self) -> int:
        return self.tp

    @property
    def label(self) -> str:
        return f"mlp megatron tp={self.tp}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineCase:
    """A dense+ReLU MLP, one layer per stage (seed `pipeline_parallelism/mlp.py`), forward, backward and one SGD
    step over ``micro_batches`` micro-batches."""

    units: tuple[int, ...]
    micro_batches: int
    batch: int
    schedule: Schedule = Schedule.GPIPE
    learning_rate: float = 1e-3
    seed: int = 0

    def __post_init__(self) -> None:
        if len(self.units) < 2:
            raise ConfigError("units", ",".join(map(str, self.units)), "needs at least 2 sizes (one stage)")
        for u in self.units:
            _positive("units", u)
        _positive("micro-batches", self.micro_batches)
        _positive("batch", self.batch)
        if self.batch % self.micro_batches:
            raise ConfigError("batch", self.batch, f"must be divisible by micro-batches={self.micro_batches}")
        if not self.learning_rate > 0:
            raise ConfigError("learning-rate", self.learning_rate, "must be > 0")

    @property
    def stages(self) -> int:
        return len(self.units) - 1

    @property
    def policy(self) -> str:
        return self.schedule.value

    @property
    def world_size(self) -> int:
        return self.stages

    @property
    def label(self) -> str:
        return f"pipeline {self.schedule.value} S={self.stages} R={self.micro_batches}"


# Counting mode (emulate/counting.py) runs every rank's program in this process: each rank costs two process-group
# creations and each of its micro-batches its stage's calls (~1-2 ms in Python), so the work grows as ranks x
# micro-batches; its limit is 65,536 ranks at the default 4 micro-batches (--micro-batches 1e9 ran for ever).
MAX_COUNTED_RANKS = 65_536
MAX_COUNTED_RANK_MICRO_BATCHES = MAX_COUNTED_RANKS * 4


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshStepCase:
    """One training step on a tp x pp x dp mesh (Megatron-LM's rank order: tp fastest, then pp, then dp):
    each pipeline stage is one Megatron MLP (column-parallel w1, row-parallel w2 over the tp ranks), micro-
    batches of ``tokens`` rows run 1F1B between stages, and the gradients are all-reduced over dp."""

    tp: int
    pp: int
    dp: int
    micro_batches: int
    tokens: int
    d_model: int
    d_ff: int
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "micro_batches", "tokens", "d_model", "d_ff"):
            _positive(name.replace("_", "-"), getattr(self, name))
        if self.d_ff % self.tp:
            raise ConfigError("d-ff", self.d_ff, f"must be divisible by tp={self.tp}")

    @property
    def policy(self) -> str:
        return "megatron 1f1b"

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def label(self) -> str:
        return f"mesh tp={self.tp} pp={self.pp} dp={self.dp} R={self.micro_batches}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultCase:
    """Rank ``rank`` raises or hangs: checks that the launcher fails the whole run cleanly (tests)."""

    world_size: int
    rank: int
    kind: str = "raise"  # "raise" | "hang"

    def __post_init__(self) -> None:
        if self.kind not in ("raise", "hang"):
            raise ConfigError("kind", self.kind, "must be raise or hang")

    @property
    def label(self) -> str:
        return f"fault {self.kind} on rank {self.rank}"

    @property
    def policy(self) -> str:
        return self.kind


Case = MatMulCase | FfnCase | MlpCase | PipelineCase | MeshStepCase | FaultCase
