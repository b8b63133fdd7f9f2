"""The inputs of the seed-001 traffic model (transformer.py of davidsj/ml_par_sim) and its efficiency rules.

Checks run in the seed's order (seed-systems.md §1.3): tokens per expert, batch over data-parallel
degree, then the efficiency constraints (unless skipped), then the divisibility rules the seed hit while
building the model. Bad shapes raise ConfigError naming the flag; a violated efficiency constraint raises
InfeasibleError with the seed's message and the true numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from greentrain.config import MAX_SHAPE, MAX_TOKENS, require
from greentrain.errors import InfeasibleError

# Efficiency constants of the seed (transformer.py): critical batch (gradient noise scale), pipeline
# micro-batches per stage, and arithmetic intensity (tokens and units per matmul).
MAX_TOKENS_PER_BATCH_PER_EXPERT = 4096 * 2048
MICROBATCHES_PER_PIPELINE_STAGE = 4
MIN_TOKENS_PER_MATMUL = 1024
MIN_UNITS_PER_MATMUL = 1024
AXIS_ORDER = ("DATA", "PIPE", "EXP", "SEQ", "TENSOR_INT", "TENSOR_EXT")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficConfig:
    """A GPT-like run: shape, data, six parallel degrees and the seed's modelling switches."""

    num_layers: int
    d_model: int
    d_ffn: int
    num_heads: int
    d_head: int = 64
    num_kv_heads: int = 1  # 1: multi-query (the seed's default); num_heads: multi-head; between: GQA
    num_experts: int = 1  # top-1 routing, tokens split evenly over experts
    batch_size: int = 2048  # sequences per batch
    seq_len: int = 2048
    dataset_tokens: float
    glu: bool = False
    consecutive_attn_and_ffn: bool = False  # default: the parallel (GPT-J) block
    activation_checkpointing: bool = False
    fwd_only: bool = False
    net_precision_bytes: int = 2
    dp: int = 1  # DATA
    pp: int = 1  # PIPE (rotational)
    ep: int = 1  # EXP
    sp: int = 1  # SEQ
    tp_int: int = 1  # TENSOR_INT: the d_ffn and attention-head dims
    tp_ext: int = 1  # TENSOR_EXT: the d_model dim
    skip_efficiency_check: bool = False

    def __post_init__(self) -> None:
        for name in ("num_layers", "d_model", "d_ffn", "num_heads", "d_head", "num_kv_heads", "num_experts",
                     "batch_size", "seq_len", "net_precision_bytes", "dp", "pp", "ep", "sp", "tp_int",
                     "tp_ext"):
            value = getattr(self, name)
            require(isinstance(value, int) and 1 <= value <= MAX_SHAPE, name, value,
                    f"must be an integer in [1, {MAX_SHAPE:.0e}]")
        require(math.isfinite(self.dataset_tokens) and 0 < self.dataset_tokens <= MAX_TOKENS, "dataset_size",
                self.dataset_tokens, f"must be in (0, {MAX_TOKENS:.0e}] tokens")
        require(self.num_batches >= 1, "dataset_size", self.dataset_tokens,
                f"must hold at least one batch: round(dataset_size / (batch_size*seq_len = "
                f"{self.batch_size * self.seq_len})) is 0")
        require(self.num_heads % self.num_kv_heads == 0, "num_kv_heads", self.num_kv_heads,
                f"must divide num_heads={self.num_heads}")
        require(self.seq_len % self.num_experts == 0, "seq_len", self.seq_len,
                f"must be divisible by num_experts={self.num_experts} (tokens are split evenly over experts)")
        require(self.batch_size % self.dp == 0, "batch_size", self.batch_size,
                f"must be divisible by p_data={self.dp}")

    # ---- derived sizes -------------------------------------------------------------------------------
    @property
    def tokens_per_expert(self) -> int:
        """expert_l: a sequence's tokens routed to one expert (top-1, balanced)."""
        return self.seq_len // self.num_experts

    @property
    def attn_width(self) -> int:
        return self.num_heads * self.d_head

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * self.d_head

    @property
    def multi_query(self) -> bool:
        return self.num_kv_heads == 1

    @property
    def degrees(self) -> dict[str, int]:
        """Axis name -> degree, in the fixed order DATA, PIPE, EXP, SEQ, TENSOR_INT, TENSOR_EXT."""
        values = (self.dp, self.pp, self.ep, self.sp, self.tp_int, self.tp_ext)
        return dict(zip(AXIS_ORDER, values, strict=True))

    @property
    def num_chips(self) -> int:
        return math.prod(self.degrees.values())

    @property
    def num_batches(self) -> int:
        """round(dataset / tokens per batch), Python's banker's rounding as in the seed."""
        return round(self.dataset_tokens / (self.batch_size * self.seq_len))

    @property
    def num_tokens(self) -> int:
        """D: the tokens actually trained on (whole batches)."""
        return self.num_batches * self.batch_size * self.seq_len

    @property
    def num_params(self) -> int:
        """N as the seed prints it: every expert's attention and FFN matrices (no embeddings)."""
        d, a, f = self.d_model, self.attn_width, self.d_ffn
        per_expert = 2 * d * a + 2 * d * self.kv_width + (3 if self.glu else 2) * d * f
        return self.num_layers * self.num_experts * per_expert


def check_shapes(cfg: TrafficConfig) -> None:
    """The seed's divisibility asserts while laying out the model, as ConfigErrors naming the flag."""
    el = cfg.tokens_per_expert
    rules = (
        (cfg.num_layers % cfg.pp == 0, "num_layers", cfg.num_layers, f"must be divisible by p_pipe={cfg.pp}"),
        (cfg.num_experts % cfg.ep == 0, "num_experts", cfg.num_experts,
         f"must be divisible by p_exp={cfg.ep}"),
        (el % cfg.sp == 0, "seq_len/num_experts", el, f"must be divisible by p_seq={cfg.sp}"),
        (el % cfg.tp_ext == 0, "seq_len/num_experts", el,
         f"must be divisible by p_tensor_ext={cfg.tp_ext} (keys and values are scattered over it)"),
        (cfg.d_model % cfg.tp_ext == 0, "d_model", cfg.d_model,
         f"must be divisible by p_tensor_ext={cfg.tp_ext}"),
        (cfg.d_ffn % cfg.tp_int == 0, "d_ffn", cfg.d_ffn, f"must be divisible by p_tensor_int={cfg.tp_int}"),
        (cfg.num_heads % cfg.tp_int == 0, "num_heads", cfg.num_heads,
         f"must be divisible by p_tensor_int={cfg.tp_int}"),
        (cfg.multi_query or cfg.num_kv_heads % cfg.tp_int == 0, "num_kv_heads", cfg.num_kv_heads,
         f"must be 1 or divisible by p_tensor_int={cfg.tp_int}"),
    )
    for ok, field, value, rule in rules:
        require(ok, field, value, rule)


def allowed_microbatch_sizes(cfg: TrafficConfig) -> tuple[int, ...]:
    """The seed's efficiency constraints (seed-systems.md §1.3); the micro-batch sizes that satisfy them.

    Raises InfeasibleError with the seed's message; the first message prints the true limit 4096*2048
    (the seed printed 2048*2048 = 4194304 while testing against 4096*2048).
    """
    b, el, dp, pp = cfg.batch_size, cfg.tokens_per_expert, cfg.dp, cfg.pp
    if b * el > MAX_TOKENS_PER_BATCH_PER_EXPERT:
        raise InfeasibleError(f"Tokens per batch too large: b*expert_l = {b}*{el} = {b * el} > "
                              f"{MAX_TOKENS_PER_BATCH_PER_EXPERT} = 4096*2048")
    max_microbatches = b // dp
    if pp > 1:
        min_microbatches = MICROBATCHES_PER_PIPELINE_STAGE * pp
        if max_microbatches < min_microbatches:
            raise InfeasibleError(f"Pipeline bubble too large: {max_microbatches} < {min_microbatches}")
        max_mb = math.floor(b / min_microbatches)
    else:
        max_mb = b
    tokens_per_matmul_per_sample = el / (dp * cfg.sp)
    min_mb = math.ceil(MIN_TOKENS_PER_MATMUL / tokens_per_matmul_per_sample / dp) * dp
    if min_mb > max_mb:
        raise InfeasibleError(f"Efficient microbatch size impossible: {min_mb} > {max_mb}")
    allowed = tuple(m for m in range(min_mb, max_mb + 1, dp) if b % m == 0)
    if not allowed:
        raise InfeasibleError(f"No factor of {b} and multiple of {dp} found between {min_mb} and {max_mb}")
    if cfg.tp_int > cfg.d_ffn / MIN_UNITS_PER_MATMUL:
        raise InfeasibleError(f"Internal tensor parallelism too large: {cfg.tp_int} > d_ffn/1024 = "
                              f"{cfg.d_ffn // MIN_UNITS_PER_MATMUL}")
    if cfg.tp_int > cfg.attn_width / MIN_UNITS_PER_MATMUL:
        raise InfeasibleError(f"Internal tensor parallelism too large: {cfg.tp_int} > "
                              "num_heads*d_head/1024 = "
                              f"{cfg.attn_width // MIN_UNITS_PER_MATMUL}")
    if cfg.tp_ext > cfg.d_model / MIN_UNITS_PER_MATMUL:
        raise InfeasibleError(f"External tensor parallelism too large: {cfg.tp_ext} > "
                              f"{cfg.d_model // MIN_UNITS_PER_MATMUL}")
    return allowed
