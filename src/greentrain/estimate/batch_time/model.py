"""Per-batch time of a pipelined MoE transformer: the simple model of seed 001 (simple_transformer.py).

Source: davidsj/ml_par_sim ``simple_transformer.py``; formulas transcribed in shared/reference/
seed-systems.md §1.7 (the README version, commit 47632d9) and §1.8 (the HEAD version d9c1248, ``v2``).
Only the weight matmuls are costed; each layer is two d_model x d_int matmuls (d_int = FFN width plus the
combined attention width); no activation checkpointing; the network fabric reduces in-network (an
all-reduce costs one send and one receive of a chip's share); routing is balanced; ep = num_experts.
"""

from __future__ import annotations

from dataclasses import dataclass

from greentrain.config import MAX_SHAPE, MAX_TOKENS, require
from greentrain.estimate.batch_time.chips import BatchChip

TOKENS_PER_PARAM = 20  # dataset default: 20 tokens per parameter (Chinchilla rule, as in the seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTimeConfig:
    num_layers: int  # L
    d_model: int  # d
    d_internal_ratio: int = 5  # d_int = ratio * d
    num_experts: int = 1  # e, also the expert-parallel degree
    num_routed_experts: int = 1  # k: experts per token
    dataset_tokens: float | None = None  # None: 20 x parameters
    batch_size: int = 2048  # sequences
    microbatch_size: int = 1  # sequences per micro-batch
    seq_len: int = 2048
    pp: int = 1
    pipeline_interleaving: int = 1
    dp: int = 1
    tp: int = 1  # internal (d_int) tensor parallel
    tp2: int = 1  # external (d_model) tensor parallel
    precision_bits: int = 8
    v2: bool = False  # the HEAD revision (§1.8)
    base_utilization: float = 0.6  # v2 only

    def __post_init__(self) -> None:
        for name in ("num_layers", "d_model", "d_internal_ratio", "num_experts", "num_routed_experts",
                     "batch_size", "microbatch_size", "seq_len", "pp", "pipeline_interleaving", "dp", "tp",
                     "tp2", "precision_bits"):
            value = getattr(self, name)
            require(isinstance(value, int) and 1 <= value <= MAX_SHAPE, name, value,
                    f"must be an integer in [1, {MAX_SHAPE:.0e}]")
        if self.dataset_tokens is not None:
            require(0 < self.dataset_tokens <= MAX_TOKENS, "dataset_size", self.dataset_tokens,
                    f"must be in (0, {MAX_TOKENS:.0e}] tokens")
        bu = self.base_utilization
        require(0 < bu <= 1, "base_utilization", bu, "must be in (0, 1]")
        self._check_divisibility()

    def _check_divisibility(self) -> None:
        """The seed's asserts, in its order, with its messages (seed-systems.md §1.7)."""
        e, k, b, m = self.num_experts, self.num_routed_experts, self.batch_size, self.microbatch_size
        sl = self.seq_len
        L, pp, ilv, dp = self.num_layers, self.pp, self.pipeline_interleaving, self.dp
        require(e % k == 0, "n_routed_experts", k, f"routed experts must divide number of experts ({e})")
        require(b % m == 0, "microbatch_size", m, f"microbatch size must divide batch size ({b})")
        require(m * sl * k % (dp * e) == 0, "microbatch_size*seq_len*n_routed_experts", m * sl * k,
                f"need integer number of tokens per matmul (dp*n_experts = {dp * e})")
        require(L % (pp * ilv) == 0, "n_layers", L,
                f"need integer number of virtual pipeline stages (pp*pipeline_interleaving = {pp * ilv})")
        require(pp > 1 or ilv == 1, "pipeline_interleaving", ilv, "can't interleave a single pipeline stage")
        require(m * sl % dp == 0, "dp", dp,
                f"data-parallel degree must divide microbatch size in tokens ({m * sl})")
        require(self.d_internal % self.tp == 0, "tp", self.tp,
                f"tensor-parallel degree must divide internal dimension ({self.d_internal})")
        require(self.d_model % self.tp2 == 0, "tp2", self.tp2,
                f"exterior tensor-parallel degree must divide residual dimension ({self.d_model})")

    @property
    def d_internal(self) -> int:
        return self.d_internal_ratio * self.d_model

    @property
    def ep(self) -> int:
        return self.num_experts

    @property
    def num_chips(self) -> int:
        return self.pp * self.dp * self.tp * self.tp2 * self.ep

    @property
    def params_per_expert(self) -> int:
        return self.num_layers * 2 * self.d_model * self.d_internal

    @property
    def num_params(self) -> int:
        """P: every expert's weights."""
        return self.num_experts * self.params_per_expert

    @property
    def num_active_params(self) -> int:
        """N: the weights one token uses (k experts)."""
        return self.num_routed_experts * self.params_per_expert


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTimeResult:
    chip: BatchChip
    num_chips: int
    num_params: int
    num_active_params: int
    num_tokens: float  # whole batches only
    num_batches: float
    boundary_interval: int  # layers between pipeline-stage crossings
    bubble_layers: int
    flop_per_batch: float
    experts_per_chip: int
    matmuls_per_chip_per_layer: int
    matmul_d_internal: int  # one chip's matmul: d_int/tp x d_model/tp2 x tokens
    matmul_d_model: int
    matmul_tokens: int
    matmul_time_s: float
    bubble_time_s: float
    full_time_s: float
    full_flop_time_s: float
    full_net_time_s: float  # 0 in the README version (communication assumed overlapped)
    grad_reduction_time_s: float
    batch_time_s: float
    utilization: float
    run_time_s: float
    total_flop: float


class _Costs:
    """Timing primitives of the seed, bound to one chip and precision."""

    def __init__(self, cfg: BatchTimeConfig, chip: BatchChip) -> None:
        self.chip, self.prec = chip, cfg.precision_bits
        self.bu = cfg.base_utilization if cfg.v2 else 1.0
        self.v2 = cfg.v2

    def matmul_time(self, a: int, b: int, c: int) -> float:
        """Roofline of (a x b) @ (b x c): max(2abc FLOP at the 8-bit rate scaled by precision, memory IO).

        Memory IO counts elements as bytes whatever the precision (as in the seed). v2 divides both rates
        by the base utilization (seed-systems.md §1.8).
        """
        flop = 2 * a * b * c
        mem_io = a * b + b * c + a * c
        if self.v2:
            return max(flop / (self.bu * self.chip.flop_per_s_8bit) * (self.prec / 8),
                       mem_io / (self.bu * self.chip.memory_bytes_per_s))
        return max(flop / self.chip.flop_per_s_8bit * (self.prec / 8), mem_io / self.chip.memory_bytes_per_s)

    def tx_rx(self, size: float, scatter: int) -> float:
        """Send and receive one chip's share of ``size`` elements: 2 x bytes / network rate."""
        bytes_per_chip = size / scatter * self.prec / 8
        return 2 * bytes_per_chip / self.chip.net_bytes_per_s

    def allreduce(self, size: float, scatter: int, degree: int) -> float:
        """In-network all-reduce: the fabric sums, so a chip only sends and receives its share."""
        return 0.0 if degree == 1 else self.tx_rx(size, scatter)


def _layer_comm(cfg: BatchTimeConfig, c: _Costs) -> tuple[float, float, float]:
    """Per layer and micro-batch: internal all-reduce, external all-reduce, one stage crossing (fwd+bwd)."""
    m, sl, d, k, dp, tp, tp2, ep = (cfg.microbatch_size, cfg.seq_len, cfg.d_model, cfg.num_routed_experts,
                                    cfg.dp, cfg.tp, cfg.tp2, cfg.ep)
    internal = 2 * c.allreduce(m * sl * cfg.d_internal * k, dp * tp * ep, tp2)
    external = 2 * c.allreduce(m * sl * d, dp * tp2 * ep // k, k * tp)
    crossing = 2 * c.tx_rx(m * sl * d, dp * tp * tp2 * ep)
    return internal, external, crossing


def _bubble_time(cfg: BatchTimeConfig, c: _Costs, matmul_s: float, interval: int, layers: int) -> float:
    """Pipeline fill and drain: each bubble layer's two matmuls (1 fwd + 2 bwd each) and its communication."""
    internal, external, crossing = _layer_comm(cfg, c)
    experts_per_chip = cfg.num_experts // cfg.ep
    ep, expert_hop = cfg.ep, cfg.num_routed_experts * cfg.tp == 1 and cfg.ep > 1
    total = 0.0
    for layer in range(layers):
        total += 3 * experts_per_chip * matmul_s  # first matmul
        total += internal
        total += 3 * experts_per_chip * matmul_s  # second matmul
        total += external
        if layer % interval == interval - 1:  # crossing a pipeline stage (v2 counts the tx side only)
            total += crossing / 2 if cfg.v2 else crossing
        elif expert_hop:  # moving to another expert's chip with probability (ep-1)/ep
            total += 2 * ((ep - 1) / ep) * (crossing / 2)
    return total


def batch_time(cfg: BatchTimeConfig, chip: BatchChip) -> BatchTimeResult:
    """Bubble + steady state + gradient reduction for one batch, and the whole run (seed §1.7 / §1.8)."""
    c = _Costs(cfg, chip)
    L, b, sl, pp, dp, e = cfg.num_layers, cfg.batch_size, cfg.seq_len, cfg.pp, cfg.dp, cfg.num_experts
    p = cfg.num_chips
    dataset = TOKENS_PER_PARAM * cfg.num_params if cfg.dataset_tokens is None else cfg.dataset_tokens
    n_batches = dataset // (b * sl)
    n_micro = b // cfg.microbatch_size
    cluster_flop_per_s = p * chip.flop_per_s_8bit * c.bu * (8 / cfg.precision_bits)
    interval = L // (pp * cfg.pipeline_interleaving)
    bubble_layers = (pp - 1) * interval
    flop_per_batch = 6 * cfg.num_active_params * b * sl
    tokens = cfg.microbatch_size * sl * cfg.num_routed_experts // (dp * e)
    mm = (cfg.d_internal // cfg.tp, cfg.d_model // cfg.tp2, tokens)
    matmul_s = c.matmul_time(*mm)
    matmuls_per_layer = 2 * e // cfg.ep
    bubble = _bubble_time(cfg, c, matmul_s, interval, bubble_layers)
    if cfg.v2:
        steps = (L // pp) * n_micro
        flop_time = steps * (3 * matmuls_per_layer * matmul_s)
        internal, external, crossing = _layer_comm(cfg, c)
        hop = cfg.num_routed_experts * cfg.tp == 1 and cfg.ep > 1
        net_time = steps * (internal + external + (1 if hop else 1 / interval) * crossing)
        full = max(flop_time, net_time)
    else:  # communication fully overlapped
        flop_time = full = 3 * (L // pp) * matmuls_per_layer * matmul_s * n_micro
        net_time = 0.0
    grad = 0.0 if dp == 1 else c.allreduce(cfg.num_params, p // dp, dp)
    batch = bubble + full + grad
    return BatchTimeResult(
        chip=chip, num_chips=p, num_params=cfg.num_params, num_active_params=cfg.num_active_params,
        num_tokens=n_batches * b * sl, num_batches=n_batches, boundary_interval=interval,
        bubble_layers=bubble_layers, flop_per_batch=flop_per_batch, experts_per_chip=e // cfg.ep,
        matmuls_per_chip_per_layer=matmuls_per_layer, matmul_d_internal=mm[0], matmul_d_model=mm[1],
        matmul_tokens=mm[2], matmul_time_s=matmul_s, bubble_time_s=bubble, full_time_s=full,
        full_flop_time_s=flop_time, full_net_time_s=net_time, grad_reduction_time_s=grad, batch_time_s=batch,
        utilization=c.bu * flop_per_batch / (cluster_flop_per_s * batch), run_time_s=batch * n_batches,
        total_flop=6 * cfg.num_active_params * (n_batches * b * sl),
    )
