"""Results of a swarm simulation: per device, per round, per run. Frozen; JSON keys carry their units."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRound:
    """What one device did in one round. The four times add up to the round time."""

    name: str
    group: str  # the DEVICES.yaml entry it came from
    ingress_s: float
    compute_s: float
    egress_s: float
    idle_s: float  # waiting for work, or out after a dropout
    tasks_done: int
    failures: int  # dropouts during a task (the task was re-queued)
    cancelled: int  # backup copies that lost the race
    flop_done: float  # FLOPs of the tasks this device completed

    def shares(self, round_time_s: float) -> dict[str, float]:
        t = round_time_s or 1.0
        return {"ingress": self.ingress_s / t, "compute": self.compute_s / t, "egress": self.egress_s / t,
                "idle": self.idle_s / t}

    def to_dict(self, round_time_s: float) -> dict[str, Any]:
        sh = self.shares(round_time_s)
        return {"name": self.name, "group": self.group, "ingress_s": self.ingress_s,
                "compute_s": self.compute_s, "egress_s": self.egress_s, "idle_s": self.idle_s,
                "ingress_share": sh["ingress"],
                "compute_share": sh["compute"], "egress_share": sh["egress"], "idle_share": sh["idle"],
                "tasks_done": self.tasks_done, "failures": self.failures, "cancelled": self.cancelled,
                "flop_done": self.flop_done}


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundResult:
    index: int
    start_s: float
    time_s: float  # this round's duration
    bytes_moved: float  # ingress + egress of every attempt, failed ones included
    flop: float  # the model's FLOPs computed this round (each task once)
    swarm_flop_per_s: float  # sum of the devices' nominal rates
    requeued: int  # tasks re-queued after a dropout
    backups: int  # backup copies launched for stragglers
    devices: tuple[DeviceRound, ...]

    @property
    def finish_s(self) -> float:
        return self.start_s + self.time_s

    @property
    def achieved_flop_per_s(self) -> float:
        return self.flop / self.time_s if self.time_s > 0 else 0.0

    @property
    def utilization(self) -> float:
        """Achieved FLOP/s over the swarm's summed rate."""
        return self.achieved_flop_per_s / self.swarm_flop_per_s

    def mean_shares(self) -> dict[str, float]:
        n = len(self.devices) or 1
        tot = {"ingress": 0.0, "compute": 0.0, "egress": 0.0, "idle": 0.0}
        for d in self.devices:
            for k, v in d.shares(self.time_s).items():
                tot[k] += v / n
        return tot

    def to_dict(self, per_device: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "round": self.index, "start_s": self.start_s, "time_s": self.time_s, "finish_s": self.finish_s,
            "bytes_moved": self.bytes_moved, "flop": self.flop,
            "achieved_flop_per_s": self.achieved_flop_per_s, "swarm_flop_per_s": self.swarm_flop_per_s,
            "utilization": self.utilization, "requeued": self.requeued, "backups": self.backups,
            "mean_shares": self.mean_shares()}
        if per_device:
            out["devices"] = [d.to_dict(self.time_s) for d in self.devices]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmResult:
    model: str
    scheduler: str
    seed: int
    num_devices: int
    num_tasks: int  # per round
    tp_depth: int
    min_tp_size: int
    batch_tokens: int
    precision: str
    rounds: tuple[RoundResult, ...]
    num_events: int
    wall_s: float  # host time the simulation took (not simulated time)

    @property
    def round_times_s(self) -> list[float]:
        return [r.time_s for r in self.rounds]

    @property
    def total_time_s(self) -> float:
        return self.rounds[-1].finish_s if self.rounds else 0.0

    def to_dict(self, per_device: bool = True) -> dict[str, Any]:
        return {
            "mode": "swarm", "model": self.model, "scheduler": self.scheduler, "seed": self.seed,
            "num_devices": self.num_devices, "num_tasks_per_round": self.num_tasks, "tp_depth": self.tp_depth,
            "min_tp_size": self.min_tp_size, "batch_tokens": self.batch_tokens, "precision": self.precision,
            "round_times_s": self.round_times_s, "round_finish_times_s": [r.finish_s for r in self.rounds],
            "total_time_s": self.total_time_s, "num_events": self.num_events, "sim_wall_s": self.wall_s,
            "rounds": [r.to_dict(per_device) for r in self.rounds]}
