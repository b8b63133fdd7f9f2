"""A whole run: step estimate x number of steps, device-hours, and its footprint (energy, CO2e, cost)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from greentrain.errors import InfeasibleError
from greentrain.estimate.efficiency import Efficiency, efficiency_for
from greentrain.estimate.step import StepEstimate, estimate_step
from greentrain.footprint.host import default_host_power_w_per_chip
from greentrain.footprint.model import Footprint, chip_power_w, footprint
from greentrain.footprint.prices import device_price_usd_per_s
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEstimate:
    scenario: Scenario
    strategy: Strategy
    step: StepEstimate
    num_steps: int
    run_time_s: float
    footprint: Footprint
    strategy_chosen: bool = False  # True when the planner picked the strategy itself
    efficiency: Efficiency | None = None  # what the step was predicted with

    @property
    def device_hours(self) -> float:
        return self.footprint.device_hours

    @property
    def train_tokens(self) -> float:
        return self.num_steps * self.scenario.workload.input_tokens_per_step


def estimate_run(sc: Scenario, strategy: Strategy | None = None, *, chosen: bool = False,
                 eff: Efficiency | None = None) -> RunEstimate:
    """Estimate a whole run. The footprint uses the chip's power at the step's busy fraction (between idle
    and TDP), the host overhead of footprint/host.py, the site's PUE and grid intensity, and the chip's
    cloud price (else electricity at the site's price)."""
    s = strategy or sc.strategy
    if s is None:
        raise InfeasibleError("no strategy given: pass one or let `greentrain plan` choose")
    eff = eff or efficiency_for(sc.cluster.chip.name)
    step = estimate_step(sc, s, eff=eff)
    steps = sc.workload.steps() or 1
    run_s = step.step_time_s * steps
    chip = sc.cluster.chip
    power = chip_power_w(chip, step.utilization) if chip.tdp_w > 0 else None
    host = default_host_power_w_per_chip(chip, power or 0.0)
    quote = device_price_usd_per_s(chip, sc.site)  # the region's instance price, else None: catalog price
    fp = footprint(num_chips=sc.cluster.num_chips, duration_s=run_s, site=sc.site, chip=chip,
                   utilization=step.utilization, power_w=power, host_power_w_per_chip=host,
                   price_usd_per_device_s=quote.usd_per_device_s if quote else None, power_predicted=True)
    if quote:
        fp = dataclasses.replace(fp, notes=(*fp.notes, quote.note()))
    return RunEstimate(scenario=sc, strategy=s, step=step, num_steps=steps, run_time_s=run_s, footprint=fp,
                       strategy_chosen=chosen, efficiency=eff)

