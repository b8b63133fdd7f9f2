"""Token lengths before training (no torch): the word-level tokenizer recipe, and the length distribution of a
variant's examples against its max lengths, for ``experiment plan`` (before any compute is spent) and the worker
(recorded in the result, finding F13). The seed: "check sequence length distribution of source and target tokens"
before choosing where to truncate.

Lengths are counted with the tokenizer the run uses, uncut, special tokens included (the end token the
post-processor appends): the word-level tokenizer trained on the training split, or the ``tokenizer.json`` of a
local tokenizer or checkpoint folder. ``tokenizers`` (the experiment extra) does the counting; without it, or for
a folder without ``tokenizer.json`` (a slow tokenizer), ``plan`` leaves the figures out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from greentrain.experiment.data import LengthStats, TextPairs, length_stats, load_splits
from greentrain.experiment.job import Job
from greentrain.experiment.predict import SPECIAL_TOKENS

PAD_ID, EOS_ID, UNK_ID = 0, 1, 2  # the order of predict.SPECIAL_TOKENS
CAUSAL = "causal-lm"


def wordlevel_tokenizer(train: TextPairs) -> Any:
    """A ``tokenizers.Tokenizer``: whitespace words of the training split + the specials, EOS appended."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token=SPECIAL_TOKENS[UNK_ID]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([*train.sources, *train.targets],
                            trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS)))
    eos = SPECIAL_TOKENS[EOS_ID]
    tok.post_processor = processors.TemplateProcessing(single=f"$A {eos}", special_tokens=[(eos, EOS_ID)])
    return tok


def example_lengths(tok: Any, splits: tuple[TextPairs, ...], job: Job) -> tuple[LengthStats, LengthStats | None]:
    """Length statistics of every example (train + eval + test) with ``tok`` (a ``tokenizers.Tokenizer``):
    sources and targets against max_source_tokens and max_target_tokens; a causal LM: each source and its target
    joined (the worker's training text) against their sum, and no target side."""
    tok.no_truncation()
    tok.no_padding()
    sources = [s for p in splits for s in p.sources]
    targets = [t for p in splits for t in p.targets]
    d = job.data

    def lengths(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tok.encode_batch(texts)]

    if job.task == CAUSAL:
        joined = [f"{s} {t}" for s, t in zip(sources, targets, strict=True)]
        return length_stats(lengths(joined), d.max_source_tokens + d.max_target_tokens), None
    return length_stats(lengths(sources), d.max_source_tokens), length_stats(lengths(targets), d.max_target_tokens)


def planned_lengths(job: Job) -> tuple[LengthStats, LengthStats | None] | None:
    """The lengths a run of ``job`` will see, before it runs; None when they cannot be counted here."""
    from greentrain.experiment.extras import missing_modules

    if missing_modules(("tokenizers",)):
        return None
    d = job.data
    splits = load_splits(d.source, d.path, d.source_column, d.target_column, (d.train_size, d.eval_size,
                                                                              d.test_size), 0)
    if job.tokenizer_kind == "path" or job.model.init == "pretrained":
        path = Path(job.tokenizer_path or job.model.path)
        file = path if path.is_file() else path / "tokenizer.json"
        if not file.is_file():
            return None
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(file))
    else:
        tok = wordlevel_tokenizer(splits[0])
    return example_lengths(tok, splits, job)
