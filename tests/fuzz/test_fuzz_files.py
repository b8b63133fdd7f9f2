"""Issue 24: every file kind a user hands greentrain, fuzzed: a valid file with one or two keys set to a
plausible, an absurd (beyond greentrain.config.BOUNDS or the key's own rule) or a garbage value, or a misspelt
key where the reader refuses unknown keys. 0 tracebacks, 0 hangs, 0 absurd values accepted (harness.check)."""

from __future__ import annotations

import copy
import csv
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import check, profile, run
from hypothesis import given
from hypothesis import strategies as st

NAN, INF = float("nan"), float("inf")
GARBAGE: tuple[Any, ...] = ("x", [1], {"a": 1}, NAN, INF, -INF, 10**400)  # never a valid number
HUGE = (1e12, 1e30, 1e300)
Table = dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]]

SCENARIO: dict[str, Any] = {"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                            "strategy": {"tp": 1, "pp": 1, "dp": 8},
                            "workload": {"global_batch_size": 64, "seq_len": 1024, "train_tokens": 1e9},
                            "site": {"region": "FRA"}}
SCENARIO_KEYS: Table = {
    "cluster.num_chips": ((8,), (0, -1, 2**25, *HUGE)), "cluster.chips_per_node": ((8, 4), (0, 1048576)),
    "cluster.chip": (("h100", "a100-80gb"), ("nochip", "")),
    "workload.train_tokens": ((1e9, 1e12), (0, -1, 1e40)), "workload.global_batch_size": ((64, 128), (0, 1e12)),
    "workload.seq_len": ((1024, 2048), (0, 1e12)), "workload.precision": (("bf16",), ("fp64",)),
    "site.region": (("FRA", "us-east-1"), ("", "nowhere")), "site.pue": ((1.1, 1.5), (0.5, 1e9)),
    "site.grid_g_co2e_per_kwh": ((50, 800), (-1, 1e12)), "site.electricity_usd_per_kwh": ((0.1,), (-1, 1e6)),
    "strategy.tp": ((1,), (0, 1e12)), "strategy.zero": ((0, 1), (4, -1)),
}
# --fp8-recipe's file form (issue 23): a recipe only with precision fp8, mxfp8 only on Blackwell (not this h100)
SCENARIO_FP8: dict[str, Any] = {**SCENARIO, "workload": {**SCENARIO["workload"], "precision": "fp8",
                                                         "fp8_recipe": "tensorwise"}}
SCENARIO_FP8_KEYS: Table = {
    "workload.fp8_recipe": (("tensorwise", "delayed", "rowwise"), ("mxfp8", "nope", "", "FP8", 8)),
    "workload.precision": (("fp8",), ("bf16", "fp16", "fp32")),
    "workload.global_batch_size": ((64, 128), (0, 1e12)),
}
MODEL: dict[str, Any] = {"name": "fz", "num_layers": 4, "hidden_size": 256, "num_heads": 4, "ffn_hidden_size": 512,
                         "vocab_size": 1000}
MODEL_KEYS: Table = {"num_layers": ((2, 8), (0, 10**7, 1e12)), "hidden_size": ((128, 512), (0, 10**7, 1e12)),
                     "num_heads": ((2, 8), (0, 10**6)), "ffn_hidden_size": ((1024,), (10**7,)),
                     "vocab_size": ((32000,), (0, 10**8)), "head_dim": ((64,), (10**7,)),
                     "num_experts": ((1, 8), (0, 10**7)), "activation": (("silu", "gelu"), ("nope",))}
HF: dict[str, Any] = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
                      "intermediate_size": 512, "vocab_size": 1000}
HF_KEYS: Table = {"num_hidden_layers": ((2, 8), (0, 1e7, 1e12)), "hidden_size": ((128, 512), (0, 1e12)),
                  "head_dim": ((64, None), (0, 10**7)), "tie_word_embeddings": ((True, False), ("yes", "false", 1)),
                  "num_key_value_heads": ((2, 4), (0, 3)), "vocab_size": ((32000,), (0, 1e12)),
                  "hidden_act": (("silu",), ("nope",)), "model_type": (("llama", "mistral"), ("nope",))}
CHIP: dict[str, Any] = {"name": "fz-chip", "memory_gib": 80, "memory_bandwidth_gb_per_s": 3350,
                        "bf16_tflop_per_s": 989, "tdp_w": 700}
CHIP_KEYS: Table = {"memory_gib": ((40, 141), (0, -1, *HUGE)), "memory_bandwidth_gb_per_s": ((2000,), (0, 1e12)),
                    "bf16_tflop_per_s": ((312, 2000), (0, 1e9)), "tdp_w": ((400,), (-1, 1e9)),
                    "chips_per_node": ((8, 72), (0, 1048576))}
DEVICES: dict[str, Any] = {"devices": [{"name": "gpu", "count": 4, "tflop_per_s": 100, "ingress_gbit_per_s": 10,
                                        "egress_gbit_per_s": 10}]}
DEVICE_KEYS: Table = {"devices.0.count": ((1, 8), (0, 10**9)), "devices.0.tflop_per_s": ((50,), (0, 1e12)),
                      "devices.0.ingress_gbit_per_s": ((1,), (0, 1e-300, 1e12)),
                      "devices.0.slowdown": ((1.5,), (0, 1e9)), "devices.0.latency_ms": ((10,), (-1, 1e12)),
                      "devices.0.failure_probability": ((0.1,), (2, -1))}
RUN: dict[str, Any] = {"num_chips": 8, "run_time_s": 3600, "chip": "h100", "region": "FRA", "power_w_per_chip": 400}
RUN_KEYS: Table = {"num_chips": ((8, 64), (0, 1e30)), "run_time_s": ((3600, 86400), (-1, 1e15)),
                   "power_w_per_chip": ((300,), (-5, 1e6)), "region": (("us-east-1",), ("nowhere",)),
                   "utilization": ((0.5,), (2,)), "pue": ((1.2,), (0.5, 1e9))}
TRACE: dict[str, Any] = {"traceEvents": [{"name": "a", "ph": "X", "ts": 0, "dur": 5, "pid": 0, "tid": 0}]}
TRACE_KEYS: Table = {"traceEvents.0.ts": ((0, 10), ("soon", -1)), "traceEvents.0.dur": ((1, 100), ("long", -5))}
EXPERIMENT: dict[str, Any] = {"name": "fz", "data": {"train_size": 64, "eval_size": 8, "test_size": 8},
                              "train": {"max_steps": 2}}
EXPERIMENT_KEYS: Table = {"data.train_size": ((), (0, 1e12, 1e7)), "data.max_source_tokens": ((), (0, 1e9)),
                          "train.optim": ((), ("foo", "adamw")), "model.config.d_modle": ((), (64,)),
                          "train.max_steps": ((), (0, -1))}

# name -> (base document, keys, suffix, argv with {file} and {tmp}, refuses unknown keys)
KINDS: dict[str, tuple[dict[str, Any], Table, str, tuple[str, ...], bool]] = {
    "scenario": (SCENARIO, SCENARIO_KEYS, ".yaml", ("plan", "{file}", "--json"), True),
    "scenario-fp8": (SCENARIO_FP8, SCENARIO_FP8_KEYS, ".yaml", ("plan", "{file}", "--json"), True),
    "model-yaml": (MODEL, MODEL_KEYS, ".yaml", ("plan", "--model", "{file}", "--num-chips", "8", "--tp", "1",
                                               "--pp", "1", "--dp", "8", "--json"), True),
    "hf-config": (HF, HF_KEYS, ".json", ("plan", "--model", "{file}", "--num-chips", "8", "--tp", "1", "--pp", "1",
                                        "--dp", "8", "--json"), False),
    "chip-yaml": (CHIP, CHIP_KEYS, ".yaml", ("plan", "--chip", "{file}", "--model", "llama3.2-1b", "--num-chips", "8",
                                            "--tp", "1", "--pp", "1", "--dp", "8", "--json"), True),
    "devices-yaml": (DEVICES, DEVICE_KEYS, ".yaml", ("simulate", "swarm", "--devices", "{file}", "--model",
                                                    "llama3.2-1b", "--json"), False),
    "run-json": (RUN, RUN_KEYS, ".json", ("footprint", "{file}", "--json"), False),
    "trace-json": (TRACE, TRACE_KEYS, ".json", ("report", "{file}", "-o", "{tmp}/report.html"), False),
    "experiment-yaml": (EXPERIMENT, EXPERIMENT_KEYS, ".yaml", ("experiment", "plan", "{file}"), True),
}
# a given intensity makes the region only its label (footprint/regions.build_site: "" or an unknown name beside
# it is valid), so the two are never set together
TIED = {"site.region": "site.grid_g_co2e_per_kwh", "site.grid_g_co2e_per_kwh": "site.region"}
EXAMPLES_PER_KIND = 55  # x 9 kinds, + the runs CSV below (80 until session 22: the suite's 6-minute budget)
_counter = itertools.count()


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    node: Any = doc
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _write(tmp: Path, doc: Any, suffix: str) -> str:
    path = tmp / f"case{next(_counter)}{suffix}"
    if suffix == ".json":
        try:
            text = json.dumps(doc)  # NaN and Infinity as JavaScript spells them (json reads them back)
        except (TypeError, ValueError):
            text = json.dumps(str(doc))
    else:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


@st.composite
def documents(draw: st.DrawFn, kind: str) -> tuple[dict[str, Any], bool]:
    base, keys, _, _, strict = KINDS[kind]
    doc, absurd = copy.deepcopy(base), False
    drawn = draw(st.lists(st.sampled_from(sorted(keys)), min_size=1, max_size=2, unique=True))
    for key in drawn[:1] if TIED.get(drawn[0]) in drawn else drawn:
        ok, bad = keys[key]
        how = draw(st.sampled_from(("ok", "bad", "garbage", "typo") if ok else ("bad", "garbage", "typo")))
        if how == "typo" and not strict:
            how = "bad"
        if how == "typo":  # a misspelt key: refused with a did-you-mean where the reader checks its keys
            *path, last = key.split(".")
            _set(doc, ".".join([*path, last + "x"]), (ok or bad)[0])
        else:
            pool = ok if how == "ok" else bad if how == "bad" else GARBAGE
            _set(doc, key, draw(st.sampled_from(pool)))
        absurd |= how != "ok"
    return doc, absurd


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-files")


@pytest.mark.parametrize("kind", sorted(KINDS))
@profile(EXAMPLES_PER_KIND)
@given(data=st.data())
def test_fuzz_file(kind: str, tmp: Path, data: st.DataObject) -> None:
    doc, absurd = data.draw(documents(kind), label="document")
    _, _, suffix, argv, _ = KINDS[kind]
    path = _write(tmp, doc, suffix)
    check(run([a.format(file=path, tmp=tmp) for a in argv]), absurd=absurd)


RUN_COLUMNS = ("run_id", "model", "chip", "num_chips", "seq_len", "global_batch", "micro_batch", "tp", "pp", "dp",
               "status", "measured_step_time_s", "precision", "fp8_recipe")
CELLS = st.sampled_from(["", "1", "8", "64", "2048", "llama3.2-1b", "h100-sxm", "b200", "bf16", "fp8", "ok", "1e40",
                         "-1", "nan", "inf", "x", "0.5", "1e12", "tensorwise", "mxfp8", "rowwise"])


@profile(120)
@given(rows=st.lists(st.lists(CELLS, min_size=len(RUN_COLUMNS), max_size=len(RUN_COLUMNS)), min_size=1,
                     max_size=3))
def test_fuzz_runs_csv(tmp: Path, rows: list[list[str]]) -> None:
    out = io.StringIO()
    csv.writer(out).writerows([list(RUN_COLUMNS), *rows])
    path = tmp / f"runs{next(_counter)}.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    check(run(["validate", str(path)]), absurd=False)


FP8_RECIPES = ("tensorwise", "delayed", "rowwise", "mxfp8")  # estimate/fp8.py's, any case in a runs CSV


@profile(40)
@given(framework=st.sampled_from(["nemo", "torchtitan"]), chip=st.sampled_from(["h100-sxm", "b200"]),
       precision=st.sampled_from(["bf16", "fp8"]),
       recipe=st.sampled_from(["", *FP8_RECIPES, "MXFP8", "blockwise", "x", "fp8"]))
def test_fuzz_runs_csv_fp8_recipe(tmp: Path, framework: str, chip: str, precision: str, recipe: str) -> None:
    """The fp8_recipe column (issue 23): a recipe only with precision fp8, a known one, mxfp8 only on Blackwell."""
    header = "run_id,framework,model,chip,num_chips,seq_len,global_batch,precision,fp8_recipe,status,"
    path = tmp / f"runs{next(_counter)}.csv"
    path.write_text(f"{header}measured_step_time_s\nr1,{framework},llama3-8b,{chip},8,2048,64,{precision},{recipe},"
                    "ok,2\n", encoding="utf-8")
    name = recipe.lower()
    absurd = bool(recipe) and (precision != "fp8" or name not in FP8_RECIPES or (name == "mxfp8" and chip != "b200"))
    outcome = run(["validate", str(path)])
    check(outcome, absurd=absurd)
    assert outcome.status == 0 or "fp8_recipe" in outcome.stderr or not recipe, outcome.stderr
