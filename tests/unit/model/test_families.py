"""The model-family registry (model/families.py): every record's claims that can be checked without a network,
for every registered family, so that a new record is checked the moment it is added."""

from __future__ import annotations

import pytest

from greentrain.model import families
from greentrain.model.family import ModelFamily


@pytest.mark.parametrize("family", families.FAMILIES.values(), ids=lambda f: f.model_type)
def test_each_architectures_prefix_names_its_own_family(family: ModelFamily) -> None:
    """The longest prefix wins, so a class named exactly as a prefix resolves to that prefix's family (a shorter
    prefix of another family, Gemma3 under Gemma3ForConditional, does not steal it)."""
    for prefix in family.arch_prefixes:
        assert families.model_type_of_architecture(prefix) == family.model_type


@pytest.mark.parametrize("family", families.finetunable(), ids=lambda f: f.model_type)
def test_finetuning_defaults_are_the_installed_config_class_defaults(family: ModelFamily) -> None:
    transformers = pytest.importorskip("transformers")
    assert family.finetuning is not None
    installed = transformers.AutoConfig.for_model(family.model_type).to_dict()
    assert {k: installed.get(k) for k in family.finetuning.defaults} == dict(family.finetuning.defaults)
    assert set(family.finetuning.defaults) <= family.finetuning.accepted_config_keys


def test_every_task_has_a_family_and_the_order_is_the_registration_order() -> None:
    assert [f.model_type for f in families.finetunable("summarization")] == ["t5", "bart", "pegasus"]
    assert [f.model_type for f in families.finetunable("causal-lm")] == ["llama", "gpt2"]
    with pytest.raises(KeyError):
        families.finetuning("mixtral")  # read by plan, not built by experiment
