"""Typed results in and out: one frozen dataclass per kind of result file, each with one ``to_dict`` /
``from_dict`` pair, and ``load_result`` that reads any of them back from a file.

Every result file greentrain writes is a JSON mapping with the unit in every key, a ``kind`` (plan, search,
simulate, trace, track, compare, footprint) and a ``schema_version``. A dataclass here is a view of the JSON
its command writes (``plan --json``: report/plan.py; ``search --json``; ``simulate --json``; a simulation's
Chrome trace; ``measurement.json`` of ``track``; ``compare --json``; ``footprint --json``): the fields the
report and ``compare`` read are typed and checked, every other key is kept in ``extra`` so that
``from_dict(d).to_dict()`` gives back ``d`` (with ``kind`` and ``schema_version``).

This module holds the machinery (typed fields, their checks, ``to_dict`` / ``from_dict``); the views are in
results/kinds.py and results/analyses.py; results/codec.py registers them by kind and reads a
file as its view.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from greentrain.errors import ConfigError

SCHEMA_VERSION = 1  # the first version of every kind; a kind that changes a key's meaning raises its own SCHEMA

T = TypeVar("T", bound="ResultView")


def typed(check: str, required: bool = True, of: type[ResultView] | None = None) -> Any:
    """A typed field of a view: ``check`` names its rule (see _CHECKS); optional fields default to None."""
    meta = {"check": check, "required": required, "of": of}
    return dataclasses.field(default=None, metadata=meta) if not required else dataclasses.field(metadata=meta)


def at_field(where: str, name: str) -> str:
    return f"{where}: {name}" if where else name


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(where, v, "must be a finite number")
    return float(v)


def _integer(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(where, v, "must be an integer")
    return v


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise ConfigError(where, v, "must be a string")
    return v


def _flag(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(where, v, "must be true or false")
    return v


def _mapping(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(where, v, "must be a mapping")
    return dict(v)


def _numbers(v: Any, where: str) -> dict[str, float]:
    """A mapping of names to numbers (``step_breakdown_s``, ``memory_bytes_per_device``)."""
    return {str(k): _number(x, f"{where}.{k}") for k, x in _mapping(v, where).items()}


def _number_list(v: Any, where: str) -> tuple[float, ...]:
    if not isinstance(v, list):
        raise ConfigError(where, v, "must be a list of numbers")
    return tuple(_number(x, f"{where}[{i}]") for i, x in enumerate(v))


def _maps(v: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(v, list):
        raise ConfigError(where, v, "must be a list of mappings")
    return tuple(_mapping(x, f"{where}[{i}]") for i, x in enumerate(v))


def _str_list(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, list):
        raise ConfigError(where, v, "must be a list of strings")
    return tuple(_text(x, f"{where}[{i}]") for i, x in enumerate(v))


def _opt_number(v: Any, where: str) -> float | None:
    return None if v is None else _number(v, where)


_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "number": _number, "int": _integer, "str": _text, "bool": _flag, "map": _mapping, "numbers": _numbers,
    "number_list": _number_list, "maps": _maps, "opt_number": _opt_number, "str_list": _str_list,
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResultView:
    """Base of the views: typed fields (declared with ``typed``) plus ``extra``, every other key of the JSON."""

    KIND: ClassVar[str] = ""  # the kind's name: lower case, words joined by "_" (every kind, one style)
    SCHEMA: ClassVar[int] = SCHEMA_VERSION  # the kind's newest schema version, raised when a key changes meaning
    OLD_NAMES: ClassVar[tuple[str, ...]] = ()  # names the kind was written under before (read back as it)
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def head(cls) -> dict[str, Any]:
        """``kind`` and ``schema_version``: what a writer puts first in the mapping it writes."""
        return {"kind": cls.KIND, "schema_version": cls.SCHEMA}

    def to_dict(self) -> dict[str, Any]:
        """The JSON mapping: ``kind`` and ``schema_version`` first (a top-level kind), then every key."""
        return {**(self.head() if self.KIND else {}), **self.fields_dict()}

    def fields_dict(self) -> dict[str, Any]:
        """The keys without ``kind`` and ``schema_version`` (a view nested in another one)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (value is None and not f.metadata.get("required", True)):
                continue
            out[f.name] = _encode(value)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any], where: str = "") -> T:
        """Check every typed field; ``where`` (the file's path) starts every error."""
        return cls.decode_fields(data, f"{where}: " if where else "")

    @classmethod
    def decode_fields(cls: type[T], data: Mapping[str, Any], prefix: str) -> T:
        """``prefix`` is put before a field's name in an error (``FILE: ranked[1].``)."""
        values: dict[str, Any] = {}
        names = {"kind", "schema_version", "extra"}
        for f in dataclasses.fields(cls):
            names.add(f.name)
            if f.name == "extra":
                continue
            meta, at = f.metadata, prefix + f.name
            if f.name not in data or (data[f.name] is None and not meta["required"]):
                if meta["required"]:
                    raise ConfigError(at, None, f"is missing: a {cls.KIND or cls.__name__} result has it")
                continue
            values[f.name] = _decode(data[f.name], meta, at)
        return cls(**values, extra={k: v for k, v in data.items() if k not in names})


def _decode(value: Any, meta: Mapping[str, Any], where: str) -> Any:
    nested = meta.get("of")
    if nested is None:
        return _CHECKS[meta["check"]](value, where)
    if meta["check"] == "view":
        return nested.decode_fields(_mapping(value, where), f"{where}.")
    return tuple(nested.decode_fields(m, f"{where}[{i}].") for i, m in enumerate(_maps(value, where)))


def _encode(value: Any) -> Any:
    if isinstance(value, ResultView):
        return value.fields_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def stamp(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with ``kind`` and ``schema_version`` in front: what a writer adds to the JSON it prints."""
    return {"kind": kind, "schema_version": SCHEMA_VERSION, **data}
