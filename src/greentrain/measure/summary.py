"""Measurement: the summary of a run record (JSONL), with energy turned into CO2e and cost by footprint/.

Built only from the records, so the same summary comes out of a live Tracker, of `greentrain track`, and of
the file a killed run left behind. Carbon needs an explicit region or grid intensity: without one the
summary carries energy only and says so (no geolocation guess).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from greentrain import units
from greentrain.config import require
from greentrain.errors import ConfigError
from greentrain.footprint.model import footprint
from greentrain.footprint.site import Site
from greentrain.measure.records import ENERGY_PARTS, clip_samples, steady_energy_j


@dataclass(frozen=True, slots=True, kw_only=True)
class MeterInfo:
    name: str
    measured: bool
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModuleStats:
    """One tracked module, per step (means over the steps seen), with energy attributed by time."""

    name: str
    calls: int
    forward_s: float
    backward_s: float
    forward_flop: float
    backward_flop: float
    memory_bytes: float
    energy_j: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RankStats:
    """One rank's own figures in an aggregated (torchrun) measurement."""

    rank: int
    step_time_s: float
    flop: float  # FLOPs this rank executed (local shards under DTensor)
    tokens: float
    it_energy_j: float
    memory_bytes: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    status: str
    duration_s: float
    world_size: int
    num_steps: int
    step_time_s: float  # mean over the steps after the first (the first one warms up); the only one if 1
    first_step_time_s: float
    forward_s: float  # per step, root module
    backward_s: float
    tokens: float
    tokens_per_s: float
    samples_per_s: float
    flop: float  # counted FLOPs of the whole run (all ranks)
    flop_per_step: float
    flop_per_s: float
    memory_bytes: float  # peak per device: CUDA allocator peak when on GPU, else peak process RSS
    peak_rss_bytes: float
    peak_cuda_bytes: float  # torch.cuda.max_memory_allocated: the tensors' peak
    gpu_energy_j: float
    cpu_energy_j: float
    ram_energy_j: float
    it_energy_j: float  # gpu + cpu + ram, before PUE
    energy_j: float  # it_energy_j x PUE (facility)
    energy_j_per_step: float
    power_w: float  # average IT power
    pue: float
    run_id: str = ""  # the run's UUID (CodeCarbon's run_id); "" in records written before run ids
    cpu_model: str = ""  # the CPU's name, as CodeCarbon's cpu_model
    gpu_model: str = ""  # "N x NAME" of the measured GPUs, as CodeCarbon's gpu_model; "" without one
    meters: tuple[MeterInfo, ...] = ()
    region: str = ""
    grid_g_co2e_per_kwh: float | None = None
    emissions_kg_co2e: float | None = None
    cost_usd: float | None = None
    modules: tuple[ModuleStats, ...] = ()
    ranks: tuple[RankStats, ...] = ()  # per-rank figures, filled by measure.distributed.aggregate
    notes: tuple[str, ...] = field(default_factory=tuple)
    # torch.cuda.max_memory_reserved: the caching allocator's peak, fragmentation included (0 without CUDA, and
    # in records written before it was kept)
    peak_cuda_reserved_bytes: float = 0.0
    # CPU seconds of the tracked process tree / (duration x logical CPUs), in %; 0 when not recorded
    cpu_utilization_percent: float = 0.0
    gpu_utilization_percent: float | None = None  # mean of NVML's samples; None without an NVML meter

    @property
    def energy_kwh(self) -> float:
        return units.j_to_kwh(self.energy_j)

    @property
    def all_measured(self) -> bool:
        return bool(self.meters) and all(m.measured for m in self.meters)

    def to_json(self) -> dict[str, Any]:
        """measurement.json: ``kind`` and ``schema_version`` first (results/view.py's rules; literals here, as
        measure/ does not import report/), then the fields."""
        d: dict[str, Any] = {"kind": "track", "schema_version": 1}
        d |= {f: getattr(self, f) for f in self.__dataclass_fields__
              if f not in ("meters", "modules", "ranks", "notes")}
        d["energy_kwh"] = self.energy_kwh
        d["meters"] = [{"name": m.name, "measured": m.measured, "source": m.source} for m in self.meters]
        d["modules"] = [{f: getattr(m, f) for f in m.__dataclass_fields__} for m in self.modules]
        d["ranks"] = [{f: getattr(r, f) for f in r.__dataclass_fields__} for r in self.ranks]
        d["notes"] = list(self.notes)
        return d


def make_site(region: str | None = None, grid_g_per_kwh: float | None = None,
              pue: float | None = None) -> Site | None:
    """The Site for CO2e, from an explicit region code or grid intensity (footprint.regions.build_site, the
    one constructor: a given intensity without a PUE takes DEFAULT_PUE, as plan and footprint do); None when
    neither is given."""
    if grid_g_per_kwh is not None:
        require(not region, "grid_g_per_kwh", grid_g_per_kwh, f"give a region ({region}) or a grid intensity, not both")
        require(math.isfinite(grid_g_per_kwh) and grid_g_per_kwh >= 0, "grid_g_per_kwh", grid_g_per_kwh,
                "must be >= 0")
    if pue is not None:
        require(math.isfinite(pue) and pue >= 1.0, "pue", pue, "must be >= 1 (facility energy / IT energy)")
    if grid_g_per_kwh is None and not region:
        return None
    try:
        from greentrain.footprint.regions import build_site
    except ImportError:
        raise ConfigError("region", region, "no region table installed; give grid_g_per_kwh") from None
    return build_site(region=region, grid_g_co2e_per_kwh=grid_g_per_kwh, pue=pue)


# a step after the first is still warm-up while it takes more than this many times the median step after the first
WARMUP_FACTOR = 2.0


def warmup_steps(times: Sequence[float]) -> int:
    """How many leading steps are warm-up: the first (FLOP counting, allocator, torch.compile's compilation) and
    the steps right after it that take more than WARMUP_FACTOR x the median of the steps after the first (a
    compiled Llama 3.2 1B recompiled in its second step on an H100, 2026-11-27: 3.87 s against 0.285 s, and the
    steady step read 461 ms where the steps after it ran 285 ms). At least one step stays steady."""
    if len(times) < 2:
        return 0
    typical = statistics.median(times[1:])
    k = 1
    while k < len(times) - 1 and times[k] > WARMUP_FACTOR * typical:
        k += 1
    return k


def steps_stats(steps: Sequence[dict[str, Any]]) -> dict[str, float]:
    times = [float(s.get("step_time_s", 0.0)) for s in steps]
    warm = warmup_steps(times)
    steady = times[warm:]
    steady_steps = steps[warm:]  # the first step counts FLOPs and warms up; a recompile after it too
    n = len(steps)
    return {
        "step_time_s": statistics.fmean(steady) if steady else 0.0,
        "first_step_time_s": times[0] if times else 0.0,
        "forward_s": statistics.fmean(float(s.get("forward_s", 0.0)) for s in steady_steps) if n else 0.0,
        "backward_s": statistics.fmean(float(s.get("backward_s", 0.0)) for s in steady_steps) if n else 0.0,
        "tokens": sum(float(s.get("tokens", 0.0)) for s in steps),
        "samples": sum(float(s.get("samples", 0.0)) for s in steps),
        "flop": sum(float(s.get("flop", 0.0)) for s in steps),
        "steps_s": sum(times),
        # rates over the steady steps, as step_time_s: the first step's compile and FLOP counting (43 s of a
        # compiled Llama 3.2 1B's 51 s on an H100) and its uncounted tokens (greentrain.auto attaches during
        # its forward) would otherwise make tokens/s 6,100 where the steps ran 58,000
        "steady_s": sum(steady),
        "steady_tokens": sum(float(s.get("tokens", 0.0)) for s in steady_steps),
        "steady_samples": sum(float(s.get("samples", 0.0)) for s in steady_steps),
        "steady_flop": sum(float(s.get("flop", 0.0)) for s in steady_steps),
        "warmup_steps": float(warm),
        "steady_from_s": float(steps[warm - 1].get("t_s", 0.0)) if warm else 0.0,
        "steady_to_s": float(steps[-1].get("t_s", 0.0)) if steps else 0.0,
        "peak_cuda_bytes": max((float(s.get("peak_cuda_bytes", 0.0)) for s in steps), default=0.0),
        "peak_cuda_reserved_bytes": max((float(s.get("peak_cuda_reserved_bytes", 0.0)) for s in steps),
                                        default=0.0),
        "peak_rss_bytes": max((float(s.get("rss_bytes", 0.0)) for s in steps), default=0.0),
    }


def _modules(records: Sequence[dict[str, Any]], num_steps: int, energy_per_s: float) -> tuple[ModuleStats, ...]:
    """Per-step module figures over the steps after the first: the last snapshot's totals minus the snapshot
    taken after the first step (its FLOP counting and warm-up), over the steps between the two (step_time_s may
    also leave out slow steps right after the first, warmup_steps: no snapshot is taken there).
    Each snapshot carries the step count it was taken at: after a kill the last one may be older than the
    last step record (dividing by every recorded step understated FLOPs: 1.33 G against 1.88 G)."""
    snaps = [r for r in records if r.get("type") == "modules"]
    mods = [r for r in snaps if not r.get("first_step")]
    first = next((r for r in snaps if r.get("first_step")), None)
    if not mods and first is None:
        return ()
    last = mods[-1] if mods else first
    assert last is not None
    last_n = int(last.get("num_steps", num_steps))
    use_base = first is not None and last is not first and last_n > int(first.get("num_steps", 1))
    base = {str(m["name"]): m for m in first.get("modules", [])} if use_base and first is not None else {}
    per = max(last_n - (int(first.get("num_steps", 1)) if base and first is not None else 0), 1)
    out = []
    for m in last.get("modules", []):
        b = base.get(str(m["name"]), {})

        def steady(key: str, m: dict[str, Any] = m, b: dict[str, Any] = b) -> float:
            return (float(m[key]) - float(b.get(key, 0.0))) / per

        fwd, bwd = steady("forward_s"), steady("backward_s")
        out.append(ModuleStats(name=str(m["name"]), calls=int(m["calls"]), forward_s=fwd, backward_s=bwd,
                               forward_flop=steady("forward_flop"), backward_flop=steady("backward_flop"),
                               memory_bytes=float(m["memory_bytes"]),
                               energy_j=(fwd + bwd) * energy_per_s))  # energy attributed by time
    return tuple(out)


def _cut_killed(records: Sequence[dict[str, Any]]) -> tuple[Sequence[dict[str, Any]], str]:
    """A killed run's own record (no end record; steps and samples on one clock): the samples cut at the last
    recorded step, so that duration and energy cover the steps counted, as in a complete run of those steps
    (`greentrain track` cuts its own record at its children's last step: measure/track.py)."""
    step_ts = [float(r.get("t_s", 0.0)) for r in records if r.get("type") == "step"]
    if not step_ts or any(r.get("type") == "end" for r in records):
        return records, ""
    if not any(r.get("type") == "sample" and float(r.get("t_s", 0.0)) != max(step_ts) for r in records):
        return records, ""
    cut, _ = clip_samples(records, max(step_ts))
    return cut, f"killed: duration and energy cover the run up to its last recorded step ({max(step_ts):.2f} s)"


def _rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0


def energy_per_step(records: Sequence[dict[str, Any]], stats: dict[str, float], n: int, pue: float,
                    mean_power_w: float) -> float:
    """Facility energy per steady step: the samples' energy between the end of the warm-up (warmup_steps) and
    the end of the last step (interpolated), over the steps between; a run's average power (model loading,
    evaluation and exit included: 264 W where an H100 drew about 700 W through the steps) times the mean step
    time where the samples do not cover that window or there is one step. ``stats`` is steps_stats, on the records'
    clock."""
    warm = int(stats.get("warmup_steps", 1))
    if n >= 2:
        steady = steady_energy_j(records, stats["steady_from_s"], stats["steady_to_s"])
        if steady is not None:
            return steady * pue / (n - warm)
        return mean_power_w * stats["step_time_s"]
    return mean_power_w * stats["steps_s"] if n else 0.0


def _cpu_percent(ends: Sequence[dict[str, Any]], starts: Sequence[dict[str, Any]], duration_s: float) -> float:
    cpu_s = float(ends[-1].get("cpu_s", 0.0)) if ends else 0.0
    n = int(starts[-1].get("cpu_count", 0)) if starts else 0
    return 100.0 * cpu_s / (duration_s * n) if n and duration_s > 0 else 0.0


def _gpu_percent(samples: Sequence[dict[str, Any]]) -> float | None:
    """Mean NVML GPU utilisation over the run's samples (each the busy share of NVML's last period)."""
    got = [float(r["gpu_utilization_percent"]) for r in samples if r.get("gpu_utilization_percent") is not None]
    return sum(got) / len(got) if got else None


def summarize(records: Sequence[dict[str, Any]], site: Site | None = None, *, world_size: int | None = None,
              pue: float | None = None) -> Measurement:
    """Summary of one run record (the records of one rank, or of `greentrain track` and its child).

    CO2e and cost are added when ``site`` is given; otherwise call ``with_footprint`` (which also notes
    that CO2e needs a region) once the per-rank summaries are combined.
    """
    records, cut_note = _cut_killed(records)
    starts = [r for r in records if r.get("type") == "start"]
    samples = [r for r in records if r.get("type") == "sample"]
    steps = [r for r in records if r.get("type") == "step"]
    ends = [r for r in records if r.get("type") == "end"]
    status = str(ends[-1].get("status", "ok")) if ends else "incomplete (no end record: killed?)"
    last = samples[-1] if samples else {}
    duration_s = max([float(r.get("t_s", 0.0)) for r in samples + steps + ends] or [0.0])
    parts = {p: float(last.get(f"{p}_energy_j", 0.0)) for p in ENERGY_PARTS}
    it_energy_j = sum(parts.values())
    pue_used = site.pue if site is not None else (pue if pue is not None else 1.0)
    energy_j = it_energy_j * pue_used
    s = steps_stats(steps)
    n = len(steps)
    meters = {m["name"]: MeterInfo(**m) for st in starts for m in st.get("meters", [])}
    peak_rss = max([s["peak_rss_bytes"]] + [float(x.get("rss_bytes", 0.0)) for x in samples])
    notes = [cut_note] if cut_note else []
    if not samples:
        notes.append("no energy samples in the record")
    notes += sorted({str(r["flop_note"]) for r in steps if r.get("flop_note")})
    if n == 0:
        notes.append("no step markers: per-step figures are 0 (call Tracker.step() or use greentrain.auto)")
    if (warm := int(s["warmup_steps"])) > 1:
        slow = "step 2" if warm == 2 else f"steps 2-{warm}"
        notes.append(f"steady steps {warm + 1}-{n}: {slow} took more than {WARMUP_FACTOR:g}x the median step "
                     "(a recompile?) and count as warm-up with the first")
    per_step_j = energy_per_step(records, s, n, pue_used, energy_j / duration_s if duration_s > 0 else 0.0)
    steady_w = per_step_j / s["step_time_s"] if s["step_time_s"] > 0 else 0.0  # the steps' power, x PUE
    m = Measurement(
        status=status, duration_s=duration_s,
        world_size=world_size or max([int(st.get("world_size", 1)) for st in starts] or [1]),
        num_steps=n, step_time_s=s["step_time_s"], first_step_time_s=s["first_step_time_s"],
        forward_s=s["forward_s"], backward_s=s["backward_s"], tokens=s["tokens"],
        tokens_per_s=_rate(s["steady_tokens"], s["steady_s"]),
        samples_per_s=_rate(s["steady_samples"], s["steady_s"]),
        flop=s["flop"], flop_per_step=s["flop"] / n if n else 0.0,
        flop_per_s=_rate(s["steady_flop"], s["steady_s"]),
        memory_bytes=s["peak_cuda_bytes"] if s["peak_cuda_bytes"] > 0 else peak_rss,
        peak_rss_bytes=peak_rss, peak_cuda_bytes=s["peak_cuda_bytes"],
        peak_cuda_reserved_bytes=s["peak_cuda_reserved_bytes"],
        gpu_energy_j=parts["gpu"], cpu_energy_j=parts["cpu"], ram_energy_j=parts["ram"],
        it_energy_j=it_energy_j, energy_j=energy_j,
        energy_j_per_step=per_step_j,
        power_w=it_energy_j / duration_s if duration_s > 0 else 0.0, pue=pue_used,
        run_id=str(starts[-1].get("run_id", "")) if starts else "",
        cpu_model=str(starts[-1].get("cpu_model", "")) if starts else "",
        gpu_model=str(starts[-1].get("gpu_model", "")) if starts else "", meters=tuple(meters.values()),
        cpu_utilization_percent=_cpu_percent(ends, starts, duration_s),
        gpu_utilization_percent=_gpu_percent(samples),
        modules=_modules(records, n, steady_w), notes=tuple(notes))
    return with_footprint(m, site) if site is not None else m


def with_footprint(m: Measurement, site: Site | None) -> Measurement:
    """CO2e and cost of the measured energy at ``site`` through footprint.footprint; energy only without one."""
    if site is None:
        return replace(m, notes=(*m.notes, "CO2e needs a region or a grid intensity (--region / "
                                           "--grid-g-per-kwh); energy only"))
    if m.duration_s <= 0:
        return replace(m, region=site.region, grid_g_co2e_per_kwh=site.grid_g_co2e_per_kwh,
                       emissions_kg_co2e=0.0, cost_usd=0.0 if site.electricity_usd_per_j > 0 else None)
    # One "chip" whose measured IT power is the run's average: footprint applies the PUE and the grid.
    fp = footprint(num_chips=1, duration_s=m.duration_s, site=site, power_w=m.it_energy_j / m.duration_s)
    cost = fp.cost_usd if site.electricity_usd_per_j > 0 else None
    notes = m.notes if cost is not None else (*m.notes, "cost needs an electricity price for the region")
    return replace(m, region=site.region, grid_g_co2e_per_kwh=site.grid_g_co2e_per_kwh, pue=site.pue,
                   energy_j=fp.energy_j, emissions_kg_co2e=fp.operational_kg_co2e, cost_usd=cost, notes=notes,
                   energy_j_per_step=m.energy_j_per_step * site.pue / m.pue if m.pue > 0 else 0.0,
                   modules=tuple(replace(x, energy_j=x.energy_j * site.pue / m.pue if m.pue > 0 else 0.0)
                                 for x in m.modules))
