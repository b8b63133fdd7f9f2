"""The optional libraries of ``greentrain experiment``, found without importing them (a missing one is refused
before any work, in one line naming the extra to install)."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

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


def import_submitit() -> Any:
    """submitit, imported without the logging.config.dictConfig its logger module runs at import (unless
    SUBMITIT_LOG_LEVEL is set): a non-incremental dictConfig shuts down every logging handler the program has
    already installed (logging.config._clearExistingHandlers), the user's and their test runner's included."""
    if "submitit" not in sys.modules and "SUBMITIT_LOG_LEVEL" not in os.environ:
        os.environ["SUBMITIT_LOG_LEVEL"] = "NOCONFIG"
        try:
            import submitit
        finally:
            del os.environ["SUBMITIT_LOG_LEVEL"]
    import submitit

    return submitit
