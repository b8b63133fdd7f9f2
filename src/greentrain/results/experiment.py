"""The result kinds of ``greentrain experiment`` (see results/view.py for the rules; registered by
results/codec.py): a variant's result.json, the plan of an experiment, its folder's experiment.json and the
report's results.json. Written before 0.2.0 as ``greentrain.experiment.variant``, ``greentrain.experiment.plan``
(without a schema version), ``greentrain.experiment`` (without one) and ``greentrain.experiment.report``: those
names are read back as these kinds."""

from __future__ import annotations

from typing import Any, ClassVar

from greentrain.results.view import ResultView, view


@view
class ExperimentVariantResult(ResultView):
    """One variant's result.json (experiment/results.py's VariantResult): run, measured, predicted, priced."""

    KIND: ClassVar[str] = "experiment_variant"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment.variant",)
    variant_id: str
    status: str
    energy_j: float
    peak_memory_bytes: float


@view
class ExperimentPlanResult(ResultView):
    """``greentrain experiment plan --json`` (experiment/plan.py): each variant predicted, the totals, the budget."""

    KIND: ClassVar[str] = "experiment_plan"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment.plan",)
    name: str
    variants: tuple[dict[str, Any], ...]
    over_budget: tuple[str, ...]


@view
class ExperimentManifest(ResultView):
    """An experiment folder's experiment.json (experiment/runner.py): name, site, task and the variants, which
    ``status`` and ``report`` read."""

    KIND: ClassVar[str] = "experiment_manifest"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment",)
    name: str
    variants: tuple[dict[str, Any], ...]


@view
class ExperimentResult(ResultView):
    """An experiment's results.json (experiment/report.py): variants run, measured, predicted and priced."""

    KIND: ClassVar[str] = "experiment_report"
    OLD_NAMES: ClassVar[tuple[str, ...]] = ("greentrain.experiment.report",)
    name: str
    variants: tuple[dict[str, Any], ...]
    pareto: tuple[str, ...]
    findings: tuple[dict[str, Any], ...]
    quality: dict[str, Any]
