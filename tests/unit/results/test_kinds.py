"""Every JSON kind greentrain writes is registered in results/codec.py under one naming style, with its schema
version; the names written before 0.2.0 are read back as today's kinds; a newer version is refused in one line."""

from __future__ import annotations

import re

import pytest

from greentrain.errors import ConfigError
from greentrain.results.calibration import CalibrationProfile, ValidationResult
from greentrain.results.codec import REGISTRY, VERSIONS, from_dict, kind_of, newest
from greentrain.results.experiment import (
    ExperimentManifest,
    ExperimentPlanResult,
    ExperimentResult,
    ExperimentVariantResult,
)
from greentrain.results.kinds import SearchResultView, SearchRow, TrackResult
from greentrain.results.view import ResultView, checked_fields, view

OLD = {"greentrain-calibration": "calibration", "greentrain-validation": "validation",
       "greentrain.experiment.variant": "experiment_variant", "greentrain.experiment.plan": "experiment_plan",
       "greentrain.experiment": "experiment_manifest", "greentrain.experiment.report": "experiment_report"}
SAMPLES = {
    CalibrationProfile: {"chip": "h100-sxm", "framework": "megatron", "constants": {"kernel_efficiency": 0.6}},
    ValidationResult: {"settings": {}, "rows": [{"run_id": "a"}], "summary": {"num_runs": 1}},
    ExperimentVariantResult: {"variant_id": "base", "status": "ok", "energy_j": 1.0, "peak_memory_bytes": 2.0,
                              "config_hash": "abc"},
    ExperimentPlanResult: {"name": "e", "variants": [], "energy_kwh": None, "over_budget": []},
    ExperimentManifest: {"name": "e", "variants": [{"variant_id": "base"}], "task": "causal-lm"},
    ExperimentResult: {"name": "e", "variants": [], "pareto": [], "findings": [], "quality": {}},
}


def test_every_kind_one_naming_style() -> None:
    assert set(OLD.values()) <= set(REGISTRY)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", kind) for kind in REGISTRY), sorted(REGISTRY)


@pytest.mark.parametrize("view", list(SAMPLES))
def test_each_kind_round_trips_and_its_old_name_reads_back(view: type) -> None:
    data = {**view.head(), **SAMPLES[view]}
    assert data["schema_version"] == newest(view.KIND) == view.SCHEMA
    read = from_dict(data, "f.json")
    assert type(read) is view and read.to_dict() == data
    (old,) = view.OLD_NAMES
    assert OLD[old] == view.KIND
    versioned = [v for v in VERSIONS[view.KIND] if v is not None]
    assert type(from_dict({**data, "kind": old, "schema_version": versioned[0]})) is view


def test_experiment_plan_has_a_schema_version_and_reads_unversioned_files() -> None:
    assert ExperimentPlanResult.head() == {"kind": "experiment_plan", "schema_version": 1}
    assert kind_of({"kind": "greentrain.experiment.plan", "name": "e"}) == "experiment_plan"


def test_a_newer_schema_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"f.json: schema_version=3: is newer than this greentrain reads.*"
                                          r"reads calibration schema 2"):
        kind_of({"kind": "greentrain-calibration", "schema_version": 3}, "f.json")


@pytest.mark.parametrize("view", list(SAMPLES))
def test_every_kind_has_a_report_section(view: type) -> None:
    """`greentrain report` draws every registered kind (a kind without its own section: its fields)."""
    from greentrain.report.html import build_page

    page = build_page([("f.json", from_dict({**view.head(), **SAMPLES[view]}))])
    assert f'class="result {view.KIND}"' in page and "f.json" in page


def _views(cls: type[ResultView]) -> list[type[ResultView]]:
    return [v for sub in cls.__subclasses__() for v in (sub, *_views(sub))]


def test_every_view_field_is_checked_as_its_annotation_says() -> None:
    """A view's fields are plain annotations (results/view.py checked_fields): each one greentrain declares maps to
    a check, ``X | None`` is optional, and a nested view is read as its class."""
    ours = [v for v in _views(ResultView) if v.__module__.startswith("greentrain.")]  # not a test's own views
    fields = {v: {f.name: f for f in checked_fields(v)} for v in ours}
    assert len(fields) >= len(REGISTRY)
    search = fields[SearchResultView]
    assert (search["ranked"].check, search["ranked"].of, search["num_candidates"].check) == ("views", SearchRow, "int")
    grid = fields[TrackResult]["grid_g_co2e_per_kwh"]
    assert (grid.check, grid.required) == ("number", False)


def test_an_annotation_without_a_check_is_refused() -> None:
    @view
    class Odd(ResultView):
        when: complex

    with pytest.raises(TypeError, match=r"Odd.when: .*complex.* is not a type a result view checks"):
        checked_fields(Odd)
