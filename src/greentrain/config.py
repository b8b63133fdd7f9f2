"""YAML/JSON files -> plain mappings -> checked values for the frozen dataclasses.

Every reader names the field in dotted form (``model.num_layers``) so that a bad value gives a one-line
ConfigError naming the field, the value and the rule. Unknown keys are rejected with a "did you mean".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from greentrain.errors import ConfigError, did_you_mean


def load_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON file whose top level is a mapping."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError("path", str(path), "file does not exist")
    text = p.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ConfigError("path", str(path), f"malformed JSON at line {e.lineno}: {e.msg}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "syntax error"
        raise ConfigError("path", str(path), f"malformed YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("path", str(path), f"top level must be a mapping, got {type(data).__name__}")
    return data


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Reject keys that are not in ``allowed``."""
    allowed_set = set(allowed)
    for key in data:
        if key not in allowed_set:
            raise ConfigError(_join(where, str(key)), data[key], "unknown key" + did_you_mean(str(key), allowed_set))


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def as_int(value: Any, field: str, *, minimum: int | None = None) -> int:
    """An integer (a float with no fractional part such as 1e6 is accepted)."""
    if isinstance(value, bool):
        raise ConfigError(field, value, "must be an integer")
    if isinstance(value, str):
        try:
            value = float(value) if any(c in value for c in ".eE") else int(value)
        except ValueError:
            raise ConfigError(field, value, "must be an integer") from None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ConfigError(field, value, "must be an integer")
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(field, value, "must be an integer")
    if minimum is not None and value < minimum:
        raise ConfigError(field, value, f"must be >= {minimum}")
    return value


def as_float(value: Any, field: str, *, minimum: float | None = None, positive: bool = False,
             maximum: float | None = None) -> float:
    if isinstance(value, bool):
        raise ConfigError(field, value, "must be a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "must be a number") from None
    if not math.isfinite(x):
        raise ConfigError(field, value, "must be finite")
    if positive and x <= 0:
        raise ConfigError(field, value, "must be > 0")
    if minimum is not None and x < minimum:
        raise ConfigError(field, value, f"must be >= {minimum}")
    if maximum is not None and x > maximum:
        raise ConfigError(field, value, f"must be <= {maximum}")
    return x


def as_bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        return value.lower() in ("true", "yes", "on", "1")
    raise ConfigError(field, value, "must be true or false")


def as_choice(value: Any, field: str, choices: Iterable[str]) -> str:
    options = list(choices)
    s = str(value).lower()
    if s not in options:
        raise ConfigError(field, value, f"must be one of {', '.join(options)}")
    return s


def require(condition: bool, field: str, value: object, rule: str) -> None:
    """Raise ConfigError(field, value, rule) unless ``condition`` holds."""
    if not condition:
        raise ConfigError(field, value, rule)
