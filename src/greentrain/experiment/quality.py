"""Summary quality: ROUGE through Google's ``rouge-score`` (the package the seed and HF ``evaluate`` wrap).

Scores are the mean per-example F1 x 100, with ``RougeScorer(use_stemmer=True)`` as the seed computed them.
ROUGE-Lsum wants one sentence per line; ``nltk.sent_tokenize`` needs the ``punkt_tab`` download (offline: no),
so a regex splits sentences at ., ! or ? followed by white space. The 95 % interval is a seeded bootstrap over
examples (rouge-score's own BootstrapAggregator draws from numpy's global generator).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from greentrain.errors import ConfigError

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
BOOTSTRAP_SAMPLES = 1000


def split_sentences(text: str) -> str:
    """One sentence per line (for ROUGE-Lsum)."""
    return "\n".join(s for s in _SENTENCE_END.split(text.strip()) if s)


@dataclass(frozen=True, slots=True, kw_only=True)
class RougeScore:
    metric: str
    mean: float  # mean per-example F1 x 100
    low: float  # 95 % bootstrap interval of the mean
    high: float


def _scorer(metrics: Sequence[str]) -> object:
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise ConfigError("eval.metrics", list(metrics), "ROUGE needs rouge-score: "
                          "pip install 'greentrain[experiment]'") from None
    return rouge_scorer.RougeScorer(list(metrics), use_stemmer=True)


def per_example_f1(predictions: Sequence[str], references: Sequence[str],
                   metrics: Sequence[str]) -> dict[str, list[float]]:
    """F1 x 100 of each (prediction, reference) pair, per metric."""
    assert len(predictions) == len(references)
    scorer = _scorer(metrics)
    out: dict[str, list[float]] = {m: [] for m in metrics}
    for pred, ref in zip(predictions, references, strict=True):
        if "rougeLsum" in metrics:
            pred, ref = split_sentences(pred), split_sentences(ref)
        scores = scorer.score(ref, pred)  # type: ignore[attr-defined]  # score(target, prediction)
        for m in metrics:
            out[m].append(100.0 * scores[m].fmeasure)
    return out


def rouge(predictions: Sequence[str], references: Sequence[str], metrics: Sequence[str],
          seed: int = 0) -> dict[str, RougeScore]:
    """Mean ROUGE F1 x 100 per metric with a seeded 95 % bootstrap interval."""
    if not predictions:
        return {m: RougeScore(metric=m, mean=0.0, low=0.0, high=0.0) for m in metrics}
    f1 = per_example_f1(predictions, references, metrics)
    rng = np.random.default_rng(seed)
    n = len(predictions)
    idx = rng.integers(0, n, size=(BOOTSTRAP_SAMPLES, n))
    out = {}
    for m, values in f1.items():
        arr = np.asarray(values)
        means = arr[idx].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        out[m] = RougeScore(metric=m, mean=float(arr.mean()), low=float(low), high=float(high))
    return out
