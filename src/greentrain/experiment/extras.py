"""The optional libraries of ``greentrain experiment``, found without importing them (a missing one is refused
before any work, in one line naming the extra to install)."""

from __future__ import annotations

import importlib.util
import sys

from greentrain.errors import ConfigError

EXTRA_MODULES = ("torch", "transformers", "accelerate", "tokenizers", "rouge_score")  # the experiment extra


def missing_modules(names: tuple[str, ...] = EXTRA_MODULES) -> list[str]:
    """The modules among ``names`` that cannot be imported (a module set to None in sys.modules counts)."""
    missing = []
    for name in names:
        if name in sys.modules:
            if sys.modules[name] is None:
                missing.append(name)
            continue
        if importlib.util.find_spec(name) is None:
            missing.append(name)
    return missing


def require_modules(names: tuple[str, ...], extra: str, field: str, value: object) -> None:
    """A ConfigError naming ``field``, ``value`` and the extra when one of ``names`` is not installed."""
    missing = missing_modules(names)
    if missing:
        raise ConfigError(field, value, f"needs {', '.join(missing)}, which is not installed: "
                          f"pip install 'greentrain[{extra}]'")
