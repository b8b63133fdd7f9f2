"""Optimizer state dtype and the master copy (issue 14: bf16 optimizer state without an fp32 master, the
seed-002 system's 8 bytes per parameter with bf16 weights and gradients)."""

from __future__ import annotations

import dataclasses

import pytest

from greentrain.errors import ConfigError
from greentrain.estimate.state_dtypes import optimizer_bytes_per_param
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict
from greentrain.workload import Workload


def test_bytes_per_parameter() -> None:
    assert optimizer_bytes_per_param("adamw", "bf16") == 12.0  # ZeRO §3.1: K = 12
    assert optimizer_bytes_per_param("adamw", "bf16", 2.0, master=False) == 4.0
    assert optimizer_bytes_per_param("adamw", "bf16", 2.0) == 8.0
    assert optimizer_bytes_per_param("adamw", "fp32", 4.0, master=True) == 8.0  # fp32 training: no master
    assert optimizer_bytes_per_param("sgd", "bf16", 2.0, master=False) == 2.0


def test_seed002_state_is_8_bytes_per_parameter() -> None:
    """bf16 weights (2) + bf16 gradients (2) + bf16 Adam moments (4), no master: 8 bytes per parameter."""
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 1},
                             "workload": {"global_batch_size": 1, "seq_len": 1024, "num_steps": 1,
                                          "grad_dtype": "bf16", "optimizer_dtype": "bf16",
                                          "master_weights": False}})
    mem = estimate_step(sc, Strategy(), check_fit=False).memory
    state = mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes
    assert state == pytest.approx(8.0 * sc.model.num_params(), rel=1e-9)
    full = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, optimizer_dtype="fp32",
                                                                master_weights=True, grad_dtype="fp32"))
    mem = estimate_step(full, Strategy(), check_fit=False).memory
    assert mem.weights_bytes + mem.gradients_bytes + mem.optimizer_bytes == pytest.approx(
        18.0 * sc.model.num_params(), rel=1e-9)  # Korthikanti Fig. 1: 18 bytes per parameter


def test_fields_round_trip_and_refuse_bad_values() -> None:
    w = Workload(global_batch_size=8, seq_len=128, optimizer_dtype="bf16", master_weights=False)
    assert Workload.from_dict(w.to_dict()) == w
    with pytest.raises(ConfigError) as e:
        Workload.from_dict({"global_batch_size": 8, "seq_len": 128, "optimizer_dtype": "int8"})
    assert e.value.field == "workload.optimizer_dtype"
    with pytest.raises(ConfigError) as e:
        Workload.from_dict({"global_batch_size": 8, "seq_len": 128, "master_weights": "maybe"})
    assert e.value.field == "workload.master_weights"
