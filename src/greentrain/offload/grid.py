"""Planner grids for heatmaps: model x chip x sequence length x device cap x host cap, one plan per cell, with
the energy and carbon of a token through footprint/ (greentrain's own angle: no anchor reports them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.footprint.model import footprint
from greentrain.offload.calibrate import RecordedCell, cell_scenario
from greentrain.offload.config import OffloadCaps, OffloadFramework, OffloadPolicy
from greentrain.offload.plan import OffloadPlan, plan_offload
from greentrain.scenario import Scenario

MAX_CELLS = 10_000
METRICS = ("tokens_per_s", "mfu", "step_time_s", "joules_per_token", "kg_co2e_per_mtok")


@dataclass(frozen=True, slots=True, kw_only=True)
class GridCell:
    model: str
    chip: str
    seq_len: int
    device_gib: float
    host_gib: float
    fits: bool
    tokens_per_s: float = 0.0
    step_time_s: float = 0.0
    mfu: float = 0.0
    bound: str = ""
    joules_per_token: float = 0.0
    kg_co2e_per_mtok: float = 0.0
    measured_tokens_per_s: float | None = None  # from --measured (0: the recorded run failed)

    def metric(self, name: str) -> float:
        return float(getattr(self, name)) if self.fits else math.nan

    @property
    def error(self) -> float | None:
        """Predicted / measured - 1 where both ran."""
        m = self.measured_tokens_per_s
        return self.tokens_per_s / m - 1.0 if m and self.fits else None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {f: getattr(self, f) for f in (
            "model", "chip", "seq_len", "device_gib", "host_gib", "fits", "tokens_per_s", "step_time_s", "mfu",
            "bound", "joules_per_token", "kg_co2e_per_mtok")}
        if self.measured_tokens_per_s is not None:
            out["measured_tokens_per_s"] = self.measured_tokens_per_s
            out["error"] = self.error
        return out


def check_grid(models: Sequence[str], chips: Sequence[str], seq_lens: Sequence[int], device_gibs: Sequence[float],
               host_gibs: Sequence[float]) -> int:
    """Every axis non-empty, every cap a finite number > 0, at most MAX_CELLS cells."""
    axes = (("offload.model", models), ("offload.chip", chips), ("offload.seq_len", seq_lens),
            ("offload.device_gib", device_gibs), ("offload.host_gib", host_gibs))
    for field, values in axes:
        require(len(values) > 0, field, list(values), "must name at least one value")
    for field, values in axes[3:]:
        for v in values:
            require(isinstance(v, (int, float)) and math.isfinite(v) and v > 0, field, v,
                    "must be a finite number > 0")
    n = math.prod(len(v) for _, v in axes)
    require(n <= MAX_CELLS, "offload.grid", n, f"must have at most {MAX_CELLS:,} cells")
    return n


@cache
def _scenario(model: str, chip: str, seq_len: int) -> Scenario:
    return cell_scenario(model, chip, seq_len)


def _cell(plan: OffloadPlan, sc: Scenario, device_gib: float, host_gib: float) -> GridCell:
    util = max(0.0, min(1.0, 1.0 - plan.num_rounds * plan.per_layer.exposed_s / plan.step_time_s))
    fp = footprint(num_chips=1, duration_s=plan.step_time_s, site=sc.site, chip=sc.cluster.chip, utilization=util,
                   host_power_w_per_chip=None)
    return GridCell(model=plan.model, chip=plan.chip, seq_len=plan.seq_len, device_gib=device_gib, host_gib=host_gib,
                    fits=True, tokens_per_s=plan.tokens_per_s, step_time_s=plan.step_time_s, mfu=plan.mfu,
                    bound=plan.bound, joules_per_token=fp.energy_j / plan.tokens_per_step,
                    kg_co2e_per_mtok=fp.emissions_kg_co2e / plan.tokens_per_step * units.MILLION)


def offload_grid(models: Sequence[str], chips: Sequence[str], seq_lens: Sequence[int], device_gibs: Sequence[float],
                 host_gibs: Sequence[float], profile: OffloadFramework,
                 policy: OffloadPolicy | None = None) -> list[GridCell]:
    """One plan per cell; a cell that does not fit (or whose cap exceeds the chip) is ``fits=False``."""
    check_grid(models, chips, seq_lens, device_gibs, host_gibs)
    out = []
    for model in models:
        for chip in chips:
            for seq in seq_lens:
                sc = _scenario(model, chip, seq)
                for dev in device_gibs:
                    for host in host_gibs:
                        try:
                            plan = plan_offload(sc, OffloadCaps.from_gib(device_gib=dev,
                                                                         host_gib=host), policy, profile)
                            out.append(_cell(plan, sc, dev, host))
                        except InfeasibleError:
                            out.append(GridCell(model=sc.model.name, chip=sc.cluster.chip.name, seq_len=seq,
                                                device_gib=dev, host_gib=host, fits=False))
                        except ConfigError as e:
                            if e.field not in ("offload.device_gib", "offload.host_gib"):
                                raise
                            out.append(GridCell(model=sc.model.name, chip=sc.cluster.chip.name, seq_len=seq,
                                                device_gib=dev, host_gib=host, fits=False, bound="over the chip"))
    return out


def attach_measured(cells: list[GridCell], measured: list[RecordedCell]) -> list[GridCell]:
    """Cells with the recorded tokens/s of the same model, chip, sequence length and caps (if any)."""
    from dataclasses import replace

    key = {(m.model, m.chip, m.seq_len, m.device_gib, m.host_gib): m.tokens_per_s for m in measured}
    return [replace(c, measured_tokens_per_s=key.get((c.model, c.chip, c.seq_len, c.device_gib, c.host_gib)))
            for c in cells]
