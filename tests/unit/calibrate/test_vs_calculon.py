"""benchmarks/vs_calculon.py's converter: a runs-CSV row as Calculon's inputs (Calculon itself is not needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from greentrain.calibrate.runs import read_runs

ROOT = Path(__file__).resolve().parents[3]
CALIBRATION = ROOT / "tests" / "data" / "calibration"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vs_calculon", ROOT / "benchmarks" / "vs_calculon.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(mod)
    return mod


def test_korthikanti_rows_convert_as_calculons_own_validation_inputs() -> None:
    """Calculon's validation of Table 5 (calculon/llm/validation): tp 8, sequence parallelism as reduce-scatter +
    all-gather with the backward's re-gather, selective recomputation as attn_only, no data-parallel overlap for
    2022 Megatron-LM; GPT-3 175B's MLP 4h wide, 96 heads of 128."""
    vc = _module()
    runs = {r.run_id: r for r in read_runs(CALIBRATION / "korthikanti2022-table5.csv")}
    sel = next(r for r in runs.values() if r.scenario.model.num_layers == 96 and r.strategy.recompute == "selective")
    c = vc.convert(sel, {"matrix": {"float16": {}}}, fused_activation=False)
    assert not c.skip and not c.approximations and c.system == "a100_80g"
    assert c.app == {"hidden": 12288, "feedforward": 49152, "seq_size": 2048, "attn_heads": 96, "attn_size": 128,
                     "num_blocks": 96}
    e = c.exe
    assert (e["tensor_par"], e["tensor_par_comm_type"], e["seq_par_ag_redo"]) == (8, "rs_ag", True)
    assert e["activation_recompute"] == "attn_only" and e["data_par_overlap"] is False
    assert e["num_procs"] == e["tensor_par"] * e["pipeline_par"] * e["data_par"]
    assert e["tensor_par_net"] == 0 and e["pipeline_par_net"] == 1  # tp inside a node, the pipeline across


def test_what_calculon_cannot_express_is_skipped_with_the_reason() -> None:
    vc = _module()
    moe = next(r for r in read_runs(CALIBRATION / "megatron-bridge-2509.csv") if r.scenario.model.is_moe)
    assert vc.convert(moe, None).skip == "MoE model"
    dense_b200 = next(r for r in read_runs(CALIBRATION / "megatron-bridge-2509.csv")
                      if r.scenario.cluster.chip.name == "b200" and not r.scenario.model.is_moe)
    assert vc.convert(dense_b200, None).skip.startswith(("no Calculon system file", "context parallelism"))
    fsdp = next(r for r in read_runs(CALIBRATION / "torchtitan-a100-2404.csv") if r.strategy.zero == 3)
    c = vc.convert(fsdp, None)
    assert not c.skip and any("ZeRO-3" in a for a in c.approximations)
