"""Tracker: measure a real training run (context manager, decorator, step markers).

    with greentrain.Tracker(model, region="fr", pue=1.2, out_dir="runs/a") as t:
        for batch in data:
            loss = model(batch).loss; loss.backward(); opt.step(); opt.zero_grad()
            t.step(tokens=batch.numel())

Each rank appends its own JSONL record (``greentrain.jsonl``, ``greentrain.rank{r}.jsonl`` under torchrun);
on ``stop`` rank 0 gathers the per-rank summaries through torch.distributed and writes the outputs
(measurement.json, emissions.csv, model_card_co2.yaml) and prints the summary: as plain text by default, or
through the printer it is handed (``print_summary=greentrain.report.track.render_table``: the Rich tables of
``greentrain track``; measure/ never imports Rich nor report/). An exception in the ``with`` body is
recorded ("end" record with status "error") and re-raised; under torchrun the failing rank then skips the
gather (the other ranks are still in their training collectives), and ``greentrain track --summarize DIR``
merges the per-rank records after the job has stopped.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from torch import nn

from greentrain import units
from greentrain.config import BOUNDS, require
from greentrain.measure.launcher import local_gpu, node_place
from greentrain.measure.meters import (
    EnergyMeter,
    RssReader,
    default_meters,
    process_tree,
    tree_cpu_s,
    visible_gpu_indices,
)
from greentrain.measure.records import (
    ENERGY_PARTS,
    JsonlWriter,
    Sampler,
    hardware_info,
    last_run,
    meter_info,
    read_jsonl,
)
from greentrain.measure.settings import UNSET, Unset, resolve
from greentrain.measure.summary import Measurement, make_site, summarize

F = TypeVar("F", bound=Callable[..., Any])
MODULES_RECORD_EVERY_S = 10.0


def _plain_summary(m: Measurement) -> None:
    from greentrain.measure.outputs import print_summary_text

    print_summary_text(m)


def _peak_flop_per_s(peak: float | None, chip: str | None, precision: str) -> float | None:
    """The peak FLOP/s that MFU divides by: given, or the catalog chip's dense peak at ``precision``."""
    require(peak is None or (peak > 0 and not chip), "peak_flop_per_s", peak,
            "must be > 0, and given instead of chip, not with it")
    if peak is not None:
        BOUNDS["chip_flop_per_s"].check(peak, "peak_flop_per_s")
    if chip:
        from greentrain.hardware.catalog import get_chip

        return get_chip(chip).peak_flop_per_s(precision)
    return peak


def _rank_world() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torch.distributed when initialised, else the launcher's variables
    (measure/launcher.py: torchrun, mpirun, Hydra, srun)."""
    import torch.distributed as dist

    place = node_place()
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), place.local_rank
    return place.rank, place.world_size, place.local_rank


def _run_id(world_size: int) -> str:
    """`greentrain track`'s id for its children; under torchrun the job's (shared by the ranks); else new."""
    elastic = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if os.environ.get("GREENTRAIN_RUN_ID"):
        return os.environ["GREENTRAIN_RUN_ID"]
    return elastic if world_size > 1 and elastic not in ("", "none") else str(uuid.uuid4())


class Tracker:
    """Measures time, FLOPs, memory and energy of training; CO2e with an explicit region or intensity."""

    def __init__(self, model: nn.Module | None = None, *, region: str | Unset | None = UNSET,
                 grid_g_per_kwh: float | Unset | None = UNSET, pue: float | Unset | None = UNSET,
                 out_dir: str | Path | Unset = UNSET, depth: int | Unset | None = UNSET,
                 count_flops: bool | Unset = UNSET, hooks: bool | Unset = UNSET,
                 meters: bool | list[EnergyMeter] | Unset = UNSET, cpu_tdp_w: float | Unset | None = UNSET,
                 interval_s: float | Unset = UNSET, project_name: str | Unset = UNSET,
                 print_summary: bool | Callable[[Measurement], None] | Unset = UNSET,
                 write_outputs: bool | Unset = UNSET, jsonl_name: str | Unset | None = UNSET,
                 model_parallel_size: int | Unset = UNSET, step_on_optimizer: bool | Unset | None = UNSET,
                 backward_hooks: str | Unset = UNSET, peak_flop_per_s: float | Unset | None = UNSET,
                 chip: str | Unset | None = UNSET, precision: str | Unset = UNSET) -> None:
        """Each setting left out comes from its GREENTRAIN_* environment variable, else its default
        (measure/settings.py; the table is in docs/track.md)."""
        given = {"region": region, "grid_g_per_kwh": grid_g_per_kwh, "pue": pue, "out_dir": out_dir,
                 "depth": depth, "count_flops": count_flops, "hooks": hooks, "meters": meters,
                 "cpu_tdp_w": cpu_tdp_w, "interval_s": interval_s, "project_name": project_name,
                 "print_summary": print_summary, "write_outputs": write_outputs, "jsonl_name": jsonl_name,
                 "model_parallel_size": model_parallel_size, "step_on_optimizer": step_on_optimizer,
                 "backward_hooks": backward_hooks, "peak_flop_per_s": peak_flop_per_s, "chip": chip,
                 "precision": precision}
        c: dict[str, Any] = {name: resolve(name, value) for name, value in given.items()}
        # every input is checked here, before start() creates a file
        self.site = make_site(c["region"], c["grid_g_per_kwh"], c["pue"])
        self.pue: float | None = c["pue"]
        BOUNDS["sample_interval_s"].check(c["interval_s"], "interval_s")
        require(c["depth"] is None or c["depth"] >= 1, "depth", c["depth"],
                "must be >= 1 (or None for every leaf)")
        require(c["backward_hooks"] in ("graph", "full"), "backward_hooks", c["backward_hooks"],
                "must be graph or full")
        self.backward_hooks: str = c["backward_hooks"]  # measure/hooks.py: autograd-graph hooks, or full hooks
        if c["cpu_tdp_w"] is not None:  # config.BOUNDS' range, as `greentrain track --cpu-tdp-w`
            BOUNDS["cpu_tdp_w"].check(c["cpu_tdp_w"], "cpu_tdp_w")
        # None: on for the decorator form (the function has no handle to call step()), off for `with`
        self.step_on_optimizer: bool | None = c["step_on_optimizer"]
        self._optimizer_hook: Any = None
        # ranks that share one batch (tp x pp x cp): rank 0 divides the summed tokens by it
        BOUNDS["num_chips"].check_int(c["model_parallel_size"], "model_parallel_size")
        self.model_parallel_size: int = c["model_parallel_size"]
        self.model, self.depth, self.count_flops = model, c["depth"], bool(c["count_flops"])
        self.use_hooks = bool(c["hooks"])
        self.out_dir = Path(c["out_dir"])
        self.meters_arg: bool | list[EnergyMeter] = c["meters"]
        self.cpu_tdp_w: float | None = c["cpu_tdp_w"]
        self.interval_s: float = c["interval_s"]
        self.project_name: str = c["project_name"]
        self.write_outputs = bool(c["write_outputs"])
        self.peak_flop_per_s = _peak_flop_per_s(c["peak_flop_per_s"], c["chip"], c["precision"])
        # True: the plain-text summary; a callable: the caller's printer (the Rich tables); False: none
        self.print_summary: Callable[[Measurement], None] | None = (
            _plain_summary if c["print_summary"] is True else c["print_summary"] or None)
        self.jsonl_name: str | None = c["jsonl_name"]
        self.hooks: Any = None
        self.measurement: Measurement | None = None
        self.num_steps = 0
        self._writer: JsonlWriter | None = None
        self._sampler: Sampler | None = None
        self._rss: RssReader | None = None
        self._last_modules_t = 0.0
        # (tokens, FLOPs, step seconds) of the first step and of the steady ones after it: the live figures
        self._sums = ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])

    # -- lifecycle --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._writer is not None

    def start(self) -> Tracker:
        require(not self.running, "tracker", "running", "already started")
        self.rank, self.world_size, local_rank = _rank_world()
        name = self.jsonl_name or ("greentrain.jsonl" if self.world_size == 1 else
                                   f"greentrain.rank{self.rank}.jsonl")
        self.path = self.out_dir / name
        if self.write_outputs and self.rank == 0:  # a foreign emissions.csv is refused before training, not after
            from greentrain.measure.codecarbon import check_header

            check_header(self.out_dir / "emissions.csv")
        # a new run: its own id and counts (records of an earlier run in the same file stay, not counted)
        self.run_id = _run_id(self.world_size)
        self.num_steps, self.measurement, self._last_modules_t = 0, None, 0.0
        self._sums = ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
        self.t0 = time.perf_counter()
        self._t_mark = self.t0
        self._writer = JsonlWriter(self.path)
        # CPU utilisation of the run (end record): reaped children count, or a worker that ends during the run
        # would take its CPU time out of the total (a negative figure)
        self._cpu_s0 = tree_cpu_s(process_tree(os.getpid()), reaped=True)
        self._rss = RssReader()
        meters = self._make_meters(local_rank)
        self._sampler = Sampler(self._writer, meters, self.t0, self._rss.read_bytes, self.interval_s)
        readings = self._sampler.start()
        now_unix = time.time()
        self._writer.append({"type": "start", "t_unix": now_unix, "run_id": self.run_id, "pid": os.getpid(),
                             "t0_unix": now_unix - (time.perf_counter() - self.t0),
                             "rank": self.rank, "world_size": self.world_size,
                             "model_parallel_size": self.model_parallel_size, "argv": sys.argv,
                             "cpu_count": os.cpu_count() or 1,
                             "meters": meter_info(readings), **hardware_info(meters)})
        self._writer.flush()
        if self.model is not None:
            self.attach(self.model)
        if self.step_on_optimizer:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._optimizer_hook = register_optimizer_step_post_hook(lambda *_: self.step())
        return self

    def _make_meters(self, local_rank: int) -> list[EnergyMeter]:
        if isinstance(self.meters_arg, list):
            return self.meters_arg
        if not self.meters_arg:
            return []
        gpus, root, host = None, os.getpid(), True
        if self.world_size > 1:  # each rank measures its own GPU; RAPL (whole socket) only on local rank 0
            gpus = [local_gpu(visible_gpu_indices() or [], local_rank)]
            place = node_place()
            if not place.meters_own_host:
                # torchrun, srun, mpirun: the node's host (CPU, RAM) is metered once, by local rank 0, over the
                # launcher's per-node process tree (every local rank): per-rank RAM estimates would count
                # CodeCarbon's 10 W floor once per rank
                host, root = local_rank == 0, place.node_root_pid
        return default_meters(root, cpu_tdp_w=self.cpu_tdp_w, gpu_indices=gpus, rapl=local_rank == 0, host=host)

    def attach(self, model: nn.Module) -> None:
        """Install the module hooks on ``model`` (done by ``start`` when a model was given)."""
        from greentrain.measure.hooks import ModuleHooks

        if self.hooks is not None or not self.use_hooks:
            return
        self.model = model
        self.hooks = ModuleHooks(model, depth=self.depth, count_flops=self.count_flops,
                                 backward=self.backward_hooks)

    def step(self, tokens: float | None = None, samples: float | None = None) -> None:
        """Mark the end of a training step; ``tokens``/``samples`` default to what the hooks saw."""
        if self._writer is None:
            return
        now = time.perf_counter()
        rec: dict[str, Any] = {"type": "step", "t_s": now - self.t0, "step": self.num_steps,
                               "step_time_s": now - self._t_mark}
        self._t_mark = now
        if self.hooks is not None:
            rec.update(self.hooks.finish_step())
            if self.hooks.flop_note and self.num_steps == 0:
                rec["flop_note"] = self.hooks.flop_note
            seen_tokens, seen_samples = self.hooks.pop_batch_counts()
            tokens = seen_tokens if tokens is None else tokens
            samples = seen_samples if samples is None else samples
        rec["tokens"], rec["samples"] = float(tokens or 0), float(samples or 0)
        sums = self._sums[1 if self.num_steps else 0]  # the steady steps apart: the rates are theirs, as in summary
        for i, value in enumerate((rec["tokens"], float(rec.get("flop", 0.0)), rec["step_time_s"])):
            sums[i] += value
        assert self._rss is not None
        rec["rss_bytes"] = self._rss.read_bytes()
        self._writer.append(rec)
        self.num_steps += 1
        if self.hooks is not None and self.num_steps == 1:  # summaries take the steady steps after this one
            self._writer.append({"type": "modules", "first_step": True, "num_steps": 1,
                                 "modules": self.hooks.module_records()})
        elif self.hooks is not None and now - self._last_modules_t > MODULES_RECORD_EVERY_S:
            self._last_modules_t = now
            self._writer.append({"type": "modules", "num_steps": self.num_steps,
                                 "modules": self.hooks.module_records()})

    def live(self) -> dict[str, float]:
        """The run so far, for a logger (HF ``on_log``, Lightning, Accelerate): ``energy_kwh`` (facility, x PUE,
        at the last energy sample), ``emissions_g_co2e`` (with a region or intensity), ``tokens_per_s`` and
        ``flop_per_s`` (over the steps' own time, the first step left out once there are more), ``mfu`` (with
        a peak FLOP/s or chip). Cheap: no meter is read here, the sampler's last sample is used (at most
        ``interval_s`` old)."""
        if self._sampler is None:
            return {}
        last = self._sampler.last
        it_energy_j = sum(float(last.get(f"{p}_energy_j", 0.0)) for p in ENERGY_PARTS)
        first, steady = self._sums
        tokens, flop, steps_s = steady if steady[2] > 0 else first
        out = {"tokens_per_s": tokens / steps_s if steps_s > 0 else 0.0,
               "flop_per_s": flop / steps_s if steps_s > 0 else 0.0}
        if self.peak_flop_per_s:
            out["mfu"] = out["flop_per_s"] / self.peak_flop_per_s  # this rank, its device
        t_s = float(last.get("t_s", 0.0))
        if self.site is not None and t_s > 0:
            from greentrain.footprint.model import footprint

            fp = footprint(num_chips=1, duration_s=t_s, site=self.site, power_w=it_energy_j / t_s)
            out["energy_kwh"] = units.j_to_kwh(fp.energy_j)
            out["emissions_g_co2e"] = fp.operational_kg_co2e * units.G_PER_KG
        else:
            out["energy_kwh"] = units.j_to_kwh(it_energy_j * (self.pue or 1.0))
        return out

    def stop(self, status: str = "ok", error: str = "") -> Measurement | None:
        """Close the record (end record, final sample, flush), aggregate ranks, write the outputs."""
        if self._writer is None or self._sampler is None:
            return self.measurement
        if self._optimizer_hook is not None:
            self._optimizer_hook.remove()
            self._optimizer_hook = None
        if self.hooks is not None:
            self._writer.append({"type": "modules", "num_steps": self.num_steps,
                                 "modules": self.hooks.module_records()})
            self.hooks.remove()
            self.hooks = None
        self._sampler.stop()
        self._writer.append({"type": "end", "t_s": time.perf_counter() - self.t0, "status": status,
                             "error": error,
                             "cpu_s": max(0.0, tree_cpu_s(process_tree(os.getpid()), reaped=True) - self._cpu_s0)})
        self._writer.close()
        self._writer = None
        if self._rss is not None:
            self._rss.close()
        mine = summarize(last_run(read_jsonl(self.path)), None, pue=self.pue)
        if status != "ok" and self.world_size > 1:
            # The other ranks are still training (and inside their own collectives): joining a gather here
            # would hang or mismatch them. This rank's record is on disk; torchrun stops the job, and
            # `greentrain track --summarize DIR` merges the per-rank files afterwards.
            print(f"greentrain: rank {self.rank} stopped with an error; its record is {self.path}; merge the "
                  f"ranks' records with: greentrain track --summarize {self.out_dir}", file=sys.stderr)
            from greentrain.measure.summary import with_footprint

            self.measurement = with_footprint(mine, self.site)
            return self.measurement
        m = self._aggregate(mine)
        if m is not None and self.rank == 0:
            from greentrain.measure.summary import with_footprint

            m = with_footprint(m, self.site)
            self.measurement = m
            if self.write_outputs:
                from greentrain.measure.outputs import write_outputs

                paths = write_outputs(m, self.out_dir, project_name=self.project_name)
                if self.print_summary is not None:
                    self.print_summary(m)
                    print(f"greentrain: wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
        return self.measurement

    def _aggregate(self, mine: Measurement) -> Measurement | None:
        if self.world_size == 1:
            return mine
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return mine if self.rank == 0 else None
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, mine)
        from greentrain.measure.distributed import aggregate

        return aggregate(gathered, self.model_parallel_size) if self.rank == 0 else None

    # -- context manager and decorator ------------------------------------------------------------
    def __enter__(self) -> Tracker:
        return self.start()

    def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> Literal[False]:
        if exc is None:
            self.stop()
        else:
            self.stop(status="error", error=f"{type(exc).__name__}: {exc}")
        return False  # the training's exception, if any, is re-raised

    def __call__(self, fn: F) -> F:
        """Decorator: measure each call of ``fn``; a step is marked at each ``torch.optim`` optimizer step
        unless ``step_on_optimizer=False`` was given."""
        if self.step_on_optimizer is None:
            self.step_on_optimizer = True

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
