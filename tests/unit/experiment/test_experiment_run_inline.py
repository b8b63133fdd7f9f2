"""A real tiny experiment, run inline: files, phase sums, ROUGE floor and exactness, FLOPs, fp16 not applicable,
evaluation inside training kept out of the training figures, determinism."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("rouge_score")

from rouge_score import rouge_scorer

from greentrain.cli.main import main
from greentrain.experiment.report import build_report, load_results
from greentrain.experiment.results import PHASES, VariantResult
from greentrain.experiment.runner import RunOptions, run_experiment, variant_dir
from greentrain.experiment.spec import experiment_from_dict

pytestmark = pytest.mark.slow

BASE_STEPS = 30


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, make_experiment: Any) -> Path:
    root = tmp_path_factory.mktemp("exp")
    exp_file = make_experiment(root / "tiny.yaml", **dict(
        data={"train_size": 1024, "eval_size": 32, "test_size": 64},
        # 30 steps: ROUGE-1 36.0 on this CPU (41.4 after 80 steps, 0.0 untrained), a third of the training time
        train={"max_steps": BASE_STEPS, "per_device_train_batch_size": 16, "learning_rate": 3.0e-3},
        axes={"train.precision": ["fp16"],
              "short": [{"label": "adafactor10", "set": {"train.optim": "adafactor", "train.max_steps": 10}}],
              "es": [{"label": "es", "set": {"train.max_steps": 15, "early_stopping": {"eval_steps": 5,
                                                                                      "patience": 5}}}]}))
    out = root / "out"
    rc = main(["experiment", "run", str(exp_file), "--out", str(out), "--isolation", "inline"])
    assert rc == 0
    return out


def results(run_dir: Path) -> dict[str, VariantResult]:
    return {r.variant_id: r for r in load_results(run_dir)[1]}


def test_every_file_is_written(run_dir: Path) -> None:
    for name in ("results.csv", "results.json", "emissions.csv", "predictions.csv", "report.md", "experiment.json",
                 "pareto.png", "cost_vs_co2.png", "prediction_error.png"):
        assert (run_dir / name).is_file(), name
    with (run_dir / "results.csv").open() as f:
        header = next(csv.reader(f))
    assert len(header) >= 30
    with (run_dir / "emissions.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * len(PHASES)  # ok variants x phases, each once
    data = json.loads((run_dir / "results.json").read_text())
    assert [v["variant_id"] for v in data["variants"]] == ["base", "train.precision=fp16", "adafactor10", "es"]


def test_fp16_on_cpu_is_not_applicable_never_run_as_fp32(run_dir: Path) -> None:
    r = results(run_dir)["train.precision=fp16"]
    assert r.status == "not_applicable" and "fp16" in r.reason and r.num_steps == 0
    assert not (variant_dir(run_dir, r.variant_id) / "train.jsonl").exists()


def test_phases_sum_to_the_total(run_dir: Path) -> None:
    for r in results(run_dir).values():
        if r.status != "ok":
            continue
        assert sum(getattr(r, f"{p}_energy_j") for p in PHASES) == pytest.approx(r.energy_j, abs=1e-9)
        assert sum(getattr(r, f"{p}_s") for p in PHASES) == pytest.approx(r.wall_s, abs=1e-9)
        assert min(r.train_energy_j, r.eval_energy_j, r.predict_energy_j) > 0
        assert r.facility_energy_j == pytest.approx(1.2 * r.energy_j)
        assert r.emissions_kg_co2e == pytest.approx(r.facility_energy_j / 3.6e6 * 297.6 / 1e3)
        assert r.cost_usd == pytest.approx(22.032 * r.wall_s / 3600)


def test_flops_and_tokens_match_the_prediction(run_dir: Path) -> None:
    base = results(run_dir)["base"]
    assert base.num_steps == BASE_STEPS and base.tokens_source == BASE_STEPS * 16 * 64
    assert base.tokens_target == BASE_STEPS * 16 * 16
    assert base.flop_per_step == pytest.approx(base.predicted_flop_per_step, rel=0.01)
    assert base.predicted_tokens_per_step == 16 * (64 + 16)
    assert base.hf_total_flos > base.flop  # the Trainer's 6 N D overstates seq2seq FLOPs (design §3.6)


def test_evaluation_inside_training_adds_no_training_flops(run_dir: Path) -> None:
    r = results(run_dir)
    es, base = r["es"], r["base"]
    assert (variant_dir(run_dir, "es") / "eval_in_train_0.jsonl").is_file()
    assert len(list(variant_dir(run_dir, "es").glob("eval_in_train_*.jsonl"))) == 3  # steps 5, 10 and 15
    assert es.flop_per_step == base.flop_per_step  # 0 % added by the 3 evaluations
    assert es.eval_s > 0 and es.num_steps == 15


def test_rouge_floor_and_exactness(run_dir: Path) -> None:
    base = results(run_dir)["base"]
    assert base.rouge1 is not None and base.rouge1 >= 25.0
    lines = (variant_dir(run_dir, "base") / "predictions.jsonl").read_text().splitlines()
    pairs = [json.loads(x) for x in lines]
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    direct = sum(100 * scorer.score(p["reference"], p["prediction"])["rouge1"].fmeasure for p in pairs) / len(pairs)
    assert base.rouge1 == pytest.approx(direct, abs=1e-12)


def test_rouge_is_20_points_above_the_untrained_model(run_dir: Path, make_experiment: Any) -> None:
    from greentrain.experiment.build import build_model, build_tokenizer, generate
    from greentrain.experiment.data import load_splits
    from greentrain.experiment.quality import rouge

    exp = experiment_from_dict(make_experiment(data={"train_size": 1024, "eval_size": 32, "test_size": 64}))
    job = exp.variants[0].job
    d = job.data
    train, _, test = load_splits(d.source, d.path, d.source_column, d.target_column,
                                 (d.train_size, d.eval_size, d.test_size), 0)
    tok = build_tokenizer(job, train)
    untrained = rouge(generate(build_model(job, len(tok)), tok, test.sources, job), test.targets, ["rouge1"])
    assert (results(run_dir)["base"].rouge1 or 0.0) >= untrained["rouge1"].mean + 20.0


def test_same_seed_on_cpu_fp32_gives_the_same_result(tmp_path: Path, make_experiment: Any) -> None:
    exp = experiment_from_dict(make_experiment(  # the smallest T5: the seeds' path, not the model, is checked
        model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}},
        train={"max_steps": 6, "per_device_train_batch_size": 8},
        data={"train_size": 128, "eval_size": 16, "test_size": 16, "max_source_tokens": 32, "max_target_tokens": 8}))
    got: list[Any] = []
    for k in range(2):
        (r,) = run_experiment(exp, RunOptions(out_dir=tmp_path / str(k), isolation="inline"))
        got.append((r.rouge1, r.rouge2, r.eval_loss, r.flop))
    assert got[0] == got[1]


def test_status_and_report_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "status", str(run_dir)]) == 0
    assert "not_applicable" in capsys.readouterr().out
    assert main(["experiment", "report", str(run_dir), "--json", "--reprice", "eastus", "FRA"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["variants"]) == 4 and {x["region"] for x in data["repriced"]} == {"eastus", "FRA"}
    assert all("energy_j" in v and "emissions_kg_co2e" in v and "cost_usd" in v for v in data["variants"])
    rep = build_report(run_dir, ["FRA"])
    assert any(f.kind == "F1" for f in rep.findings) and rep.pareto


def test_early_stopping_stops_and_keeps_evaluation_out_of_training(tmp_path: Path, make_experiment: Any) -> None:
    exp = experiment_from_dict(make_experiment(
        model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}},
        data={"train_size": 256, "eval_size": 32, "test_size": 16, "max_source_tokens": 32, "max_target_tokens": 16},
        train={"max_steps": 200, "per_device_train_batch_size": 8, "learning_rate": 0.05},
        early_stopping={"eval_steps": 5, "patience": 1}))
    (r,) = run_experiment(exp, RunOptions(out_dir=tmp_path, isolation="inline"))
    assert r.status == "ok" and r.early_stopped_at_step == r.num_steps < 200 and r.num_steps % 5 == 0
    assert r.flop_per_step == r.predicted_flop_per_step  # the evaluations added no FLOPs to the training steps
    evals = sorted(tmp_path.glob("variants/base/eval_in_train_*.jsonl"))
    assert len(evals) == r.num_steps // 5
    rep = build_report(tmp_path, [])
    assert any(f.kind == "F5" and f.numbers == (("stopped_at_step", float(r.num_steps)),) for f in rep.findings)


def test_a_lora_variant_runs_and_is_predicted(tmp_path: Path, make_experiment: Any) -> None:
    exp = experiment_from_dict(make_experiment(
        model={"arch": "t5", "config": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 1, "num_heads": 4}},
        data={"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24, "max_target_tokens": 8},
        train={"max_steps": 5, "per_device_train_batch_size": 8},
        axes={"lora": [{"label": "lora4", "set": {"model.lora": {"rank": 4, "targets": ["q", "k", "v", "o"]}}}]}))
    base, lora = run_experiment(exp, RunOptions(out_dir=tmp_path, isolation="inline"))
    assert lora.status == "ok" and lora.variant_id == "lora4"
    assert lora.params > base.params and 0 < lora.trainable_params < base.trainable_params / 5
    assert lora.flop_per_step == pytest.approx(lora.predicted_flop_per_step, rel=0.01)
    assert lora.flop_per_step < base.flop_per_step
