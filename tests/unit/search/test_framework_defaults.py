"""One answer per question (#24): plan, search, simulate and validate take a run's unset grad dtype from its
framework in one place (estimate/memory.py workload_grad_dtype), an explicit one always wins, the vectorised
search agrees with the single estimate, and the outputs say which dtype was used. --max-chips within --num-chips."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.efficiency import efficiency_for
from greentrain.estimate.state_dtypes import workload_grad_dtype
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict
from greentrain.search.space import SearchSpace, table
from greentrain.workload import Workload

Agree = Callable[..., int]  # conftest.scalar_equals_vector
HEADER = ("run_id,framework,model,chip,num_chips,chips_per_node,seq_len,global_batch,micro_batch,dp,tp,pp,cp,ep,"
          "zero,recompute,precision,status\n")
PLAN = ["plan", "--model", "llama3-8b", "--chip", "h100-sxm", "--num-chips", "8", "--seq-len", "4096",
        "--global-batch", "64", "--micro-batch", "1", "--dp", "8", "--tp", "1", "--pp", "1", "--cp", "1", "--ep", "1",
        "--zero", "1", "--recompute", "none", "--precision", "bf16", "--steps", "1", "--framework", "nemo", "--json"]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_plan_and_validate_give_one_memory_for_a_nemo_row(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The same NeMo run asked both ways: validate's row and plan's flags, neither setting the grad dtype."""
    runs = tmp_path / "runs.csv"
    runs.write_text(HEADER + "r1,nemo,llama3-8b,h100-sxm,8,8,4096,64,1,8,1,1,1,1,1,none,bf16,ok\n", "utf-8")
    (row,) = _json(["validate", str(runs), "--json"], capsys)["rows"]
    plan = _json(PLAN, capsys)
    assert plan["memory_bytes_per_device"]["total"] == pytest.approx(row["device_memory_gib"] * 2**30, rel=1e-12)
    assert plan["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-12)
    assert (plan["grad_dtype"], plan["grad_dtype_is_framework_default"]) == ("bf16", True)
    # an explicit --grad-dtype fp32 wins over nemo's bf16: 2 more bytes per parameter in the gradient buffer
    fp32 = _json([*PLAN, "--grad-dtype", "fp32"], capsys)
    assert (fp32["grad_dtype"], fp32["grad_dtype_is_framework_default"]) == ("fp32", False)
    grads = (plan["memory_bytes_per_device"]["gradients"], fp32["memory_bytes_per_device"]["gradients"])
    assert grads[1] == pytest.approx(2 * grads[0], rel=1e-12)
    assert fp32["memory_bytes_per_device"]["total"] > plan["memory_bytes_per_device"]["total"]


def test_plan_and_validate_give_one_memory_for_a_pure_bf16_row(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """torchtune's pure-bf16 recipe (bf16 moments, no fp32 master) reaches plan as it reaches validate; a user's
    --optimizer-dtype fp32 --master-weights gives back mixed precision's 12 bytes of optimizer state."""
    runs = tmp_path / "runs.csv"
    runs.write_text(HEADER + "r1,torchtune,llama3-8b,h100-sxm,8,8,4096,64,1,8,1,1,1,1,3,full,bf16,ok\n", "utf-8")
    (row,) = _json(["validate", str(runs), "--json"], capsys)["rows"]
    argv = [*PLAN[:-3], "--framework", "torchtune", "--json"]
    argv[argv.index("--zero") + 1], argv[argv.index("--recompute") + 1] = "3", "full"
    plan = _json(argv, capsys)
    assert plan["memory_bytes_per_device"]["total"] == pytest.approx(row["device_memory_gib"] * 2**30, rel=1e-12)
    assert plan["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-12)
    assert plan["optimizer_state"] == {"optimizer_dtype": "bf16", "master_weights": False,
                                       "is_framework_default": True}
    mixed = _json([*argv, "--optimizer-dtype", "fp32", "--master-weights"], capsys)
    assert mixed["optimizer_state"] == {"optimizer_dtype": "fp32", "master_weights": True,
                                        "is_framework_default": False}
    opt = (plan["memory_bytes_per_device"]["optimizer"], mixed["memory_bytes_per_device"]["optimizer"])
    assert opt[1] == pytest.approx(3 * opt[0], rel=1e-12)  # 4 bytes (two bf16 moments) -> 12 (fp32 ones + master)


def test_plan_prints_which_grad_dtype_it_used(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a for a in PLAN if a != "--json"]) == 0
    assert "bf16 (nemo's default; --grad-dtype to change)" in " ".join(capsys.readouterr().out.split())


@dataclasses.dataclass(frozen=True)
class _Defaults:
    grad_dtype: str
    precision_recipe: str


def _fw(grad_dtype: str, precision_recipe: str = "mixed") -> _Defaults:
    """A framework profile's two defaults (estimate/memory.py FrameworkDefaults)."""
    return _Defaults(grad_dtype, precision_recipe)


def test_the_rule_explicit_then_precision_then_pure_bf16_then_framework() -> None:
    w = Workload(global_batch_size=8, seq_len=1024)
    assert w.grad_dtype == "" and "grad_dtype" not in w.to_dict()  # unset, and a file written from it stays so
    assert [workload_grad_dtype(w, _fw(fw)) for fw in ("fp32", "bf16")] == ["fp32", "bf16"]
    assert workload_grad_dtype(dataclasses.replace(w, grad_dtype="fp32"), _fw("bf16")) == "fp32"
    assert workload_grad_dtype(dataclasses.replace(w, grad_dtype="bf16"), _fw("fp32")) == "bf16"
    assert workload_grad_dtype(dataclasses.replace(w, precision="fp32"), _fw("bf16")) == "fp32"
    pure = dataclasses.replace(w, optimizer_dtype="bf16", master_weights=False)  # 8 bytes per parameter
    assert workload_grad_dtype(pure, _fw("fp32")) == "bf16"
    assert workload_grad_dtype(w, _fw("fp32", "pure-bf16")) == "bf16"  # unset under the framework's pure bf16
    with pytest.raises(ConfigError, match=r"workload\.grad_dtype"):
        Workload.from_dict({"global_batch_size": 8, "seq_len": 1024, "grad_dtype": "fp16"})


@pytest.mark.parametrize("grad_dtype", ["", "fp32", "bf16"])
def test_the_search_agrees_with_the_single_estimate_on_every_grad_dtype(grad_dtype: str,
                                                                        scalar_equals_vector: Agree) -> None:
    sc = scenario_from_dict({"model": "qwen3-30b-a3b", "cluster": {"chip": "b200", "num_chips": 16},
                             "workload": {"global_batch_size": 32, "seq_len": 4096, "num_steps": 10,
                                          **({"grad_dtype": grad_dtype} if grad_dtype else {})}})
    eff = efficiency_for("b200", "nemo")
    rows = table(sc, SearchSpace(max_micro_batch=2))
    assert scalar_equals_vector(sc, rows, random.Random(5), 20, 20, eff) >= 5


def test_unset_takes_the_framework_default_in_the_estimate() -> None:
    """Unset under nemo is bf16 (half megatron's fp32 buffer); unset under megatron is fp32."""
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 2048, "num_steps": 1}})
    s = Strategy(dp=8, zero=1)
    grads = {(fw, g): estimate_step(dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, grad_dtype=g)),
                                    s, eff=efficiency_for("h100-sxm", fw)).memory.gradients_bytes
             for fw in ("nemo", "megatron") for g in ("", "fp32", "bf16")}
    assert grads["nemo", ""] == grads["nemo", "bf16"] == grads["megatron", "bf16"]
    assert grads["megatron", ""] == grads["megatron", "fp32"] == grads["nemo", "fp32"] == 2 * grads["nemo", ""]


SEARCH = ["search", "--model", "llama3.2-1b", "--global-batch", "16", "--seq-len", "2048", "--tokens", "1e9",
          "--max-micro-batch", "1", "--no-interleave", "--no-offload", "--top", "2"]


def test_search_says_its_grad_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json([*SEARCH, "--num-chips", "8", "--framework", "nemo", "--json"], capsys)
    assert d["grad_dtype"] == "bf16" and d["ranked"][0]["estimate"]["grad_dtype"] == "bf16"
    assert main([*SEARCH, "--num-chips", "8", "--framework", "nemo"]) == 0
    assert "bf16 gradients (nemo's default)" in capsys.readouterr().out
    assert _json([*SEARCH, "--num-chips", "8", "--framework", "nemo", "--grad-dtype", "fp32", "--json"],
                 capsys)["grad_dtype"] == "fp32"


def test_max_chips_below_num_chips_searches_within_the_cluster_and_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    d = _json([*SEARCH, "--num-chips", "64", "--max-chips", "8", "--json"], capsys)
    assert {r["num_chips"] for r in d["ranked"]} <= {1, 2, 4, 8}
    assert any("searched 1 to 8 chips" in n and "64-chip cluster" in n for n in d["notes"])


def test_max_chips_above_num_chips_is_refused_naming_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SEARCH, "--num-chips", "8", "--max-chips", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--max-chips=64" in err and "--num-chips 8" in err


def test_a_scenario_files_num_chips_is_the_cluster_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One rule whichever way the cluster's chips are given: the file's cluster.num_chips as --num-chips."""
    sc = tmp_path / "s.yaml"
    sc.write_text("model: llama3.2-1b\ncluster: {chip: h100-sxm, num_chips: 8}\n", "utf-8")
    assert main(["search", str(sc), "--max-chips", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--max-chips=64" in err and "cluster.num_chips 8" in err
    d = _json(["search", str(sc), "--max-chips", "4", "--json"], capsys)
    assert {r["num_chips"] for r in d["ranked"]} <= {1, 2, 4}
    assert any("of the 8-chip cluster" in n for n in d["notes"])
