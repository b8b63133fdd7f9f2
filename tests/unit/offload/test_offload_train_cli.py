"""`greentrain offload train`: the seed's argument order, JSON, and checks before any tensor."""

from __future__ import annotations

import json

import pytest

from greentrain.cli.main import main


def test_train_tiny_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offload", "train", "1", "0.004", "64", "tiny", "--steps", "2", "--micro-batches", "1",
                 "--device", "cpu", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["model"] == "tiny-llama" and len(r["losses"]) == 2 and r["tokens_per_s"] > 0
    assert r["device_peak_gib"] <= 0.004
    assert r["device_peak_gib"] == pytest.approx(r["predicted"]["device_gib"], rel=0.15)
    # per step, for a GPU session to split the step: the optimizer phase is part of each step
    assert len(r["step_times_s"]) == len(r["optimizer_times_s"]) == 2
    assert all(0 < o < s for o, s in zip(r["optimizer_times_s"], r["step_times_s"], strict=True))
    assert r["step_d2h_gb"][1] > 0 and sum(r["step_d2h_gb"]) == pytest.approx(r["d2h_gb"])
    p = r["predicted"]
    assert p["num_rounds"] == 1 and p["host_threads"] >= 1 and p["host_copy_time_s"] > 0
    assert p["step_time_s"] > p["optimizer_time_s"] > 0


@pytest.mark.parametrize("argv,message", [
    (["1", "0.0001", "64", "tiny"], "minimum device"),
    (["0", "1", "64", "tiny"], "offload.host_gib=0.0"),
    (["1", "1", "64"], "four values"),
    (["--host-gib", "1", "--device-gib", "1", "--seq-len", "64"], "offload.model=None"),
    (["1", "1", "64", "tiny", "--framework", "ml_dataflow"], "predicts only"),
    (["1", "1", "64", "tiny", "--device", "tpu"], "offload.device"),
])
def test_train_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offload", "train", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
