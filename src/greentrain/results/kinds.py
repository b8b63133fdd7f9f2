"""The result kinds: one frozen view per JSON a command writes (see results/view.py for the rules).

The typed fields are the ones the HTML report, ``compare`` and ``footprint RUN.json`` read; every other key
the writer puts in the file is kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from greentrain.results.view import ResultView, typed

_view = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)


@_view
class PlanResult(ResultView):
    """``greentrain plan --json`` (report/plan.py's plan_to_dict): one training run, predicted."""

    KIND: ClassVar[str] = "plan"
    model: str = typed("str")
    chip: str = typed("str")
    num_chips: int = typed("int")
    strategy: dict[str, Any] = typed("map")
    step_time_s: float = typed("number")
    step_breakdown_s: dict[str, float] = typed("numbers")
    tokens_per_s: float = typed("number")
    mfu: float = typed("number")
    hfu: float = typed("number")
    memory_bytes_per_device: dict[str, float] = typed("numbers")
    num_steps: int = typed("int")
    run_time_s: float = typed("number")
    energy_kwh: float = typed("number")
    cost_usd: float = typed("number")
    emissions_kg_co2e: float = typed("number")
    operational_kg_co2e: float = typed("number")
    embodied_kg_co2e: float = typed("number")
    region: str = typed("str")
    grid_g_co2e_per_kwh: float = typed("number")
    pue: float = typed("number")


@_view
class SearchRow(ResultView):
    """One ranked strategy of ``search --json`` with its full estimate (as ``plan --json``)."""

    rank: int = typed("int")
    chip: str = typed("str")
    num_chips: int = typed("int")
    region: str = typed("str")
    describe: str = typed("str")
    step_time_s: float = typed("number")
    run_time_s: float = typed("number")
    cost_usd: float = typed("number")
    emissions_kg_co2e: float = typed("number")
    energy_kwh: float = typed("number")
    total_memory_bytes_per_device: float = typed("number")  # a total (plan's memory_bytes_per_device is a breakdown)
    mfu: float = typed("number")
    estimate: PlanResult | None = typed("view", required=False, of=PlanResult)


@_view
class SearchResultView(ResultView):
    """``greentrain search --json``: the ranked strategies, the Pareto front, the counts."""

    KIND: ClassVar[str] = "search"
    objective: str = typed("str")
    num_candidates: int = typed("int")
    num_feasible: int = typed("int")
    search_time_s: float = typed("number")
    ranked: tuple[SearchRow, ...] = typed("views", of=SearchRow)
    pareto: tuple[dict[str, Any], ...] = typed("maps")


@_view
class SimStepView(ResultView):
    """``greentrain simulate step --json``: one training step simulated event by event."""

    KIND: ClassVar[str] = "simulate"
    mode: str = typed("str")
    step_time_s: float = typed("number")
    pipeline_time_s: float = typed("number")
    analytic_step_time_s: float = typed("number")
    error_vs_analytic: float = typed("number")
    bubble_fraction: float = typed("number")
    schedule: str = typed("str")
    pp: int = typed("int")
    vpp: int = typed("int")
    num_micro_batches: int = typed("int")
    stages: tuple[dict[str, Any], ...] = typed("maps")


@_view
class SimSwarmView(ResultView):
    """``greentrain simulate swarm --json``: a device swarm trained round by round."""

    KIND: ClassVar[str] = "simulate"
    mode: str = typed("str")
    model: str = typed("str")
    scheduler: str = typed("str")
    num_devices: int = typed("int")
    num_tasks_per_round: int = typed("int")
    round_times_s: tuple[float, ...] = typed("number_list")
    total_time_s: float = typed("number")
    rounds: tuple[dict[str, Any], ...] = typed("maps")


@_view
class TraceView(ResultView):
    """A simulation's Chrome trace (``simulate --trace``): the spans a Gantt chart draws."""

    KIND: ClassVar[str] = "trace"
    traceEvents: tuple[dict[str, Any], ...] = typed("maps")


@_view
class ModuleRow(ResultView):
    """One tracked module, per step."""

    name: str = typed("str")
    forward_s: float = typed("number")
    backward_s: float = typed("number")
    forward_flop: float = typed("number")
    backward_flop: float = typed("number")
    energy_j: float = typed("number")


@_view
class TrackResult(ResultView):
    """``measurement.json`` of ``greentrain track`` (measure/summary.py's Measurement.to_json)."""

    KIND: ClassVar[str] = "track"
    status: str = typed("str")
    duration_s: float = typed("number")
    num_steps: int = typed("int")
    step_time_s: float = typed("number")
    first_step_time_s: float = typed("number")
    forward_s: float = typed("number")
    backward_s: float = typed("number")
    tokens_per_s: float = typed("number")
    flop_per_step: float = typed("number")
    flop_per_s: float = typed("number")
    memory_bytes: float = typed("number")
    energy_j: float = typed("number")
    energy_j_per_step: float = typed("number")
    power_w: float = typed("number")
    pue: float = typed("number")
    region: str = typed("str")
    grid_g_co2e_per_kwh: float | None = typed("opt_number", required=False)
    emissions_kg_co2e: float | None = typed("opt_number", required=False)
    cost_usd: float | None = typed("opt_number", required=False)
    modules: tuple[ModuleRow, ...] = typed("views", of=ModuleRow)
    meters: tuple[dict[str, Any], ...] = typed("maps")
    peak_cuda_bytes: float | None = typed("opt_number", required=False)  # torch.cuda.max_memory_allocated
    peak_cuda_reserved_bytes: float | None = typed("opt_number", required=False)  # max_memory_reserved

    @property
    def allocator_peak_bytes(self) -> float:
        """The measured peak memory per device that a prediction's ``allocator_bytes`` is compared with (the
        one rule: ``compare`` and ``calibrate`` both read it). The caching allocator's reserved peak
        (torch.cuda.max_memory_reserved: the tensors with fragmentation, what estimate/memory.py's
        allocator_bytes predicts); records from before track kept it have the allocated peak only, read as it;
        a run without CUDA has ``memory_bytes`` (the process's peak RSS)."""
        for peak in (self.peak_cuda_reserved_bytes, self.peak_cuda_bytes):
            if peak:
                return peak
        return self.memory_bytes


@_view
class CompareRow(ResultView):
    quantity: str = typed("str")
    predicted: float = typed("number")
    measured: float = typed("number")
    relative_error: float | None = typed("opt_number", required=False)


@_view
class CompareResult(ResultView):
    """``greentrain compare --json``: predicted against measured, with the relative errors."""

    KIND: ClassVar[str] = "compare"
    rows: tuple[CompareRow, ...] = typed("views", of=CompareRow)
    warnings: tuple[str, ...] = typed("str_list")


@_view
class FootprintResult(ResultView):
    """``greentrain footprint --json``: one run's energy, CO2e and cost; a best start time with --intensity-csv."""

    KIND: ClassVar[str] = "footprint"
    energy_kwh: float = typed("number")
    emissions_kg_co2e: float = typed("number")
    operational_kg_co2e: float = typed("number")
    embodied_kg_co2e: float = typed("number")
    cost_usd: float = typed("number")
    num_chips: int = typed("int")
    run_time_s: float = typed("number")
    power_w_per_chip: float = typed("number")
    pue: float = typed("number")
    grid_g_co2e_per_kwh: float = typed("number")
    region: str = typed("str")
    best_start: dict[str, Any] | None = typed("map", required=False)


@_view
class RegionRow(FootprintResult):
    """One region of ``footprint --compare-regions --json``."""

    KIND: ClassVar[str] = ""
    name: str = typed("str")
    co2e_rank: int = typed("int")
    cost_rank: int = typed("int")


@_view
class RegionsResult(ResultView):
    """``greentrain footprint --compare-regions --json``: regions ranked by CO2e and by cost."""

    KIND: ClassVar[str] = "footprint"
    regions: tuple[RegionRow, ...] = typed("views", of=RegionRow)
