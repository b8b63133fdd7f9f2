"""Names transformers accepts in an experiment file, checked when the file is read (issue 24: ``train.optim: foo``
failed only at run time, ``model.config: {d_modle: 64}`` was silently ignored).

Copied from transformers 5.24 so that reading a file does not import it (its import takes 5-15 s):
``OptimizerNames`` (transformers/training_args.py) here and, per architecture, ``AutoConfig.for_model(arch).to_dict()``
plus the config class's ``attribute_map`` in each model family's record (model/family.py ``FineTuning``); a few keys of
transformers 4.x configs are kept so that older files still read. tests/unit/experiment/test_experiment_names.py
keeps these lists a superset of the installed transformers'.
"""

from __future__ import annotations

from greentrain.model.families import FamilyView

OPTIM_NAMES = (
    "adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused", "adafactor",
    "adamw_anyprecision", "adamw_torch_4bit", "adamw_torch_8bit", "ademamix", "sgd", "adagrad", "adamw_bnb_8bit",
    "adamw_8bit", "ademamix_8bit", "lion_8bit", "lion_32bit", "paged_adamw_32bit", "paged_adamw_8bit",
    "paged_ademamix_32bit", "paged_ademamix_8bit", "paged_lion_32bit", "paged_lion_8bit", "rmsprop", "rmsprop_bnb",
    "rmsprop_bnb_8bit", "rmsprop_bnb_32bit", "galore_adamw", "galore_adamw_8bit", "galore_adafactor",
    "galore_adamw_layerwise", "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise", "lomo", "adalomo",
    "grokadamw", "schedule_free_radam", "schedule_free_adamw", "schedule_free_sgd", "apollo_adamw",
    "apollo_adamw_layerwise", "stable_adamw",
)

# arch -> every config key its family's transformers config class accepts: the family's record (model/families.py,
# FineTuning.accepted_config_keys), read when an experiment file is read (experiment/job.py).
CONFIG_KEYS: FamilyView[frozenset[str]] = FamilyView(
    lambda f: None if f.finetuning is None else f.finetuning.accepted_config_keys)
