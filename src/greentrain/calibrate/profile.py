"""Calibration profiles (`greentrain calibrate -o PROFILE.yaml`) written with their provenance, and `greentrain
track` output directories read as runs.

A profile is read back by estimate.efficiency.with_calibration (`--calibration PROFILE.yaml` on plan, search,
simulate and validate): its ``constants`` replace those of the chip and framework it names.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

import yaml

from greentrain.calibrate.fit import Calibration, Score
from greentrain.calibrate.runs import Measured, Run
from greentrain.errors import ConfigError
from greentrain.files import write_text_atomic
from greentrain.results.calibration import CalibrationProfile
from greentrain.results.codec import load_view
from greentrain.results.kinds import TrackResult
from greentrain.scenario import Scenario, load_scenario

KIND = CalibrationProfile.KIND  # "greentrain-calibration" before 0.2.0, still read
# 2: the memory constant fitted is the allocator's fragmentation (1, unversioned: reserved bytes fitted against
# the device total; estimate.efficiency.with_calibration refuses those)
PROFILE_SCHEMA = CalibrationProfile.SCHEMA


def _score(s: Score | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"num_runs": s.num_runs, "mfu_error_mean_points": 100 * s.mfu_error_mean,
            "step_time_error_median": s.time_error_median, "peak_memory_error_median": s.memory_error_median}


def profile_dict(c: Calibration, sources: list[str], holdout: float, seed: int) -> dict[str, Any]:
    f = c.fitted
    return {
        "kind": KIND, "schema_version": PROFILE_SCHEMA, "chip": c.chip, "framework": c.framework,
        "constants": {"kernel_efficiency": round(f.kernel_efficiency, 4), "host_layer_s": round(f.host_layer_s, 6),
                      "host_layer_s_per_tp_pp_nodes": round(f.host_layer_s_per_tp_pp_nodes, 6),
                      "inter_node_link": round(f.inter_node_link, 4), "fragmentation": round(f.fragmentation, 4)},
        "provenance": {"fitted_on": sources, "date": _dt.date.today().isoformat(), "num_fit": c.num_fit,
                       "num_holdout": c.num_holdout, "holdout_fraction": holdout, "seed": seed,
                       "start": {"kernel_efficiency": c.start.kernel_efficiency, "host_layer_s": c.start.host_layer_s,
                                 "host_layer_s_per_tp_pp_nodes": c.start.host_layer_s_per_tp_pp_nodes,
                                 "inter_node_link": c.start.inter_node_link,
                                 "fragmentation": c.start.fragmentation}},
        "error": {"fit_before": _score(c.fit_before), "fit_after": _score(c.fit_after),
                  "holdout_before": _score(c.holdout_before), "holdout_after": _score(c.holdout_after)},
    }


def write_profile(data: dict[str, Any], path: str | Path) -> None:
    """Atomic write: the profile appears whole or not at all."""
    p = Path(path)
    text = "# greentrain calibration profile: `--calibration " + p.name + "` on plan, search, simulate, validate\n"
    text += yaml.safe_dump(data, sort_keys=False)
    write_text_atomic(p, text, "-o")


def read_track_run(path: str | Path, scenario: str = "") -> Run:
    """A `greentrain track` output directory as a run: its measurement.json read through the typed view
    (results.kinds.TrackResult: steady step time; peak memory as ``allocator_peak_bytes``, the rule compare
    reads too) and the scenario that was run (the directory's scenario.yaml, else ``scenario``), which must set
    the strategy."""
    d = Path(path)
    sc_path = d / "scenario.yaml" if (d / "scenario.yaml").is_file() else (Path(scenario) if scenario else None)
    if sc_path is None:
        raise ConfigError("scenario", str(d), "a track directory needs the scenario that was run: put a "
                          "scenario.yaml in it or give the scenario file")
    m = load_view(d / "measurement.json", TrackResult, "track")
    sc: Scenario = load_scenario(sc_path)
    if sc.strategy is None:
        raise ConfigError("scenario.strategy", str(sc_path), "must be given: calibration compares a known strategy")
    if m.step_time_s <= 0:
        raise ConfigError(f"{d.name}/measurement.json step_time_s", m.step_time_s, "must be a number > 0")
    status = "ok" if m.status in ("ok", "complete", "completed") else "failed"
    mem = m.allocator_peak_bytes
    return Run(run_id=d.name, source=f"greentrain track {d}", framework="", scenario=sc,
               measured=Measured(status=status, step_time_s=m.step_time_s, peak_memory_bytes=mem if mem > 0 else None))
