"""How far to trust a prediction: the error band of the closest validated class of runs.

`validate` scores greentrain on published measured runs (the calibration CSVs in tests/data/calibration,
Korthikanti et al. 2022 Table 5 among them). Grouped by class (framework x chip x dense/MoE x scale), the measured runs
of each class give an expected error band on |predicted / measured tokens per second - 1|, with the mean
|error| and the bias. The table ships as data (calibrate/bands.yaml), regenerated from those CSVs by
``benchmarks/make_bands.py`` (``build_bands`` below), so a user without the CSVs sees it too.

How a band is built (docs/validation.md, "Llama 3 405B on Meta's layouts (held out) and how far to trust a
prediction"):
- inside a class, split conformal prediction (Vovk et al. 2005; Lei et al. 2018, JASA 113(523) §2.2): the
  ceil(0.8 (n + 1))-th smallest |error| of the class's n runs holds a new run exchangeable with them with
  probability >= 0.8; it needs n >= 4 (MIN_RUNS), below that the class gives no band of its own;
- a scenario whose class has fewer runs is a new group of a two-layer hierarchy (Dunn, Wasserman & Ramdas,
  "Distribution-free prediction sets for two-layer hierarchical models", arXiv 1809.07441, JASA 2023): the
  groups are the validated classes at the scenario's scale, each represented by its own band (its conformal
  rank, capped at its largest |error| when it has few runs), and the band is the ceil(0.8 (K + 1))-th smallest
  of those K values; with fewer than 9 classes that is the largest: a class greentrain was never checked on is
  taken to be no better than the worst class it was checked on at that scale.

Beyond 16 nodes the scale is split by regime: compute-bound (greentrain predicts at least COMPUTE_BOUND_SHARE
of the step in compute: StepEstimate.compute_share) or mostly waiting (on exposed collectives, in the pipeline
bubble, on the host). Nearly every validated run there is one of the playbook's nanotron runs on EFA (333 of 348
mostly waiting, measured at a median 1.5 % MFU, predicted up to 50x too fast: greentrain does not model what
slows them), and their error says nothing about a compute-bound run at that scale. A scenario outside every
validated class is never given a narrower band than the pools of the scales below its own: greentrain's error is
taken not to shrink as runs grow (docs/validation.md, "Error bands by regime").

``band_for`` finds the class of a scenario: the exact class, else the same framework, chip and kind pooled over
scales when the class has runs at the scenario's scale, else the scale's pool of classes, and says plainly when
the scenario is outside every validated class.
"""

from __future__ import annotations

import math
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
from greentrain.estimate.efficiency import DEFAULT_FRAMEWORK
from greentrain.scenario import Scenario

BAND_QUANTILE = 0.8  # the band holds this share of a class's measured runs
MIN_RUNS = 4  # the smallest n with ceil(BAND_QUANTILE (n + 1)) <= n: a class with fewer runs has no conformal band
ANY = "any"
MANY_NODES = "> 16 nodes"
SCALES = ("1 node", "2-16 nodes", f"{MANY_NODES}, compute-bound", f"{MANY_NODES}, mostly waiting")
# a predicted step whose slowest stage computes (forward, backward, recomputation) at least this share of it
# (StepEstimate.compute_share) is compute-bound; below it the chips mostly wait (collectives, bubble, host)
COMPUTE_BOUND_SHARE = 0.5
# framework profiles that run the same code with the same fitted constants (the runs CSVs and the profiles
# use both names): a band is a property of the code base, its variants share it
SAME_FRAMEWORK = {"megatron-bridge": "nemo", "nemo-a2a-overlap": "nemo", "nemo-deepep": "nemo",
                  "nemo-deepep-a2a-overlap": "nemo", "nemo-full-graph": "nemo",
                  "megatron-overlap": "megatron", "torchtitan-compile": "torchtitan", "torchtune-compile": "torchtune",
                  "fsdp": "fsdp2"}


def scale_class(num_chips: int, chips_per_node: int, compute_share: float) -> str:
    """The scale of a run (nodes), beyond 16 nodes with its regime (``compute_share``: StepEstimate.compute_share
    of greentrain's prediction)."""
    nodes = max(1, -(-num_chips // max(1, chips_per_node)))
    if nodes <= 16:
        return SCALES[0] if nodes <= 1 else SCALES[1]
    return SCALES[2] if compute_share >= COMPUTE_BOUND_SHARE else SCALES[3]


def _family(framework: str) -> str:
    f = framework.strip().lower()
    return SAME_FRAMEWORK.get(f, f)


def conformal_rank(n: int, quantile: float = BAND_QUANTILE) -> int:
    """The 1-based rank of the split-conformal quantile among n sorted scores (> n: no finite band)."""
    return math.ceil(quantile * (n + 1))


def conformal_band(scores: Sequence[float], quantile: float = BAND_QUANTILE) -> float:
    """The conformal rank of ``scores`` (|errors| or class bands), capped at the largest when there are too few."""
    s = sorted(scores)
    return float(s[min(conformal_rank(len(s), quantile), len(s)) - 1])


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """The error of greentrain's throughput on one class of validated runs, or on a pool of classes."""

    framework: str
    chip: str
    moe: bool
    scale: str
    runs: int
    band: float  # conformal BAND_QUANTILE of |error| (a pool: of its classes' bands)
    mean_abs: float
    bias: float  # mean signed error, > 0: greentrain predicts faster runs
    classes: int = 0  # a pool: the classes it holds (0: one class)

    @property
    def label(self) -> str:
        if self.framework == "all":
            return "every validated class"
        if self.classes:
            return f"the {self.classes} validated classes at {self.scale}"
        scale = "any scale" if self.scale == ANY else self.scale
        return f"{self.framework} on {self.chip}, {'MoE' if self.moe else 'dense'}, {scale}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BandMatch:
    band: Band | None
    how: str  # exact | same class pooled over scales | outside
    own_runs: int = 0  # validated runs in the scenario's own class (fewer than MIN_RUNS when how is not exact)
    scale: str = ""  # the scenario's scale (scale_class), where the band is a pool of another

    @property
    def outside(self) -> bool:
        """No validated run shares the scenario's class."""
        return self.how != "exact" and not self.own_runs

    def describe(self) -> str:
        """One line for plan, search and the report."""
        b = self.band
        if b is None:
            return "no validated runs to compare with: no error band"
        stats = f"mean |error| {100 * b.mean_abs:.0f} %, bias {100 * b.bias:+.0f} %"
        if self.how == "exact":
            return f"+/-{100 * b.band:.0f} % (80 % of {b.runs} validated runs: {b.label}; {stats})"
        if self.how.startswith("same class"):
            return (f"+/-{100 * b.band:.0f} % (80 % of {b.runs} validated runs: {b.label}; {stats}); pooled over "
                    f"scales: the scenario's own class has {self.own_runs} validated run(s) only")
        rank = "the worst" if conformal_rank(b.classes) >= b.classes else f"the {BAND_QUANTILE:.0%} rank"
        worst = f"+/-{100 * b.band:.0f} %, {rank} of {b.label} ({b.runs} runs)"
        if self.scale and b.scale != self.scale:
            worst += f", applied to {self.scale} too (greentrain's error is not assumed to shrink with scale)"
        if not self.own_runs:
            return f"outside every validated class (framework x chip x dense/MoE x scale): {worst}"
        return f"{worst}; the scenario's own class has {self.own_runs} validated run(s) only"


def build_bands(runs: Sequence[Run], preds: Sequence[Prediction]) -> list[Band]:
    """Bands per class from scored runs (those that ran, with a prediction and a measured step time), per class
    pooled over scales, per scale over its classes, and over every class (``all``)."""
    classes: dict[tuple[str, str, bool, str], list[float]] = {}
    for r, p in zip(runs, preds, strict=True):
        if p.throughput_error is None:
            continue
        cl = r.scenario.cluster
        fw, chip, moe = _family(r.framework or DEFAULT_FRAMEWORK), cl.chip.name, r.scenario.model.is_moe
        scale = scale_class(cl.num_chips, cl.chips_per_node, p.compute_share or 0.0)
        for key in ((fw, chip, moe, scale), (fw, chip, moe, ANY)):
            classes.setdefault(key, []).append(p.throughput_error)
    own = {k: _band(*k, errs) for k, errs in classes.items()}
    pools = [_pool(ANY, ANY, False, scale, [b for k, b in own.items() if k[3] == scale], classes) for scale in SCALES]
    pools.append(_pool("all", "all", False, "all", [b for k, b in own.items() if k[3] != ANY], classes))
    return sorted(list(own.values()) + [p for p in pools if p is not None],
                  key=lambda b: (b.framework, b.chip, b.moe, b.scale))


def _band(framework: str, chip: str, moe: bool, scale: str, errs: list[float]) -> Band:
    a = np.abs(np.asarray(errs))
    return Band(framework=framework, chip=chip, moe=moe, scale=scale, runs=len(errs),
                band=conformal_band(a.tolist()), mean_abs=float(a.mean()), bias=float(np.mean(errs)))


def _pool(framework: str, chip: str, moe: bool, scale: str, members: list[Band],
          classes: dict[tuple[str, str, bool, str], list[float]]) -> Band | None:
    if not members:
        return None
    errs = [e for b in members for e in classes[(b.framework, b.chip, b.moe, b.scale)]]
    return Band(framework=framework, chip=chip, moe=moe, scale=scale, runs=len(errs),
                band=conformal_band([b.band for b in members]), mean_abs=float(np.mean(np.abs(errs))),
                bias=float(np.mean(errs)), classes=len(members))


def bands_to_yaml(bands: Sequence[Band], sources: Sequence[str], command: str, date: str) -> str:
    data = {"kind": "greentrain-error-bands", "quantile": BAND_QUANTILE, "min_runs": MIN_RUNS, "generated": date,
            "command": command, "sources": list(sources),
            "bands": [{"framework": b.framework, "chip": b.chip, "moe": b.moe, "scale": b.scale, "runs": b.runs,
                       "band": round(b.band, 4), "mean_abs": round(b.mean_abs, 4), "bias": round(b.bias, 4),
                       **({"classes": b.classes} if b.classes else {})}
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
                      bias=float(b["bias"]), classes=int(b.get("classes", 0))) for b in data.get("bands", []))


def band_for(framework: str, chip: str, moe: bool, num_chips: int, chips_per_node: int, *, compute_share: float,
             bands: Sequence[Band] | None = None) -> BandMatch:
    """The band for a scenario (``compute_share``: StepEstimate.compute_share of its prediction): its own class
    with at least MIN_RUNS runs; the same framework, chip and kind pooled over scales when the own class has runs
    but fewer; else the pool of the validated classes at the scenario's scale (the worst of them when there are
    fewer than 9; every class when none is at that scale), and no narrower than the pools of the scales below."""
    table = shipped_bands() if bands is None else bands
    fw, scale = _family(framework), scale_class(num_chips, chips_per_node, compute_share)
    by_key = {(b.framework, b.chip, b.moe, b.scale): b for b in table}
    own = by_key.get((fw, chip, moe, scale))
    own_runs = own.runs if own else 0
    if own is not None and own_runs >= MIN_RUNS:
        return BandMatch(band=own, how="exact")
    pooled = by_key.get((fw, chip, moe, ANY))
    if own_runs and pooled is not None and pooled.runs >= MIN_RUNS:
        return BandMatch(band=pooled, how="same class pooled over scales", own_runs=own_runs)
    # no narrower than the pools of the scales below (the two regimes beyond 16 nodes are not below each other)
    below = SCALES[:min(SCALES.index(scale), 2)]
    pools = [by_key.get((ANY, ANY, False, scale)) or by_key.get(("all", "all", False, "all")),
             *(by_key.get((ANY, ANY, False, s)) for s in below)]
    pool = max((b for b in pools if b is not None), key=lambda b: b.band, default=None)
    return BandMatch(band=pool, how="outside", own_runs=own_runs, scale=scale)


def scenario_band(sc: Scenario, framework: str, compute_share: float,
                  bands: Sequence[Band] | None = None) -> BandMatch:
    """band_for the scenario's class under ``framework`` ("" the default) and its predicted regime."""
    cl = sc.cluster
    return band_for(framework or DEFAULT_FRAMEWORK, cl.chip.name, sc.model.is_moe, cl.num_chips, cl.chips_per_node,
                    compute_share=compute_share, bands=bands)


@dataclass(frozen=True, slots=True, kw_only=True)
class BandCheck:
    """Whether the error bands `plan` states held on measured runs: per run, the band of its class (None where
    the run has no throughput error to score) and whether its |error| lies within it."""

    bands: tuple[float | None, ...]
    held: int
    scored: int


def check_bands(runs: Sequence[Run], preds: Sequence[Prediction], framework: str = "",
                bands: Sequence[Band] | None = None) -> BandCheck:
    """The band ``plan`` prints for each scored run (its class: ``framework`` if given, else the run's own, else
    the default), and how many of the runs' measured throughputs it holds. On the runs the bands were built from
    this is in-sample; on other measured runs it is the coverage build item 11 of docs/validation.md scores."""
    out: list[float | None] = []
    held = scored = 0
    for r, p in zip(runs, preds, strict=True):
        if p.throughput_error is None:
            out.append(None)
            continue
        match = scenario_band(r.scenario, framework or r.framework, p.compute_share or 0.0, bands)
        if match.band is None:
            out.append(None)
            continue
        out.append(match.band.band)
        scored += 1
        held += abs(p.throughput_error) <= match.band.band
    return BandCheck(bands=tuple(out), held=held, scored=scored)

