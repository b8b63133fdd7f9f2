"""One call from the user's inputs to a SwarmResult: devices, model -> ops -> tasks -> rounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from greentrain.config import BOUNDS, require
from greentrain.hardware.chip import PRECISIONS
from greentrain.model.load import load_model
from greentrain.model.ops import model_ops
from greentrain.model.spec import TransformerSpec
from greentrain.sim.devices import Device, load_devices
from greentrain.sim.results import SwarmResult
from greentrain.sim.swarm import ProgressFn, SwarmOptions, simulate_swarm
from greentrain.sim.tasks import TaskSet, build_tasks
from greentrain.sim.trace import Trace
from greentrain.workload import ACTIVATION_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmWorkload:
    """What one round trains: ``batch_tokens`` tokens as sequences of ``seq_len`` (default: one sequence)."""

    batch_tokens: int = 2048
    seq_len: int = 0  # 0: batch_tokens (one sequence)
    precision: str = "bf16"
    tp_depth: int = 2
    min_tp_size: int = 128

    def __post_init__(self) -> None:
        BOUNDS["batch_tokens"].check_int(self.batch_tokens, "batch_tokens")  # ranges: config.BOUNDS
        require(self.seq_len == 0 or BOUNDS["seq_len"].ok(self.seq_len), "seq_len", self.seq_len,
                BOUNDS["seq_len"].rule())
        seq = self.seq_len or self.batch_tokens
        require(self.batch_tokens % seq == 0, "seq_len", seq,
                f"must divide batch_tokens={self.batch_tokens} (a round trains whole sequences)")
        require(self.precision in PRECISIONS, "precision", self.precision,
                f"must be one of {', '.join(PRECISIONS)}")
        require(self.min_tp_size >= 1, "min_tp_size", self.min_tp_size, "must be >= 1")
        require(self.tp_depth >= 0, "tp_depth", self.tp_depth, "must be >= 0")

    @property
    def sequences(self) -> int:
        return self.batch_tokens // (self.seq_len or self.batch_tokens)

    @property
    def bytes_per_elt(self) -> float:
        return ACTIVATION_BYTES[self.precision]


def swarm_tasks(model: TransformerSpec, wl: SwarmWorkload) -> TaskSet:
    """The tasks of one round: every matmul-like op of one batch, tiled (sim/tasks.py)."""
    ops = model_ops(model, wl.sequences, wl.seq_len or wl.batch_tokens, wl.bytes_per_elt)
    return build_tasks(ops, tp_depth=wl.tp_depth, min_tp_size=wl.min_tp_size, bytes_per_elt=wl.bytes_per_elt,
                       model_name=model.name)


def run_swarm(devices: str | Path | Sequence[Device], model: str | TransformerSpec, *, rounds: int = 1,
              workload: SwarmWorkload | None = None, options: SwarmOptions | None = None,
              trace: Trace | None = None, progress: ProgressFn | None = None) -> SwarmResult:
    wl = workload or SwarmWorkload()
    opts = options or SwarmOptions()
    require(rounds >= 1, "rounds", rounds, "must be >= 1")
    devs = tuple(devices) if not isinstance(devices, (str, Path)) else load_devices(devices)
    spec = load_model(model) if isinstance(model, str) else model
    tasks = swarm_tasks(spec, wl)
    res, events, wall = simulate_swarm(devs, tasks, rounds=rounds, options=opts, trace=trace,
                                       progress=progress)
    return SwarmResult(model=spec.name, scheduler=opts.scheduler, seed=opts.seed, num_devices=len(devs),
                       num_tasks=tasks.num_tasks, tp_depth=wl.tp_depth, min_tp_size=wl.min_tp_size,
                       batch_tokens=wl.batch_tokens, precision=wl.precision, rounds=res, num_events=events,
                       wall_s=wall)
