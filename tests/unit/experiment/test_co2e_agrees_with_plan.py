"""The experiment's predicted CO2e and a plan of the same scenario agree: both count the chip's embodied carbon
(footprint.model.embodied_kg_co2e), and a plan's footprint says its power is predicted, not measured."""

from __future__ import annotations

import pytest

from greentrain.estimate.run import estimate_run
from greentrain.experiment.job import Job, parse_job
from greentrain.experiment.predict import _scenario, hf_config, predict, vocab_size
from greentrain.parallel.strategy import Strategy

TINY_T5 = {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4}


def _job(region: str) -> Job:
    return parse_job({"model": {"arch": "t5", "config": TINY_T5},
                      "data": {"train_size": 64, "eval_size": 8, "test_size": 8, "max_source_tokens": 24,
                               "max_target_tokens": 8},
                      "train": {"per_device_train_batch_size": 4, "max_steps": 300},
                      "site": {"chip": "h100-sxm", "region": region}})


@pytest.mark.parametrize("region", ["us-east-1", "FRA"])
def test_experiment_and_plan_co2e_agree(region: str) -> None:
    job = _job(region)
    predicted = predict(job)
    sc = _scenario(job, hf_config(job, vocab_size(job)), "h100-sxm")
    plan = estimate_run(sc, Strategy(micro_batch_size=4)).footprint
    assert plan.embodied_kg_co2e > 0  # the H100's embodied carbon over the run
    assert predicted.kg_co2e == pytest.approx(plan.emissions_kg_co2e, rel=1e-9)
    assert not plan.power_measured  # the plan's power is the chip's modelled power, not a meter's
