"""The experiment file: expansion (counts, ids, order), the config hash, bad input as one ConfigError."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment.spec import experiment_from_dict

BASE: dict[str, Any] = {
    "name": "t",
    "model": {"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}},
    "train": {"max_steps": 4, "per_device_train_batch_size": 4},
    "axes": {"train.precision": ["bf16", "fp16"], "train.optim": ["adafactor"],
             "batch": [{"label": "bs32", "set": {"train.per_device_train_batch_size": 32, "train.max_steps": 2}}]},
}


def exp(**changes: Any) -> Any:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return experiment_from_dict(data)


def test_one_at_a_time_is_base_plus_each_axis_value_in_file_order() -> None:
    e = exp()
    assert [v.variant_id for v in e.variants] == ["base", "train.precision=bf16", "train.precision=fp16",
                                                  "train.optim=adafactor", "bs32"]
    bs32 = e.variants[-1].job.train
    assert (bs32.batch_size, bs32.max_steps) == (32, 2)
    assert e.variants[1].job.train.precision == "bf16" and e.variants[1].job.train.batch_size == 4


def test_grid_is_the_product_with_labels_joined_by_plus() -> None:
    e = exp(combine="grid")
    assert len(e.variants) == 2 * 1 * 1
    assert [v.variant_id for v in e.variants] == ["train.precision=bf16+train.optim=adafactor+bs32",
                                                  "train.precision=fp16+train.optim=adafactor+bs32"]
    assert e.variants[0].job.train.optim == "adafactor" and e.variants[0].job.train.batch_size == 32


def test_list_zips_axes_of_equal_length() -> None:
    e = exp(combine="list", axes={"train.precision": ["bf16", "fp32"], "train.optim": ["adafactor", "adamw_torch"]})
    assert [v.variant_id for v in e.variants] == ["train.precision=bf16+train.optim=adafactor",
                                                  "train.precision=fp32+train.optim=adamw_torch"]
    with pytest.raises(ConfigError, match="equal length"):
        exp(combine="list", axes={"train.precision": ["bf16", "fp32"], "train.optim": ["adafactor"]})


def test_repeats_give_one_variant_per_seed() -> None:
    e = exp(repeats=2, axes={"train.optim": ["adafactor"]})
    assert [(v.variant_id, v.seed) for v in e.variants] == [("base@seed0", 0), ("train.optim=adafactor@seed0", 0),
                                                            ("base@seed1", 1), ("train.optim=adafactor@seed1", 1)]


def test_hash_changes_with_the_job_only() -> None:
    a, b = exp(), exp()
    assert [v.config_hash for v in a.variants] == [v.config_hash for v in b.variants]
    assert len({v.config_hash for v in a.variants}) == len(a.variants)
    changed = exp(axes={"train.precision": ["bf16", "fp16"], "train.optim": ["adafactor"],
                        "batch": [{"label": "bs32", "set": {"train.per_device_train_batch_size": 32,
                                                            "train.max_steps": 3}}]})
    same = [x.config_hash == y.config_hash for x, y in zip(a.variants, changed.variants, strict=True)]
    assert same == [True, True, True, True, False]  # only the changed variant re-runs
    # a default written out hashes the same as the default left out
    explicit = copy.deepcopy(BASE)
    explicit["train"]["optim"] = "adamw_torch"
    assert experiment_from_dict(explicit).variants[0].config_hash == a.variants[0].config_hash


@pytest.mark.parametrize(("change", "field", "rule"), [
    ({"modle": {}}, "modle", "did you mean model"),
    ({"train": {"learning_rat": 0.1}}, "train.learning_rat", "did you mean learning_rate"),
    ({"train": {"fp16": True}}, "train.fp16", "set by the experiment"),
    ({"axes": {"train.precision": []}}, "axes.train.precision", "is empty"),
    ({"axes": {"train.nope": [1]}}, "train.nope", "unknown training argument"),
    ({"axes": {"model.widht": [3]}}, "model.widht", "unknown key"),
    ({"axes": {"nothing": [1]}}, "axes.nothing", "dotted field"),
    ({"axes": {"train.precision": ["fp8"]}}, "train.precision", "must be one of fp32, bf16, fp16"),
    ({"model": {"arch": "t5", "init": "pretrained"}}, "model.path", "nothing is downloaded"),
    ({"data": {"padding": "longest"}}, "data.padding", "fixed shapes"),
    ({"combine": "random"}, "combine", "must be one of"),
    # issue 24: refused when the file is read, not at run time or never
    ({"train": {"optim": "foo"}}, "train.optim", "unknown optimizer"),
    ({"model": {"arch": "t5", "config": {"d_modle": 64}}}, "model.config.d_modle", "did you mean d_model"),
    ({"data": {"train_size": 1e12}}, "data.train_size", "must be in [1, 1,000,000] examples"),
    ({"data": {"max_source_tokens": 10**9}}, "data.max_source_tokens", "must be in [1, 65,536] tokens"),
])
def test_bad_input_is_one_config_error_naming_the_field(change: dict[str, Any], field: str, rule: str) -> None:
    with pytest.raises(ConfigError) as e:
        exp(**change)
    assert field in str(e.value) and rule in str(e.value)
    assert "\n" not in str(e.value)
