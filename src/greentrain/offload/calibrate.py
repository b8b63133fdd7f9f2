"""The ml_dataflow framework against ml_dataflow's recorded sweeps: read them, score the planner, fit its two
kernel constants on the two cells design/offload.md section 4.4 names (nothing else is fitted).

Recorded sweep CSV (ml_dataflow's bench/reproduce_results/recorded_data, with a header): chip, host_mem_gib,
dev_mem_gib, seq_len, model_b, ..., tokens_per_s, ...; a row of zeros is a run that could not be placed.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from greentrain.config import read_text
from greentrain.errors import ConfigError, InfeasibleError, csv_errors
from greentrain.offload.config import OffloadCaps, OffloadFramework, offload_framework
from greentrain.offload.plan import plan_offload
from greentrain.scenario import Scenario, scenario_from_dict

MODELS = {1: "llama3.2-1b", 8: "llama3-8b"}  # ml_dataflow's model_b -> greentrain preset
CHIPS = {"h100": "h100-sxm", "a100": "a100-80gb", "h200": "h200", "rtx5090": "rtx-5090"}
FIT_CELLS = ((8, 8192, 78.0, 75.0, 11406.198242), (8, 65536, 78.0, 144.0, 5487.067383))
REQUIRED = ("chip", "host_mem_gib", "dev_mem_gib", "seq_len", "model_b", "tokens_per_s")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedCell:
    chip: str
    model: str
    seq_len: int
    device_gib: float
    host_gib: float
    tokens_per_s: float  # 0: the run failed

    @property
    def ran(self) -> bool:
        return self.tokens_per_s > 0


def read_recorded(path: str | Path) -> list[RecordedCell]:
    """The cells of one recorded sweep (or of any CSV with those columns and model names)."""
    text = read_text(path, "measured")
    with csv_errors("measured", path):
        rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise ConfigError("measured", str(path), "has no rows")
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise ConfigError("measured", str(path), f"lacks the columns {', '.join(missing)}")
    out = []
    for i, row in enumerate(rows, start=2):
        if None in row.values() or None in row:  # a short or a long row: its cells are not under their columns
            raise ConfigError(f"measured line {i}", dict(row), f"needs one cell per column ({', '.join(rows[0])})")
        try:
            mb = float(row["model_b"])
            model = MODELS.get(int(mb), row["model_b"]) if mb.is_integer() else row["model_b"]
            out.append(RecordedCell(chip=CHIPS.get(row["chip"].lower(), row["chip"]), model=model,
                                    seq_len=int(float(row["seq_len"])), device_gib=float(row["dev_mem_gib"]),
                                    host_gib=float(row["host_mem_gib"]), tokens_per_s=float(row["tokens_per_s"])))
        except ValueError:
            raise ConfigError(f"measured line {i}", dict(row), "needs numbers in the recorded columns") from None
        cell = out[-1]
        for col, value in (("tokens_per_s", cell.tokens_per_s), ("dev_mem_gib", cell.device_gib),
                           ("host_mem_gib", cell.host_gib)):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"measured line {i}.{col}", row[col], "must be finite and >= 0 (a row of zeros: a "
                                  "run that could not be placed)")
    return out


def cell_scenario(model: str, chip: str, seq_len: int) -> Scenario:
    return scenario_from_dict({"model": model, "cluster": {"chip": chip, "num_chips": 1},
                               "workload": {"seq_len": seq_len, "global_batch_size": 1}})


def predict(cell: RecordedCell, profile: OffloadFramework) -> float:
    """Predicted tokens/s of a recorded cell; 0 when the planner says it does not fit."""
    try:
        return plan_offload(cell_scenario(cell.model, cell.chip, cell.seq_len),
                            OffloadCaps.from_gib(device_gib=cell.device_gib,
                                                 host_gib=cell.host_gib), profile=profile).tokens_per_s
    except InfeasibleError:
        return 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    cells: int
    ran: int  # recorded runs that ran
    predicted_ran: int  # of those, how many the planner also places
    feasibility_right: float  # share of all cells where ran/failed is predicted right
    median_abs_error: float  # over cells that ran and are predicted to run
    within_15: float
    errors: tuple[float, ...]


def score(cells: list[RecordedCell], profile: OffloadFramework | None = None) -> Score:
    profile = profile or offload_framework("ml_dataflow")
    errors, right, both = [], 0, 0
    for c in cells:
        p = predict(c, profile)
        right += (p > 0) == c.ran
        if p > 0 and c.ran:
            both += 1
            errors.append(p / c.tokens_per_s - 1.0)
    ab = sorted(abs(e) for e in errors)
    med = ab[len(ab) // 2] if len(ab) % 2 else 0.5 * (ab[len(ab) // 2 - 1] + ab[len(ab) // 2]) if ab else math.nan
    return Score(cells=len(cells), ran=sum(c.ran for c in cells), predicted_ran=both,
                 feasibility_right=right / len(cells), median_abs_error=med,
                 within_15=sum(a <= 0.15 for a in ab) / len(ab) if ab else math.nan, errors=tuple(errors))


def fit_kernel_constants(iterations: int = 60) -> tuple[float, float]:
    """(matmul_scale, attention_scale) that reproduce the two FIT_CELLS exactly: a fixed-point iteration
    (tokens/s scales close to 1/time, and the short cell is mostly matmul, the long one mostly attention)."""
    mm, att, base = 1.0, 1.5, offload_framework("ml_dataflow")
    for _ in range(iterations):
        ratios = []
        for model_b, seq, dev, host, tps in FIT_CELLS:
            cell = RecordedCell(chip="h100-sxm", model=MODELS[model_b], seq_len=seq, device_gib=dev, host_gib=host,
                                tokens_per_s=tps)
            ratios.append(tps / predict(cell, dataclasses.replace(base, matmul_scale=mm, attention_scale=att)))
        mm *= ratios[0]
        att *= ratios[1]
        if max(abs(r - 1) for r in ratios) < 1e-6:
            break
    return round(mm, 4), round(att, 4)
