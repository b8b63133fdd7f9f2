"""Issue 25 item 5: a new training framework is one entry under ``frameworks:`` in estimate/efficiency.yaml, for
plan, search, the catalog and, with an ``offload:`` block, `greentrain offload` (docs/extending.md).

Fake frameworks are added as one entry each (the file's data, replaced for one test); nothing else is edited.
"toytorch", a copy of the pytorch entry (greentrain's offload executor), must give pytorch's figures to the last
digit in `plan`, `search` and `offload plan`; "toytorch-slow" (half the kernel efficiency) a slower step and
"toytorch-fast" (a larger offload matmul scale) a faster offload plan; its fp8 recipe (rowwise, pytorch's
tensorwise) is what an fp8 plan of it runs; "toyflow", a copy of ml_dataflow's entry,
ml_dataflow's plan (its layout is a knob of the block, not its name); "toymoe", megatron with
nemo-deepep-a2a-overlap's MoE dispatcher knobs and no host sync, hides a Mixtral step's all-to-alls. The catalog
lists them; an unknown name, a framework without an offload block, a bad offload key and a bad MoE knob are each
refused in one line.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from greentrain.cli.main import main
from greentrain.estimate import efficiency, fp8

PLAN = ["plan", "--model", "llama3.2-1b", "--chip", "a100-80gb", "--num-chips", "8", "--json"]
OFFLOAD = ["offload", "plan", "--model", "1", "--seq-len", "4096", "--device-gib", "20", "--host-gib", "80",
           "--json"]


def _clear_caches() -> None:
    efficiency.framework_names.cache_clear()
    efficiency.efficiency_for.cache_clear()
    fp8.recipe_for.cache_clear()


@pytest.fixture
def toytorch(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    data: dict[str, Any] = copy.deepcopy(efficiency._data())
    fws = data["frameworks"]
    # its fp8 default is a knob of the record too (the recipes of estimate/fp8.yaml; pytorch's: tensorwise)
    fws["toytorch"] = {**copy.deepcopy(fws["pytorch"]), "source": "a test's copy of pytorch", "fp8_recipe": "rowwise"}
    fws["toytorch-slow"] = {**copy.deepcopy(fws["toytorch"]), "kernel_efficiency": 0.5 * float(
        fws["pytorch"].get("kernel_efficiency", fws["default"]["kernel_efficiency"]))}
    fws["toytorch-fast"] = copy.deepcopy(fws["toytorch"])
    fws["toytorch-fast"]["offload"]["matmul_scale"] = 1.2
    fws["toyflow"] = copy.deepcopy(fws["ml_dataflow"])
    monkeypatch.setattr(efficiency, "_data", lambda: data)
    _clear_caches()
    yield data
    monkeypatch.undo()
    _clear_caches()  # nothing cached from the fake entries outlives the test


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(args) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_plan_uses_the_new_framework_entry(toytorch: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    ref, toy, slow = (_run([*PLAN, "--framework", fw], capsys) for fw in ("pytorch", "toytorch", "toytorch-slow"))
    for key in ("step_time_s", "memory_bytes_per_device", "flop_per_step", "mfu"):
        assert toy[key] == ref[key], key
    assert slow["step_time_s"] > 1.2 * toy["step_time_s"] and slow["flop_per_step"] == toy["flop_per_step"]


def test_an_fp8_plan_runs_the_entry_recipe(toytorch: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    fp8_plan = [*PLAN[:4], "h100-sxm", *PLAN[5:], "--precision", "fp8"]
    ref, toy = (_run([*fp8_plan, "--framework", fw], capsys) for fw in ("pytorch", "toytorch"))
    assert (ref["fp8_recipe"], toy["fp8_recipe"]) == ("tensorwise", "rowwise")
    assert toy["step_time_s"] > ref["step_time_s"]  # rowwise: more quantize traffic, slower scaled GEMMs
    told = _run([*fp8_plan, "--framework", "toytorch", "--fp8-recipe", "tensorwise"], capsys)  # a run's own wins
    assert told["fp8_recipe"] == "tensorwise" and told["step_time_s"] == ref["step_time_s"]


def test_offload_plan_uses_the_same_entry(toytorch: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    ref, toy, fast, flow, toyflow = (_run([*OFFLOAD, "--framework", fw], capsys) for fw in (
        "pytorch", "toytorch", "toytorch-fast", "ml_dataflow", "toyflow"))
    assert toy["framework"] == "toytorch" and toyflow["framework"] == "toyflow"

    def plan(d: dict[str, Any]) -> dict[str, Any]:  # everything but the name and the sentences that say it
        return {k: v for k, v in d.items() if k not in ("framework", "compared_with_plan")}

    assert plan(toy) == plan(ref) and plan(toyflow) == plan(flow)
    assert toy["compared_with_plan"]["plan_tokens_per_s"] == ref["compared_with_plan"]["plan_tokens_per_s"]
    assert toy["tokens_per_s"] != flow["tokens_per_s"]  # the two blocks differ, and the plans with them
    assert fast["tokens_per_s"] > toy["tokens_per_s"]
    assert "framework 'toytorch-fast' (matmul x1.2" in fast["compared_with_plan"]["reasons"][0]


def test_catalog_and_search_see_the_new_framework(toytorch: dict[str, Any],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "frameworks", "--json"]) == 0
    listed = {f["name"]: f for f in json.loads(capsys.readouterr().out)}
    assert listed["toytorch"]["source"] == "a test's copy of pytorch" and listed["toytorch"]["fp8_recipe"] == "rowwise"
    assert listed["toytorch-fast"]["offload"]["matmul_scale"] == 1.2 and listed["ddp"]["offload"] is None
    # what each runs as eager chains and what its fused kernels take (compose.model_efficiency reads these)
    assert listed["ddp"]["elementwise"]["eager_ops"] == ["norm", "rope", "glu", "gelu"]
    assert listed["ddp"]["elementwise"]["eager_indexed"] and not listed["torchtitan"]["elementwise"]["eager_indexed"]
    assert not listed["nemo"]["elementwise"]["scaled_rope_fused"] and listed["torchtitan"]["elementwise"][
        "scaled_rope_fused"]
    best = {}
    for fw in ("pytorch", "toytorch"):
        best[fw] = _run(["search", "--model", "llama3.2-1b", "--chip", "a100-80gb", "--num-chips", "8",
                         "--framework", fw, "--top", "1", "--json"], capsys)["ranked"][0]
    assert best["toytorch"]["step_time_s"] == best["pytorch"]["step_time_s"]
    assert best["toytorch"]["strategy"] == best["pytorch"]["strategy"]


def test_a_bad_offload_block_is_one_line(toytorch: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    block = toytorch["frameworks"]["toytorch"]["offload"]
    for change, expected in ((("chunk_tokens", 1.5), "offload.chunk_tokens=1.5: must be a whole number"),
                             (("host_side", "gpu"), "offload.host_side='gpu': must be one of overlapped, executor"),
                             (("chunk_size", 1), "chunk_size"),
                             (("matmul_scale", None), "misses matmul_scale")):
        edited = dict(block)
        if change[1] is None:
            edited.pop(change[0])
        else:
            edited[change[0]] = change[1]
        toytorch["frameworks"]["toytorch"]["offload"] = edited
        capsys.readouterr()
        assert main([*OFFLOAD, "--framework", "toytorch"]) == 2
        err = capsys.readouterr().err.strip()
        assert expected in err and "efficiency.frameworks.toytorch.offload" in err and "\n" not in err


MOE_PLAN = ["plan", "--model", "mixtral-8x7b", "--chip", "h100-sxm", "--num-chips", "64", "--tp", "2", "--ep", "8",
            "--dp", "32", "--micro-batch", "1", "--zero", "1", "--recompute", "full", "--json"]


def test_moe_dispatch_knobs_are_the_entry_s(toytorch: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    fws = toytorch["frameworks"]
    deepep = {k: v for k, v in fws["nemo-deepep-a2a-overlap"].items() if k.startswith("moe_")}  # overlap, forwarding
    assert deepep and set(deepep) <= set(efficiency.FRAMEWORK_KEYS)
    fws["toymoe"] = {**copy.deepcopy(fws["megatron"]), **deepep, "moe_host_sync": False}
    ref, toy = (_run([*MOE_PLAN, "--framework", fw], capsys) for fw in ("megatron", "toymoe"))
    # the all-to-alls mostly hidden behind the compute (test_moe.py pins how much): a faster step
    assert toy["step_time_s"] < ref["step_time_s"] - 0.5 * ref["step_breakdown_s"]["ep_comm"]
    assert toy["step_breakdown_s"]["compute"] < ref["step_breakdown_s"]["compute"]  # no host sync: kernels hidden
    assert toy["flop_per_step"] == ref["flop_per_step"]
    fws["toymoe"]["moe_host_sync"] = "sometimes"
    _clear_caches()
    capsys.readouterr()
    assert main([*MOE_PLAN, "--framework", "toymoe"]) == 2
    err = capsys.readouterr().err.strip()
    assert "moe_host_sync='sometimes'" in err and "\n" not in err


def test_an_unknown_framework_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*PLAN, "--framework", "toytorch"]) == 2
    assert "framework='toytorch': is not a known framework" in capsys.readouterr().err
    assert main([*OFFLOAD, "--framework", "ddp"]) == 2  # a framework, but without an offload block
    err = capsys.readouterr().err
    assert "offload.framework='ddp': must be a framework whose efficiency.yaml entry has an offload block" in err
    assert "ml_dataflow, pytorch" in err
