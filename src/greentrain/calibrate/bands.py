"""How far to trust a prediction: the error band of the closest validated class of runs.

`validate` scores greentrain on published measured runs (the calibration CSVs of shared/reference and
Korthikanti et al. 2022 Table 5). Grouped by class (framework x chip x dense/MoE x scale), the measured runs
of each class give an expected error band: the 80th percentile of |predicted / measured tokens per second - 1|,
with the mean |error| and the bias. The table ships as data (calibrate/bands.yaml), regenerated from those
CSVs by ``benchmarks/make_bands.py`` (``build_bands`` below), so a user without the CSVs sees it too.

``band_for`` finds the class of a scenario: the exact class, else the same framework, chip and kind at another
scale, else the same framework and kind on another chip, else the same chip and kind under another framework;
when nothing matches it says plainly that the scenario is outside every validated class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from greentrain.calibrate.runs import Run
from greentrain.calibrate.validate import Prediction

BAND_QUANTILE = 0.8  # the band holds this share of a class's measured runs
MIN_RUNS = 3  # a class with fewer runs gives no band of its own: the scenario takes a wider pool's
ANY = "any"
SCALES = ("1 node", "2-16 nodes", "> 16 nodes")
# framework names that run the same code (the runs CSVs and the profiles use both)
SAME_FRAMEWORK = {"megatron-bridge": "nemo", "megatron-overlap": "megatron", "fsdp": "fsdp2"}


def scale_class(num_chips: int, chips_per_node: int) -> str:
    nodes = max(1, -(-num_chips // max(1, chips_per_node)))
    return SCALES[0] if nodes <= 1 else SCALES[1] if nodes <= 16 else SCALES[2]


def _family(framework: str) -> str:
    f = framework.strip().lower()
    return SAME_FRAMEWORK.get(f, f)


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """The error of greentrain's throughput on one class of validated runs."""

    framework: str
    chip: str
    moe: bool
    scale: str
    runs: int
    band: float  # BAND_QUANTILE of |error|
    mean_abs: float
    bias: float  # mean signed error, > 0: greentrain predicts faster runs

    @property
    def label(self) -> str:
        if self.framework == "all":
            return "every validated run"
        fw = "any framework" if self.framework == ANY else self.framework
        chip = "any chip" if self.chip == ANY else self.chip
        scale = "any scale" if self.scale == ANY else self.scale
        return f"{fw} on {chip}, {'MoE' if self.moe else 'dense'}, {scale}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BandMatch:
    band: Band | None
    how: str  # exact | other chip | other framework | outside
    own_runs: int = 0  # validated runs in the scenario's own class (fewer than MIN_RUNS when how is not exact)

    @property
    def outside(self) -> bool:
        """No validated run shares the scenario's class."""
        return self.how != "exact" and not self.own_runs

    def describe(self) -> str:
        """One line for plan, search and the report."""
        b = self.band
        if b is None:
            return "no validated runs to compare with: no error band"
        pct = f"+/-{100 * b.band:.0f} % (80 % of {b.runs} validated runs: {b.label}; mean |error| " \
              f"{100 * b.mean_abs:.0f} %, bias {100 * b.bias:+.0f} %)"
        if self.how == "exact":
            return pct
        if self.how == "outside" and not self.own_runs:
            return (f"outside every validated class (framework x chip x dense/MoE x scale); over all {b.runs} "
                    f"validated runs the error is within +/-{100 * b.band:.0f} % for 80 % of them")
        if self.own_runs:
            return f"{pct}; pooled: the scenario's own class has {self.own_runs} validated run(s) only"
        return f"{pct}; closest validated class ({self.how}): this scenario is outside it"


def build_bands(runs: Sequence[Run], preds: Sequence[Prediction]) -> list[Band]:
    """Bands per class from scored runs (those that ran, with a prediction and a measured step time), and the
    pools a scenario falls back to (``any`` scale; any chip; any framework; ``all`` runs)."""
    classes: dict[tuple[str, str, bool, str], list[float]] = {}
    for r, p in zip(runs, preds, strict=True):
        if p.throughput_error is None:
            continue
        cl = r.scenario.cluster
        fw, chip, moe = _family(r.framework or "megatron"), cl.chip.name, r.scenario.model.is_moe
        for key in ((fw, chip, moe, scale_class(cl.num_chips, cl.chips_per_node)), (fw, chip, moe, ANY),
                    (fw, ANY, moe, ANY), (ANY, chip, moe, ANY), ("all", "all", False, "all")):
            classes.setdefault(key, []).append(p.throughput_error)
    return [_band(*k, errs) for k, errs in sorted(classes.items())]


def _band(framework: str, chip: str, moe: bool, scale: str, errs: list[float]) -> Band:
    a = np.abs(np.asarray(errs))
    return Band(framework=framework, chip=chip, moe=moe, scale=scale, runs=len(errs),
                band=float(np.quantile(a, BAND_QUANTILE)), mean_abs=float(a.mean()), bias=float(np.mean(errs)))


def bands_to_yaml(bands: Sequence[Band], sources: Sequence[str], command: str, date: str) -> str:
    data = {"kind": "greentrain-error-bands", "quantile": BAND_QUANTILE, "generated": date, "command": command,
            "sources": list(sources),
            "bands": [{"framework": b.framework, "chip": b.chip, "moe": b.moe, "scale": b.scale, "runs": b.runs,
                       "band": round(b.band, 4), "mean_abs": round(b.mean_abs, 4), "bias": round(b.bias, 4)}
                      for b in bands]}
    header = ("# Expected error bands of greentrain's throughput per validated class (calibrate/bands.py).\n"
              "# GENERATED by benchmarks/make_bands.py from the published measured runs it names: do not edit.\n")
    return header + yaml.safe_dump(data, sort_keys=False, width=120)


@cache
def shipped_bands(path: str = "") -> tuple[Band, ...]:
    """The band table (calibrate/bands.yaml, or ``path``)."""
    text = Path(path).read_text("utf-8") if path else \
        resources.files("greentrain.calibrate").joinpath("bands.yaml").read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return tuple(Band(framework=str(b["framework"]), chip=str(b["chip"]), moe=bool(b["moe"]), scale=str(b["scale"]),
                      runs=int(b["runs"]), band=float(b["band"]), mean_abs=float(b["mean_abs"]),
                      bias=float(b["bias"])) for b in data.get("bands", []))


def band_for(framework: str, chip: str, moe: bool, num_chips: int, chips_per_node: int,
             bands: Sequence[Band] | None = None) -> BandMatch:
    """The band of the closest validated class with at least MIN_RUNS runs for a scenario: its own class, the
    same framework, chip and kind at any scale, the same framework and kind on any chip, the same chip and kind
    under any framework; else every validated run pooled, and the scenario is outside every class."""
    table = shipped_bands() if bands is None else bands
    fw, scale = _family(framework), scale_class(num_chips, chips_per_node)
    tries = (("exact", (fw, chip, moe, scale)), ("same class pooled over scales", (fw, chip, moe, ANY)),
             ("other chip", (fw, ANY, moe, ANY)), ("other framework", (ANY, chip, moe, ANY)))
    by_key = {(b.framework, b.chip, b.moe, b.scale): b for b in table}
    own = by_key.get((fw, chip, moe, scale))
    own_runs = own.runs if own else 0
    for how, key in tries:
        b = by_key.get(key)
        if b is not None and b.runs >= MIN_RUNS:
            exact = how == "exact" or (how.startswith("same class") and own_runs >= MIN_RUNS)
            return BandMatch(band=b, how="exact" if exact else how, own_runs=0 if exact else own_runs)
    pooled = by_key.get(("all", "all", False, "all"))
    return BandMatch(band=pooled, how="outside", own_runs=own_runs)
