"""Typed results in and out: one frozen dataclass per kind of result file, each with one ``to_dict`` /
``from_dict`` pair, and ``load_result`` that reads any of them back from a file.

Every result file greentrain writes is a JSON mapping with the unit in every key, a ``kind`` (plan, search,
simulate, trace, track, compare, footprint) and a ``schema_version``. A dataclass here is a view of the JSON
its command writes (``plan --json``: report/plan.py; ``search --json``; ``simulate --json``; a simulation's
Chrome trace; ``measurement.json`` of ``track``; ``compare --json``; ``footprint --json``): the fields the
report and ``compare`` read are typed and checked, every other key is kept in ``extra`` so that
``from_dict(d).to_dict()`` gives back ``d`` (with ``kind`` and ``schema_version``).

This module holds the machinery (``@view``, the check each field's annotation gives, ``to_dict`` /
``from_dict``); the views are in results/kinds.py, analyses.py, experiment.py and calibration.py;
results/codec.py registers them by kind and reads a file as its view.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from greentrain.errors import ConfigError

SCHEMA_VERSION = 1  # the first version of every kind; a kind that changes a key's meaning raises its own SCHEMA

T = TypeVar("T", bound="ResultView")


# A view is a frozen keyword-only dataclass (``@view``); each field's annotation says how it is checked
# (_check_of): a required field has no default, an optional one is ``X | None = None``.
view = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)


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


_CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "number": _number, "int": _integer, "str": _text, "bool": _flag, "map": _mapping, "numbers": _numbers,
    "number_list": _number_list, "maps": _maps, "str_list": _str_list,
}
_CHECK_OF_TYPE: dict[Any, str] = {  # a field's annotation -> its check
    float: "number", int: "int", str: "str", bool: "bool", dict[str, Any]: "map", dict[str, float]: "numbers",
    tuple[float, ...]: "number_list", tuple[dict[str, Any], ...]: "maps", tuple[str, ...]: "str_list",
}


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    """How one field of a view is read: its check (a _CHECKS name, ``view`` or ``views``), whether a file must
    have it, and the nested view's class."""

    name: str
    check: str
    required: bool
    of: type[ResultView] | None = None


def _check_of(owner: type, name: str, hint: Any) -> tuple[str, type[ResultView] | None]:
    args = typing.get_args(hint)
    if hint in _CHECK_OF_TYPE:
        return _CHECK_OF_TYPE[hint], None
    if isinstance(hint, type) and issubclass(hint, ResultView):
        return "view", hint
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis and isinstance(args[0], type) \
            and issubclass(args[0], ResultView):
        return "views", args[0]
    raise TypeError(f"{owner.__name__}.{name}: {hint} is not a type a result view checks "
                    f"({', '.join(map(str, _CHECK_OF_TYPE))}, a view, a tuple of views, or one of them | None)")


_CHECKED: dict[type, tuple[Checked, ...]] = {}  # per view class, read once


def checked_fields(cls: type[ResultView]) -> tuple[Checked, ...]:
    """The typed fields of a view (``extra`` left out), each with its check read from its annotation."""
    known = _CHECKED.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        hint, args = hints[f.name], typing.get_args(hints[f.name])
        optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
        if optional:
            (hint,) = [a for a in args if a is not type(None)]
        check, of = _check_of(cls, f.name, hint)
        out.append(Checked(f.name, check, required=not optional, of=of))
    _CHECKED[cls] = tuple(out)
    return _CHECKED[cls]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResultView:
    """Base of the views: typed fields (checked as their annotations say: ``checked_fields``) plus ``extra``, every
    other key of the JSON."""

    KIND: ClassVar[str] = ""  # the kind's name: lower case, words joined by "_" (every kind, one style)
    # the typed numbers that may be below 0 (errors); every other one is an amount (seconds, joules, bytes, USD,
    # counts, fractions) and a value < 0 is refused: compare scored num_steps -1 and energy_j -5, report drew -1 s
    SIGNED: ClassVar[tuple[str, ...]] = ()
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
        for f in checked_fields(type(self)):
            value = getattr(self, f.name)
            if value is None and not f.required:
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
        for f in checked_fields(cls):
            names.add(f.name)
            at = prefix + f.name
            if f.name not in data or (data[f.name] is None and not f.required):
                if f.required:
                    raise ConfigError(at, None, f"is missing: a {cls.KIND or cls.__name__} result has it")
                continue
            values[f.name] = _decode(data[f.name], f, at)
            if f.check in ("number", "int") and f.name not in cls.SIGNED and values[f.name] < 0:
                raise ConfigError(at, data[f.name], "must be >= 0 (an amount)")
        return cls(**values, extra={k: v for k, v in data.items() if k not in names})


def _decode(value: Any, f: Checked, where: str) -> Any:
    if f.of is None:
        return _CHECKS[f.check](value, where)
    if f.check == "view":
        return f.of.decode_fields(_mapping(value, where), f"{where}.")
    return tuple(f.of.decode_fields(m, f"{where}[{i}].") for i, m in enumerate(_maps(value, where)))


def _encode(value: Any) -> Any:
    if isinstance(value, ResultView):
        return value.fields_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def stamp(kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with ``kind`` and ``schema_version`` in front: what a writer adds to the JSON it prints."""
    return {"kind": kind, "schema_version": SCHEMA_VERSION, **data}
