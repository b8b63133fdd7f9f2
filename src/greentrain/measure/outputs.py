"""What a measurement writes: JSON (unit-named keys), a CodeCarbon-compatible emissions.csv row, the
Hugging Face model-card ``co2_eq_emissions`` block, and the summary's rows (printed as plain text here, as Rich
tables by report/track.py).

CodeCarbon's emissions.csv columns (codecarbon/output_methods/emissions_data.py, EmissionsData, 3.x: 38 columns):
emissions in kg CO2e, energies in kWh, powers in W (both including the PUE, as CodeCarbon applies it to each
measurement), duration in s. An existing file is appended to in its own layout when all its columns are
CodeCarbon's (a 2.x file keeps its 32), and refused otherwise.
Hugging Face model card metadata (huggingface.co/docs/hub/model-cards-co2): ``co2_eq_emissions`` with
``emissions`` in grams, ``source``, ``training_type``, ``geographical_location``, ``hardware_used``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
import platform
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from greentrain import files, units
from greentrain._version import __version__
from greentrain.errors import ConfigError
from greentrain.footprint.regions import codecarbon_location
from greentrain.measure.codecarbon import EMISSIONS_COLUMNS, check_header
from greentrain.measure.summary import Measurement

# CodeCarbon 3.x's 38 columns (measure/codecarbon.py, from codecarbon's EmissionsData)
CODECARBON_COLUMNS = EMISSIONS_COLUMNS


def _meter_source(m: Measurement, name: str) -> str:
    return next((x.source for x in m.meters if x.name == name), "")


def _location(m: Measurement) -> dict[str, str]:
    if not m.region:
        return codecarbon_location("")
    try:
        return codecarbon_location(m.region)
    except ConfigError:  # a label that is not a known region (a given intensity): say nothing false
        return codecarbon_location("")


def codecarbon_row(m: Measurement, project_name: str = "greentrain", run_id: str | None = None) -> dict[str, Any]:
    """One row with CodeCarbon's meaning for each column (docs/output in the codecarbon repository): energies
    in kWh including the PUE, so that energy_consumed = cpu_energy + gpu_energy + ram_energy, as CodeCarbon
    writes them; powers the devices' mean (W); location columns from the region; cpu_model and gpu_model the
    hardware's names."""
    d = m.duration_s if m.duration_s > 0 else 1.0
    pue = m.energy_j / m.it_energy_j if m.it_energy_j > 0 else m.pue
    ram_total_gb = _ram_total_gb()
    return {
        "timestamp": _dt.datetime.now().isoformat(timespec="seconds"), "project_name": project_name,
        "run_id": run_id or m.run_id or str(uuid.uuid4()), "experiment_id": "", "duration": m.duration_s,
        "emissions": "" if m.emissions_kg_co2e is None else m.emissions_kg_co2e,
        "emissions_rate": "" if m.emissions_kg_co2e is None else m.emissions_kg_co2e / d,
        "cpu_power": m.cpu_energy_j * pue / d, "gpu_power": m.gpu_energy_j * pue / d,
        "ram_power": m.ram_energy_j * pue / d,
        "cpu_energy": units.j_to_kwh(m.cpu_energy_j * pue), "gpu_energy": units.j_to_kwh(m.gpu_energy_j * pue),
        "ram_energy": units.j_to_kwh(m.ram_energy_j * pue), "energy_consumed": units.j_to_kwh(m.energy_j),
        "water_consumed": 0.0,
        **_location(m), "os": platform.platform(), "python_version": platform.python_version(),
        "codecarbon_version": f"greentrain-{__version__}", "cpu_count": os.cpu_count() or 0,
        "cpu_model": m.cpu_model, "gpu_count": _gpu_count(m.gpu_model), "gpu_model": m.gpu_model,
        "longitude": "", "latitude": "", "ram_total_size": ram_total_gb, "tracking_mode": "process",
        # the tracked process tree's (CodeCarbon averages the machine's): CPU time / (duration x CPUs), peak RSS
        "cpu_utilization_percent": m.cpu_utilization_percent,
        "gpu_utilization_percent": "" if m.gpu_utilization_percent is None else m.gpu_utilization_percent,
        "ram_utilization_percent": 100.0 * m.peak_rss_bytes / units.GIB / ram_total_gb if ram_total_gb else "",
        "ram_used_gb": m.peak_rss_bytes / units.GIB, "pue": m.pue, "wue": 0.0,
    }


def _gpu_count(gpu_model: str) -> int:
    """4 from "2 x A, 2 x B"."""
    return sum(int(part.split(" x ", 1)[0]) for part in gpu_model.split(", ") if " x " in part)


def _ram_total_gb() -> float:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0.0
    return pages / units.GIB  # CodeCarbon's GB: 2^30 bytes


def model_card_block(m: Measurement, training_type: str = "pre-training", hardware: str = "") -> dict[str, Any]:
    """The ``co2_eq_emissions`` metadata of a Hugging Face model card (emissions in grams)."""
    assert m.emissions_kg_co2e is not None, "model_card_block needs a measurement with CO2e"
    return {"co2_eq_emissions": {
        "emissions": m.emissions_kg_co2e * units.G_PER_KG,
        "source": "greentrain measurement (" + ("measured" if m.all_measured else "partly estimated")
                  + " energy)",
        "training_type": training_type,
        "geographical_location": m.region or "given grid intensity",
        "hardware_used": hardware or m.gpu_model or m.cpu_model,
    }}


def _emissions_text(path: Path, row: dict[str, Any]) -> str:
    """emissions.csv as it will be: the rows already there (header once) and this run's row appended, in place of
    an earlier row of the same run_id (`track --summarize` of a run again: one row per run, as CodeCarbon keeps)."""
    try:
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
    except OSError as exc:
        raise ConfigError("emissions.csv", str(path), f"cannot be read: {files.os_reason(exc)}") from None
    if old and not old.endswith("\n"):
        old += "\n"  # a torn last row (a killed writer before outputs were atomic) stays on its own line
    lines = old.splitlines(keepends=True)
    header = next(csv.reader(lines[:1]), [])
    if row.get("run_id") and "run_id" in header:  # the run's earlier row goes; the others stay as they are
        k, run_id = header.index("run_id"), str(row["run_id"])
        old = "".join(lines[:1] + [ln for ln in lines[1:] if next(csv.reader([ln]), [])[k:k + 1] != [run_id]])
    buf = io.StringIO()
    # CodeCarbon 3.x's columns for a new file; an existing file's own (CodeCarbon 2.x or 3.x) layout, so the
    # row lands under its header; a foreign header is refused (check_header)
    w = csv.DictWriter(buf, fieldnames=check_header(path) if old else CODECARBON_COLUMNS, extrasaction="ignore")
    if not old:
        w.writeheader()
    w.writerow(row)
    return old + buf.getvalue()


def write_outputs(m: Measurement, out_dir: str | Path, *, project_name: str = "greentrain",
                  run_id: str | None = None) -> list[Path]:
    """measurement.json, emissions.csv (this run's row appended, header once) and, with CO2e,
    model_card_co2.yaml: all of them or none (greentrain.files.AtomicBatch: each is written whole to a
    temporary file first, then all are renamed), so a full disk or a kill never leaves half of one."""
    out = files.make_output_dir(out_dir, "out")
    paths = [out / "measurement.json", out / "emissions.csv"]
    with files.AtomicBatch() as batch:
        batch.add_text(paths[0], "measurement.json", json.dumps(m.to_json(), indent=2) + "\n")
        batch.add_text(paths[1], "emissions.csv", _emissions_text(paths[1], codecarbon_row(m, project_name, run_id)))
        if m.emissions_kg_co2e is not None:
            paths.append(out / "model_card_co2.yaml")
            batch.add_text(paths[2], "model_card_co2.yaml", yaml.safe_dump(model_card_block(m), sort_keys=False))
    return paths


def _si(x: float, unit: str) -> str:
    for factor, prefix in units.SI_PREFIXES[3:]:  # peta and below
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _tokens_per_s(m: Measurement) -> str:
    """n/a when no step counted tokens (not a language model, or the script never said): 0.0 would read as a
    measured zero throughput."""
    return f"{m.tokens_per_s:.1f}" if m.tokens > 0 else "n/a (no tokens counted)"


def _per_step(m: Measurement, text: str) -> str:
    """n/a without step markers (``track --no-hooks``, a script that never steps): 0 would read as measured."""
    return text if m.num_steps > 0 else "n/a (no steps marked)"


def _flop(m: Measurement, text: str) -> str:
    return text if m.flop > 0 else "n/a (not counted)"


def _memory_row(m: Measurement) -> tuple[str, str]:
    """The CUDA allocator's peak when there is one, else the process tree's resident memory, named as such."""
    name = "peak memory (CUDA)" if m.peak_cuda_bytes > 0 else "peak memory (host RSS)"
    return name, f"{units.bytes_to_gib(m.memory_bytes):.3f} GiB"


def summary_rows(m: Measurement) -> list[tuple[str, str]]:
    """The summary's (quantity, value) rows: run figures, energy by meter, CO2e and cost when known."""
    lab = {x.name: "measured" if x.measured else "estimated" for x in m.meters}
    rows = [("duration", f"{m.duration_s:.2f} s"), ("steps", str(m.num_steps)),
            ("step time (steady)", _per_step(m, f"{m.step_time_s * 1e3:.2f} ms")), ("tokens/s", _tokens_per_s(m)),
            ("FLOP per step", _per_step(m, _flop(m, _si(m.flop_per_step, "FLOP")))),
            ("FLOP/s", _per_step(m, _flop(m, _si(m.flop_per_s, "FLOP/s")))), _memory_row(m),
            ("GPU energy", f"{m.gpu_energy_j:.1f} J ({lab.get('gpu', 'none')})"),
            ("CPU energy", f"{m.cpu_energy_j:.1f} J ({lab.get('cpu', 'none')})"),
            ("RAM energy", f"{m.ram_energy_j:.1f} J ({lab.get('ram', 'none')})"),
            (f"energy (x PUE {m.pue:g})", f"{m.energy_j:.1f} J = {m.energy_kwh:.3g} kWh"),
            ("average IT power", f"{m.power_w:.1f} W")]
    if m.emissions_kg_co2e is not None:
        rows.append((f"CO2e ({m.region or 'given'}: {m.grid_g_co2e_per_kwh:.0f} g/kWh)",
                     f"{m.emissions_kg_co2e * units.G_PER_KG:.3g} g"))
    if m.cost_usd is not None:
        rows.append(("cost", f"${m.cost_usd:.4g}"))
    return rows


MODULE_COLUMNS = ("module", "fwd ms", "bwd ms", "fwd FLOP", "bwd FLOP", "energy J")


def module_rows(m: Measurement) -> list[tuple[str, ...]]:
    """One row per tracked module, per step (MODULE_COLUMNS)."""
    return [(x.name, f"{x.forward_s * 1e3:.2f}", f"{x.backward_s * 1e3:.2f}", _si(x.forward_flop, ""),
             _si(x.backward_flop, ""), f"{x.energy_j:.3g}") for x in m.modules]


def summary_title(m: Measurement) -> str:
    return f"greentrain measurement ({m.status})"


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Columns padded to their widest cell: the first left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]


def print_summary_text(m: Measurement, file: Any = None) -> None:
    """The summary as plain text (no Rich: measure/ does not draw): what a Tracker prints unless it is handed
    another printer; ``greentrain track`` prints the same rows as Rich tables (report/track.py)."""
    lines = [summary_title(m), *_aligned([("quantity", "value"), *summary_rows(m)])]
    if m.modules:
        lines += ["per module, per step", *_aligned([MODULE_COLUMNS, *module_rows(m)])]
    lines += [f"note: {note}" for note in m.notes]
    print("\n".join(lines), file=file or sys.stdout)
