"""Result files in: the registry of result kinds (results/kinds.py, results/analyses.py) and
``load_result``, which reads any result file as its typed view.

A file's ``kind`` and ``schema_version`` are checked here; a file written before the commands stamped a kind
is read as schema 1 of the one kind whose keys it has. Anything else is a ConfigError naming the file, the
field, the value and the rule (the CLI prints it as one line, exit status 2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from greentrain.errors import ConfigError
from greentrain.results.analyses import BatchTimeResult, OffloadHeatmapResult, TrafficResult
from greentrain.results.calibration import CalibrationProfile, ValidationResult
from greentrain.results.experiment import (
    ExperimentManifest,
    ExperimentPlanResult,
    ExperimentResult,
    ExperimentVariantResult,
)
from greentrain.results.kinds import (
    CompareResult,
    FootprintResult,
    PlanResult,
    RegionsResult,
    SearchResultView,
    SimStepView,
    SimSwarmView,
    TraceView,
    TrackResult,
)
from greentrain.results.view import SCHEMA_VERSION, ResultView, at_field, stamp

__all__ = ["REGISTRY", "from_dict", "kind_of", "load_result", "register", "stamp"]

Decoder = Callable[[Mapping[str, Any], str], ResultView]
REGISTRY: dict[str, Decoder] = {}  # kind -> decoder
VERSIONS: dict[str, tuple[int | None, ...]] = {}  # kind -> the schema versions read (None: the key absent)
SIGNATURES: list[tuple[str, Callable[[Mapping[str, Any]], bool]]] = []  # for files written before kinds
ALIASES: dict[str, str] = {}  # an old kind name -> the kind


def register(kind: str, decoder: Decoder, signature: Callable[[Mapping[str, Any]], bool],
             versions: tuple[int | None, ...] = (SCHEMA_VERSION,), old_names: tuple[str, ...] = ()) -> None:
    """One kind: its decoder, how to recognise a file written before kinds were stamped, the schema versions
    read (None: a file without the key) and the names it was written under before (read back as it)."""
    REGISTRY[kind] = decoder
    VERSIONS[kind] = versions
    SIGNATURES.append((kind, signature))
    ALIASES.update(dict.fromkeys(old_names, kind))


def canonical_kind(name: Any) -> Any:
    """A kind's name as registered today (an old name, such as ``greentrain-calibration``, read back as it)."""
    return ALIASES.get(name, name) if isinstance(name, str) else name


def newest(kind: str) -> int:
    return max(v for v in VERSIONS[kind] if v is not None)


def kind_of(data: Mapping[str, Any], where: str = "") -> str:
    """The file's kind: its ``kind`` key (checked, with its schema version), or for a file written before
    kinds existed, the one kind whose keys it has."""
    if "kind" not in data:
        found = [k for k, sig in SIGNATURES if sig(data)]
        if len(found) != 1:
            keys = sorted(map(str, data))
            shown = ", ".join(keys[:6]) + (", ..." if len(keys) > 6 else "")
            raise ConfigError(at_field(where, "kind"), None, f"is missing and the keys ({shown}) are not those "
                              f"of one result kind ({', '.join(REGISTRY)})")
        return found[0]
    kind = canonical_kind(data["kind"])
    if kind not in REGISTRY:
        raise ConfigError(at_field(where, "kind"), kind, f"is not a result kind greentrain reads "
                                                       f"({', '.join(REGISTRY)})")
    version = data.get("schema_version")
    if version not in VERSIONS[kind] or isinstance(version, bool):
        rule = ("is newer than this greentrain reads: upgrade greentrain" if isinstance(version, int)
                and not isinstance(version, bool) and version > newest(kind) else
                "is not one this greentrain reads: rewrite the file with this greentrain")
        raise ConfigError(at_field(where, "schema_version"), version, f"{rule} (reads {kind} schema {newest(kind)})")
    return str(kind)


def from_dict(data: Mapping[str, Any], where: str = "") -> ResultView:
    """Any result mapping as its typed view."""
    return REGISTRY[kind_of(data, where)](data, where)


def load_result(path: str | Path) -> ResultView:
    """Read a result file (JSON) as its typed view; ConfigError (one line naming the file) when it is not one."""
    from greentrain.config import load_mapping

    text_path = str(path)
    if not text_path.endswith(".json"):
        raise ConfigError("file", text_path, f"must be a .json result file ({', '.join(REGISTRY)})")
    return from_dict(load_mapping(path, field="file"), text_path)


V = TypeVar("V", bound=ResultView)


def load_view(path: str | Path, want: type[V], field: str) -> V:
    """A result file (JSON or YAML) read as its view, which must be a ``want``; ConfigError otherwise (one line
    naming the file: ``field`` names the input, such as ``track`` or ``calibration``)."""
    from greentrain.config import load_mapping

    view = from_dict(load_mapping(path, field=field), str(path))
    if not isinstance(view, want):
        raise ConfigError(field, str(path), f"is a {view.KIND or type(view).__name__} result, not {want.KIND}")
    return view


def _simulate(data: Mapping[str, Any], where: str) -> ResultView:
    mode = data.get("mode")
    if mode == "step":
        return SimStepView.from_dict(data, where)
    if mode == "swarm":
        return SimSwarmView.from_dict(data, where)
    raise ConfigError(at_field(where, "mode"), mode, "must be step or swarm (a simulate result)")


def _footprint(data: Mapping[str, Any], where: str) -> ResultView:
    return RegionsResult.from_dict(data, where) if "regions" in data else FootprintResult.from_dict(data, where)


register("plan", PlanResult.from_dict, lambda d: "step_breakdown_s" in d and "strategy" in d)
register("search", SearchResultView.from_dict, lambda d: "ranked" in d and "num_candidates" in d)
register("simulate", _simulate, lambda d: d.get("mode") in ("step", "swarm"))
register("trace", TraceView.from_dict, lambda d: "traceEvents" in d)
register("track", TrackResult.from_dict, lambda d: "meters" in d and "num_steps" in d and "status" in d)
register("compare", CompareResult.from_dict, lambda d: "rows" in d and "warnings" in d)
register("footprint", _footprint, lambda d: "regions" in d or ("energy_basis" in d and "lifetime_years" in d))
register("traffic", TrafficResult.from_dict, lambda d: "tx_bytes_per_chip" in d and "degrees" in d)
register("batch_time", BatchTimeResult.from_dict, lambda d: "batch_time_s" in d and "bubble_time_s" in d)
register("offload_heatmap", OffloadHeatmapResult.from_dict, lambda d: "cells" in d and "metric" in d)


def _register_view(view: type[ResultView], versions: tuple[int | None, ...]) -> None:
    """A kind that every file names (no signature): its own decoder, versions and old names."""
    register(view.KIND, view.from_dict, lambda d: False, versions=versions, old_names=view.OLD_NAMES)


# written before schema_version 1 without one: experiment report, plan and manifest; calibration profiles
# without one are schema 1 (estimate.efficiency.with_calibration refuses those fitted on the device total)
_register_view(ExperimentResult, (None, 1))
_register_view(ExperimentVariantResult, (1,))
_register_view(ExperimentPlanResult, (None, 1))
_register_view(ExperimentManifest, (None, 1))
_register_view(CalibrationProfile, (None, 1, 2))
_register_view(ValidationResult, (1, 2))
