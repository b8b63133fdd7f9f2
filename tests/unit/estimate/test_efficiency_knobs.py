"""Issue 25 item 5: an efficiency knob is one field of ``Efficiency``. Its level (which efficiency.yaml entry says
it), kind and rules live in the field's metadata; the YAML key lists, the YAML parsing, the range checks, the
calibration profile's fields and the one-line errors are derived from it."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from greentrain.errors import ConfigError
from greentrain.estimate import efficiency
from greentrain.estimate.efficiency import Efficiency, knobs, with_calibration, yaml_keys
from greentrain.estimate.knobs import KINDS

BAD = {"fraction": 1.5, "seconds": -1.0, "bytes": -1.0, "count": -1.0, "rate": 0.0, "choice": "nonsense",
       "stages": (5,), "ops": ("softmax",)}


def test_every_field_is_a_knob_with_a_level_and_a_kind() -> None:
    ks = knobs()
    assert list(ks) == [f.name for f in dataclasses.fields(Efficiency)]
    assert {k.level for k in ks.values()} == {"chip", "framework", "kernel", ""}
    assert all(k.kind in KINDS for k in ks.values())
    # the YAML keys are derived: a framework's reserve is given in GiB, an offload block may follow
    assert "reserved_gib" in yaml_keys("framework") and "reserved_bytes" not in yaml_keys("framework")
    assert yaml_keys("framework")[-1] == "offload" and "matmul_max" in yaml_keys("chip")
    assert set(yaml_keys("chip")) & set(yaml_keys("framework")) == {"source"}


RULED = [n for n, k in knobs().items() if k.rules and k.kind in BAD]


@pytest.mark.parametrize("name", RULED)
def test_a_bad_value_is_one_line_naming_field_value_and_rule(name: str) -> None:
    eff = efficiency.efficiency_for("h100-sxm", "megatron")
    bad = BAD[knobs()[name].kind]
    change: dict[str, Any] = {name: bad}
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(eff, **change)
    line = str(err.value)
    assert "\n" not in line and ("must" in line or "is not" in line)
    if name not in ("selective_recompute", "default_recompute"):  # recompute.check_selective_mode's own line
        assert f"efficiency.{name}" in line and str(list(bad) if isinstance(bad, tuple) else bad) in line


@pytest.fixture
def edited(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    data: dict[str, Any] = copy.deepcopy(efficiency._data())
    monkeypatch.setattr(efficiency, "_data", lambda: data)
    efficiency.efficiency_for.cache_clear()
    yield data
    monkeypatch.undo()
    efficiency.efficiency_for.cache_clear()


def test_yaml_values_are_parsed_by_kind(edited: dict[str, Any]) -> None:
    edited["frameworks"]["ddp"] |= {"reserved_gib": 2, "dp_overlap": "no", "zero_stages": [1, 2]}
    eff = efficiency.efficiency_for("a100-80gb", "ddp")
    assert eff.reserved_bytes == 2 * 2**30 and eff.dp_overlap is False and eff.zero_stages == (1, 2)
    edited["frameworks"]["ddp"]["host_layer_s"] = "fast"
    efficiency.efficiency_for.cache_clear()
    with pytest.raises(ConfigError, match=r"efficiency.host_layer_s='fast': must be a number"):
        efficiency.efficiency_for("a100-80gb", "ddp")
    edited["frameworks"]["ddp"] |= {"host_layer_s": 0.001, "zero_stages": ["one"]}
    efficiency.efficiency_for.cache_clear()
    with pytest.raises(ConfigError, match=r"efficiency.zero_stages=\['one'\]: must be a list of whole numbers"):
        efficiency.efficiency_for("a100-80gb", "ddp")
    edited["frameworks"]["ddp"] = {"host_layer_ms": 1.0}
    efficiency.efficiency_for.cache_clear()
    with pytest.raises(ConfigError, match="host_layer_ms"):
        efficiency.efficiency_for("a100-80gb", "ddp")


def _profile(tmp_path: Path, constants: dict[str, Any]) -> Path:
    path = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}.yaml"  # with_calibration caches by path
    path.write_text(yaml.safe_dump({"kind": "calibration", "schema_version": 2, "chip": "a100-80gb",
                                    "framework": "megatron", "constants": constants}))
    return path


def test_calibration_fields_are_the_calibrated_knobs(tmp_path: Path) -> None:
    fitted = {n for n, k in knobs().items() if k.calibrated}
    assert {"matmul_max", "host_layer_s", "reserved_bytes", "dp_overlap", "pipeline_balance"} <= fitted
    assert fitted.isdisjoint({"loss_kernel", "zero_stages", "framework", "chip_has_data", "attention_fused"})
    eff = efficiency.efficiency_for("a100-80gb", "megatron")
    cal = with_calibration(eff, _profile(tmp_path, {"reserved_bytes": 3.0e9, "dp_overlap": "yes",
                                                    "pipeline_balance": "cost"}))
    assert (cal.reserved_bytes, cal.dp_overlap, cal.pipeline_balance) == (3.0e9, True, "cost")  # bytes, not GiB
    with pytest.raises(ConfigError, match="loss_kernel"):
        with_calibration(eff, _profile(tmp_path, {"loss_kernel": "fused"}))
    with pytest.raises(ConfigError, match=r"calibration.constants.host_layer_s=True: must be a number"):
        with_calibration(eff, _profile(tmp_path, {"host_layer_s": True}))
    with pytest.raises(ConfigError, match=r"efficiency.memory=1.2: must be in \(0, 1\]"):
        with_calibration(eff, _profile(tmp_path, {"memory": 1.2}))
