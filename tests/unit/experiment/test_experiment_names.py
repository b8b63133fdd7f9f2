"""Issue 24: an experiment file's optimizer and model config keys are checked when it is read, against lists
copied from transformers (experiment/hf_names.py); these tests keep the copies a superset of the installed
transformers' names, so that nothing transformers accepts is refused."""

from __future__ import annotations

import pytest

from greentrain.experiment.hf_names import CONFIG_KEYS, OPTIM_NAMES

transformers = pytest.importorskip("transformers")


def test_every_transformers_optimizer_name_is_accepted() -> None:
    from transformers.training_args import OptimizerNames

    assert {o.value for o in OptimizerNames} <= set(OPTIM_NAMES)


@pytest.mark.parametrize("arch", sorted(CONFIG_KEYS))
def test_every_config_key_of_the_architecture_is_accepted(arch: str) -> None:
    config = transformers.AutoConfig.for_model(arch)
    assert set(config.to_dict()) | set(config.attribute_map) <= CONFIG_KEYS[arch]
