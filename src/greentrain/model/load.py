"""Resolve a model argument: a preset name, a YAML file, or a Hugging Face config.json."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from greentrain.config import MAX_NAME_CHARS, MAX_PATH_CHARS, load_mapping
from greentrain.errors import ConfigError, did_you_mean
from greentrain.model.spec import TransformerSpec


def _preset_dir() -> Any:
    return resources.files("greentrain.model").joinpath("presets")


@cache
def preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".yaml")))


@cache
def load_preset(name: str) -> TransformerSpec:
    key = name.strip().lower()
    if key not in preset_names():
        raise ConfigError("model", name, "unknown model preset"
                          + did_you_mean(key, preset_names(), "greentrain catalog models"))
    data = yaml.safe_load(_preset_dir().joinpath(f"{key}.yaml").read_text(encoding="utf-8"))
    data.setdefault("name", key)
    return TransformerSpec.from_dict(data, where=f"model({key})")


def load_model(arg: str | dict[str, Any] | TransformerSpec) -> TransformerSpec:
    """A TransformerSpec from a preset name, a mapping, a YAML file or a Hugging Face config.json."""
    if isinstance(arg, TransformerSpec):
        return arg
    if isinstance(arg, dict):
        return TransformerSpec.from_dict(dict(arg))
    if not isinstance(arg, str) or not arg.strip():
        raise ConfigError("model", arg, "must be a preset name, a model YAML or config.json path, or a mapping")
    if len(arg) > MAX_PATH_CHARS or any(len(part) > MAX_NAME_CHARS for part in Path(arg).parts):
        raise ConfigError("model", arg, f"is not a preset name or a path: a name is at most {MAX_NAME_CHARS} "
                          f"characters, a path {MAX_PATH_CHARS} (Linux NAME_MAX, PATH_MAX)")
    path = Path(arg)
    if path.suffix in (".yaml", ".yml", ".json") or path.is_file() or path.is_dir():
        if path.is_dir():
            path = path / "config.json"
        data = load_mapping(path, field="model")
        if path.suffix == ".json" and ("model_type" in data or "architectures" in data):
            from greentrain.model.hf import spec_from_hf_config

            return spec_from_hf_config(data, name=path.parent.name if path.name == "config.json" else path.stem)
        data.setdefault("name", path.stem)
        return TransformerSpec.from_dict(data, where=f"model({path.name})")
    return load_preset(arg)
