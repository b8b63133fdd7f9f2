"""The result kinds of ``greentrain experiment`` (see results/view.py for the rules; registered by
results/codec.py): a variant's result.json, the plan of an experiment, its folder's experiment.json and the
report's results.json. Written before 0.2.0 as ``greentrain.experiment.variant``, ``greentrain.experiment.plan``
(without a schema version), ``greentrain.experiment`` (without one) and ``greentrain.experiment.report``: those
names are read back as these kinds."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from greentrain.results.view import ResultView, typed

_view = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)


@_view
class ExperimentVariantResult(ResultView):
    """One variant's result.json (experiment/results.py's VariantResult): run, measured, predicted, priced."""

    KIND: ClassVar[str] = "experiment_variant"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment.variant",)
    variant_id: str = typed("str")
    status: str = typed("str")
    energy_j: float = typed("number")
    peak_memory_bytes: float = typed("number")


@_view
class ExperimentPlanResult(ResultView):
    """``greentrain experiment plan --json`` (experiment/plan.py): each variant predicted, the totals, the budget."""

    KIND: ClassVar[str] = "experiment_plan"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment.plan",)
    name: str = typed("str")
    variants: tuple[dict[str, Any], ...] = typed("maps")
    over_budget: tuple[str, ...] = typed("str_list")


@_view
class ExperimentManifest(ResultView):
    """An experiment folder's experiment.json (experiment/runner.py): name, site, task and the variants, which
    ``status`` and ``report`` read."""

    KIND: ClassVar[str] = "experiment_manifest"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment",)
    name: str = typed("str")
    variants: tuple[dict[str, Any], ...] = typed("maps")


@_view
class ExperimentResult(ResultView):
    """An experiment's results.json (experiment/report.py): variants run, measured, predicted and priced."""

    KIND: ClassVar[str] = "experiment_report"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment.report",)
    name: str = typed("str")
    variants: tuple[dict[str, Any], ...] = typed("maps")
    pareto: tuple[str, ...] = typed("str_list")
    findings: tuple[dict[str, Any], ...] = typed("maps")
    quality: dict[str, Any] = typed("map")
