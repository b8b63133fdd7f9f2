"""ROUGE through rouge-score: the wrapper equals the package called directly; identical 100, disjoint 0."""

from __future__ import annotations

import pytest

pytest.importorskip("rouge_score")
from rouge_score import rouge_scorer

from greentrain.experiment.data import synthetic_news
from greentrain.experiment.quality import per_example_f1, rouge, split_sentences

METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def test_wrapper_equals_rouge_score_called_directly() -> None:
    pairs = synthetic_news(40, 3)
    preds = [s.split(" . ")[0] + " ." for s in pairs.sources]  # lead sentence: partly right
    got = rouge(preds, list(pairs.targets), METRICS)
    scorer = rouge_scorer.RougeScorer(list(METRICS), use_stemmer=True)
    for m in METRICS:
        direct = [100 * scorer.score(split_sentences(t), split_sentences(p))[m].fmeasure
                  for t, p in zip(pairs.targets, preds, strict=True)]
        assert got[m].mean == pytest.approx(sum(direct) / len(direct), abs=1e-12)
        assert got[m].low <= got[m].mean <= got[m].high


def test_identical_is_100_and_disjoint_is_0() -> None:
    refs = ["anna opened the museum in oslo on monday .", "wen sold a bakery . it was sunny ."]
    same = rouge(refs, refs, METRICS)
    assert all(same[m].mean == pytest.approx(100.0) for m in METRICS)
    other = rouge(["zzz yyy", "qqq"], refs, METRICS)
    assert all(other[m].mean == 0.0 for m in METRICS)


def test_lsum_splits_sentences_without_nltk() -> None:
    assert split_sentences("one two. three four! five?  six") == "one two.\nthree four!\nfive?\nsix"
    f1 = per_example_f1(["c d. a b."], ["a b. c d."], ["rougeL", "rougeLsum"])
    assert f1["rougeLsum"][0] > f1["rougeL"][0]  # summary-level LCS matches per sentence


def test_bootstrap_is_seeded() -> None:
    pairs = synthetic_news(30, 1)
    preds = [s[:30] for s in pairs.sources]
    a = rouge(preds, list(pairs.targets), ["rouge1"], seed=5)["rouge1"]
    b = rouge(preds, list(pairs.targets), ["rouge1"], seed=5)["rouge1"]
    assert (a.low, a.high) == (b.low, b.high)
