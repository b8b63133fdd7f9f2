"""The result kinds: one frozen view per JSON a command writes (see results/view.py for the rules).

The typed fields are the ones the HTML report, ``compare`` and ``footprint RUN.json`` read; every other key
the writer puts in the file is kept in ``extra`` and written back unchanged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from greentrain.results.view import ResultView, view


@view
class PlanResult(ResultView):
    """``greentrain plan --json`` (report/plan.py's plan_to_dict): one training run, predicted."""

    KIND: ClassVar[str] = "plan"
    model: str
    chip: str
    num_chips: int
    strategy: dict[str, Any]
    step_time_s: float
    step_breakdown_s: dict[str, float]
    tokens_per_s: float
    mfu: float
    hfu: float
    memory_bytes_per_device: dict[str, float]
    num_steps: int
    run_time_s: float
    energy_kwh: float
    cost_usd: float
    emissions_kg_co2e: float
    operational_kg_co2e: float
    embodied_kg_co2e: float
    region: str
    grid_g_co2e_per_kwh: float
    pue: float


@view
class SearchRow(ResultView):
    """One ranked strategy of ``search --json`` with its full estimate (as ``plan --json``)."""

    rank: int
    chip: str
    num_chips: int
    region: str
    describe: str
    step_time_s: float
    run_time_s: float
    cost_usd: float
    emissions_kg_co2e: float
    energy_kwh: float
    total_memory_bytes_per_device: float  # a total (plan's memory_bytes_per_device is a breakdown)
    mfu: float
    estimate: PlanResult | None = None


@view
class SearchResultView(ResultView):
    """``greentrain search --json``: the ranked strategies, the Pareto front, the counts."""

    KIND: ClassVar[str] = "search"
    objective: str
    num_candidates: int
    num_feasible: int
    search_time_s: float
    ranked: tuple[SearchRow, ...]
    pareto: tuple[dict[str, Any], ...]


@view
class SimStepView(ResultView):
    """``greentrain simulate step --json``: one training step simulated event by event."""

    KIND: ClassVar[str] = "simulate"
    SIGNED: ClassVar[tuple[str, ...]] = ("error_vs_analytic",)
    mode: str
    step_time_s: float
    pipeline_time_s: float
    analytic_step_time_s: float
    error_vs_analytic: float
    bubble_fraction: float
    schedule: str
    pp: int
    vpp: int
    num_micro_batches: int
    stages: tuple[dict[str, Any], ...]


@view
class SimSwarmView(ResultView):
    """``greentrain simulate swarm --json``: a device swarm trained round by round."""

    KIND: ClassVar[str] = "simulate"
    mode: str
    model: str
    scheduler: str
    num_devices: int
    num_tasks_per_round: int
    round_times_s: tuple[float, ...]
    total_time_s: float
    rounds: tuple[dict[str, Any], ...]


@view
class TraceView(ResultView):
    """A simulation's Chrome trace (``simulate --trace``): the spans a Gantt chart draws."""

    KIND: ClassVar[str] = "trace"
    traceEvents: tuple[dict[str, Any], ...]


@view
class ModuleRow(ResultView):
    """One tracked module, per step."""

    name: str
    forward_s: float
    backward_s: float
    forward_flop: float
    backward_flop: float
    energy_j: float


@view
class TrackResult(ResultView):
    """``measurement.json`` of ``greentrain track`` (measure/summary.py's Measurement.to_json)."""

    KIND: ClassVar[str] = "track"
    status: str
    duration_s: float
    num_steps: int
    step_time_s: float
    first_step_time_s: float
    forward_s: float
    backward_s: float
    tokens_per_s: float
    flop_per_step: float
    flop_per_s: float
    memory_bytes: float
    energy_j: float
    energy_j_per_step: float
    power_w: float
    pue: float
    region: str
    grid_g_co2e_per_kwh: float | None = None
    emissions_kg_co2e: float | None = None
    cost_usd: float | None = None
    modules: tuple[ModuleRow, ...]
    meters: tuple[dict[str, Any], ...]
    peak_cuda_bytes: float | None = None  # torch.cuda.max_memory_allocated
    peak_cuda_reserved_bytes: float | None = None  # max_memory_reserved

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


@view
class CompareRow(ResultView):
    SIGNED: ClassVar[tuple[str, ...]] = ("relative_error",)
    quantity: str
    predicted: float
    measured: float
    relative_error: float | None = None


@view
class CompareResult(ResultView):
    """``greentrain compare --json``: predicted against measured, with the relative errors."""

    KIND: ClassVar[str] = "compare"
    rows: tuple[CompareRow, ...]
    warnings: tuple[str, ...]


@view
class FootprintResult(ResultView):
    """``greentrain footprint --json``: one run's energy, CO2e and cost; a best start time with --intensity-csv."""

    KIND: ClassVar[str] = "footprint"
    energy_kwh: float
    emissions_kg_co2e: float
    operational_kg_co2e: float
    embodied_kg_co2e: float
    cost_usd: float
    num_chips: int
    run_time_s: float
    power_w_per_chip: float
    pue: float
    grid_g_co2e_per_kwh: float
    region: str
    best_start: dict[str, Any] | None = None


@view
class RegionRow(FootprintResult):
    """One region of ``footprint --compare-regions --json``."""

    KIND: ClassVar[str] = ""
    name: str
    co2e_rank: int
    cost_rank: int


@view
class RegionsResult(ResultView):
    """``greentrain footprint --compare-regions --json``: regions ranked by CO2e and by cost."""

    KIND: ClassVar[str] = "footprint"
    regions: tuple[RegionRow, ...]
