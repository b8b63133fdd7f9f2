"""One Hugging Face model family as one record: how its ``config.json`` becomes a TransformerSpec, how a config
without ``model_type`` is recognised, whether its attention is rotary, and, for a family that ``greentrain
experiment`` fine-tunes, what the experiment builds it from.

The records sit beside their readers (model/hf_llama.py, hf_gpt.py, hf_encdec.py, hf_moe.py, hf_ssm.py); the
registry (model/families.py) collects them, and every list of families the planner and the experiment read is
derived from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from greentrain.model.finetune import LORA_TARGETS
from greentrain.model.hf_reader import ConfigReader

# A family's reader: the keys of its ``*Config`` class -> TransformerSpec fields (name, family and source are
# added by model/hf.py's spec_from_hf_config).
Reader = Callable[[ConfigReader], dict[str, Any]]

# summarization: an encoder-decoder fine-tuned with Seq2SeqTrainer (ROUGE); causal-lm: a decoder-only model
# (Trainer, loss and perplexity) trained on each source and its target joined.
FINETUNE_TASKS = ("summarization", "causal-lm")
# The special token a sequence-to-sequence decoder starts from (``decoder_start_token_id``), by role: the
# experiment's word-level tokenizer has <pad>, </s> and <unk> (experiment/lengths.py gives their ids).
DECODER_START_TOKENS = ("pad", "eos")

# Keys every transformers config accepts (PretrainedConfig.to_dict of transformers 5.24), whatever the family.
COMMON_CONFIG_KEYS = frozenset({
    "_name_or_path", "architectures", "chunk_size_feed_forward", "dtype", "id2label", "is_encoder_decoder",
    "label2id", "model_type", "output_attentions", "output_hidden_states", "problem_type", "return_dict",
    "transformers_version",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class FineTuning:
    """What ``greentrain experiment`` needs of a family it builds with transformers and fine-tunes.

    ``defaults``: the fields the planner reads, at the installed transformers config class's defaults (the
    experiment predicts from them before the worker builds the model; tests/unit/experiment compares them with
    the installed classes). ``config_keys``: the keys the family's config class accepts beyond
    COMMON_CONFIG_KEYS (``to_dict()`` plus ``attribute_map``, copied so that reading an experiment file does not
    import transformers, 5-15 s), checked when a file is read. ``lora_modules``: the planner's LoRA target names
    (model/finetune.py) -> the family's module names; empty when adapters are not built, ``no_lora_reason`` then
    says why.
    """

    task: str
    defaults: Mapping[str, Any]
    config_keys: frozenset[str]
    decoder_start: str = "pad"
    lora_modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    no_lora_reason: str = ""

    def __post_init__(self) -> None:
        if self.task not in FINETUNE_TASKS:
            raise ValueError(f"FineTuning.task={self.task!r}: must be one of {', '.join(FINETUNE_TASKS)}")
        if self.decoder_start not in DECODER_START_TOKENS:
            raise ValueError(f"FineTuning.decoder_start={self.decoder_start!r}: must be one of "
                             f"{', '.join(DECODER_START_TOKENS)}")
        unknown = sorted(set(self.lora_modules) - set(LORA_TARGETS))
        if unknown:
            raise ValueError(f"FineTuning.lora_modules: {unknown} are not LoRA targets ({', '.join(LORA_TARGETS)})")
        if "model_type" in self.defaults:
            raise ValueError("FineTuning.defaults: model_type is the family's own (ModelFamily.model_type)")
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))
        object.__setattr__(self, "lora_modules", MappingProxyType(dict(self.lora_modules)))

    @property
    def lora_targets(self) -> tuple[str, ...]:
        """The LoRA targets the family's adapters can sit on, in model/finetune.py's order."""
        return tuple(t for t in LORA_TARGETS if t in self.lora_modules)

    @property
    def accepted_config_keys(self) -> frozenset[str]:
        return COMMON_CONFIG_KEYS | self.config_keys


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFamily:
    """One Hugging Face ``model_type``: everything greentrain knows of it, in one place.

    ``arch_prefixes``: class-name prefixes of ``architectures`` that name the family in a config.json without
    ``model_type`` (the longest matching prefix of any family wins). ``rotary``: its attention rotates q and k
    (its modeling_*.py apply_rotary_pos_emb); other families are rotary only when their config names a rotary
    key. ``finetuning``: None when ``greentrain experiment`` does not build the family.
    """

    model_type: str
    reader: Reader
    arch_prefixes: tuple[str, ...] = ()
    rotary: bool = False
    finetuning: FineTuning | None = None

    def __post_init__(self) -> None:
        if not self.model_type or self.model_type != self.model_type.lower():
            raise ValueError(f"ModelFamily.model_type={self.model_type!r}: must be a lower-case transformers "
                             "model_type")
        if not isinstance(self.arch_prefixes, tuple) or not all(isinstance(p, str) and p
                                                                for p in self.arch_prefixes):
            raise ValueError(f"ModelFamily.arch_prefixes={self.arch_prefixes!r}: must be a tuple of class-name "
                             "prefixes")
