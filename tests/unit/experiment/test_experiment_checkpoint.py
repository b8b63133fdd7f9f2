"""A local pretrained checkpoint folder (model and tokenizer, nothing downloaded) fine-tunes as a variant, for both
tasks, with the planner's FLOPs equal to the counted ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from greentrain.experiment.build import build_model, build_tokenizer
from greentrain.experiment.data import load_splits
from greentrain.experiment.runner import RunOptions, run_experiment
from greentrain.experiment.spec import experiment_from_dict

DATA = {"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24, "max_target_tokens": 8}
TRAIN = {"max_steps": 3, "per_device_train_batch_size": 8}
MODELS = {"summarization": {"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1,
                                                     "num_heads": 4}},
          "causal-lm": {"arch": "llama", "config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                                                    "num_attention_heads": 4, "max_position_embeddings": 64}}}


@pytest.mark.parametrize("task", ["summarization", "causal-lm"])
def test_a_local_checkpoint_is_fine_tuned(task: str, tmp_path: Path, make_experiment: Any) -> None:
    job = experiment_from_dict(make_experiment(task=task, model=MODELS[task], data=DATA, train=TRAIN)).base
    d = job.data
    train, *_ = load_splits(d.source, d.path, d.source_column, d.target_column,
                            (d.train_size, d.eval_size, d.test_size), 0)
    tok = build_tokenizer(job, train)
    model = build_model(job, len(tok))
    folder = tmp_path / "checkpoint"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    exp = experiment_from_dict(make_experiment(task=task, data=DATA, train=TRAIN,
                                               model={"arch": MODELS[task]["arch"], "init": "pretrained",
                                                      "path": str(folder)}))
    (r,) = run_experiment(exp, RunOptions(out_dir=tmp_path / "out", isolation="inline"))
    assert r.status == "ok" and r.num_steps == 3
    assert r.params == sum(p.numel() for p in model.parameters())
    assert r.flop_per_step == pytest.approx(r.predicted_flop_per_step, rel=0.01)
    assert (r.rouge1 if task == "summarization" else r.perplexity) is not None
