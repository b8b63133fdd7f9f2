"""Issue 16 and 24: files whose shape is wrong, not only their values. test_fuzz_files.py sets one or two keys
of a valid file; here a scenario YAML, a devices YAML and a runs CSV are drawn whole: sections of any type,
misspelt keys, nested garbage, documents that are not a mapping, YAML cut in half or left unclosed, CSV headers
of any subset of the columns (and unknown ones) with any cells. The oracle is harness.check without the absurd
flag (a drawn file may be valid): exit 0 or 2, one line when refused, no case past the per-case limit."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import check, profile, run
from hypothesis import given
from hypothesis import strategies as st

EXAMPLES_PER_KIND = 40  # x 3 kinds
_counter = itertools.count()

# Values a user (or a slip) puts in a file: plausible ones, absurd ones, wrong types
SCALARS = st.one_of(
    st.integers(-3, 70000), st.sampled_from([0, 1, 2, 8, 64, 1024, 10**40, -1, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e-300, 1e300, 0.5, 1e9, 1e12, 1e40]),
    st.booleans(), st.none(), st.text(max_size=12),
    st.sampled_from(["bf16", "fp8", "adamw", "h100-sxm", "a100-80gb", "b200", "llama3-8b", "llama3.2-1b",
                     "us-east-1", "FRA", "pcie4", "nvlink4", "full", "selective", "gpipe", "1f1b", "interleaved",
                     "tensorwise", "mxfp8", "1e9", "x"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=6), inner, max_size=3), max_leaves=6)

SECTION_KEYS = {
    "cluster": ["chip", "num_chips", "chips_per_node", "intra_node_link", "inter_node_link", "host_link",
                "host_memory_gib_per_node"],
    "strategy": ["dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "recompute", "micro_batch_size",
                 "offload_optimizer", "schedule", "flash_attention"],
    "workload": ["global_batch_size", "seq_len", "target_seq_len", "train_tokens", "num_steps", "num_epochs",
                 "dataset_tokens", "precision", "fp8_recipe", "optimizer", "grad_dtype"],
    "site": ["region", "grid_g_co2e_per_kwh", "pue", "electricity_usd_per_kwh"],
}
DEVICE_KEYS = ["name", "count", "flop_per_s", "tflop_per_s", "latency_ms", "failure_probability", "rejoin_s",
               "slowdown", "ingress_gbit_per_s", "egress_gbit_per_s", "ingress_mb_per_s", "egress_gb_per_s"]
RUN_COLUMNS = ["run_id", "model", "chip", "num_chips", "seq_len", "global_batch", "micro_batch", "tp", "pp",
               "dp", "vpp", "zero", "sp", "recompute", "status", "measured_step_time_s", "precision", "fp8_recipe"]
CELLS = st.one_of(st.sampled_from(["", "1", "8", "64", "2048", "llama3-8b", "h100-sxm", "bf16", "fp8", "mxfp8",
                                   "ok", "true", "full", "1e40", "-1", "nan", "inf", "x", "0.5", '"a,b"']),
                  st.text(max_size=6))


def _section(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from([*keys, "typo_key"]), VALUES, max_size=len(keys))


@st.composite
def scenario_texts(draw: st.DrawFn) -> str:
    data: dict[str, Any] = {"model": draw(st.sampled_from(["llama3.2-1b", "llama3-8b", "t5-large", 5, ""]))}
    for name, keys in SECTION_KEYS.items():
        if draw(st.booleans()):
            data[name] = draw(_section(keys) | VALUES)
    doc: Any = draw(VALUES) if draw(st.integers(0, 9)) == 0 else data  # 1 in 10: not even a mapping
    text = yaml.safe_dump(doc, sort_keys=False)
    return draw(st.sampled_from([text, text[: len(text) // 2], text + "\n  bad: [", text.replace(":", "")]))


@st.composite
def devices_texts(draw: st.DrawFn) -> str:
    good = {"name": "gpu", "tflop_per_s": 100, "ingress_gbit_per_s": 10, "egress_gbit_per_s": 10}
    entries = [{**good, **draw(_section(DEVICE_KEYS))} for _ in range(draw(st.integers(0, 3)))]
    return yaml.safe_dump({"devices": entries} if draw(st.integers(0, 5)) else draw(VALUES))


@st.composite
def runs_texts(draw: st.DrawFn) -> str:
    header = draw(st.lists(st.sampled_from([*RUN_COLUMNS, "bogus"]), min_size=1, max_size=10, unique=True))
    rows = [",".join(draw(CELLS).replace("\n", " ").replace("\r", " ") for _ in header)
            for _ in range(draw(st.integers(0, 3)))]
    return "\n".join([",".join(header), *rows]) + "\n"


KINDS = {  # name -> (the drawn text, suffix, argv with {file})
    "scenario-yaml": (scenario_texts(), ".yaml", ("plan", "{file}", "--json")),
    "devices-yaml": (devices_texts(), ".yaml", ("simulate", "swarm", "--devices", "{file}", "--model", "llama3.2-1b",
                                                "--batch-tokens", "4096", "--rounds", "1", "--json")),
    "runs-csv": (runs_texts(), ".csv", ("validate", "{file}")),
}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-structure")


@pytest.mark.parametrize("kind", sorted(KINDS))
@profile(EXAMPLES_PER_KIND)
@given(data=st.data())
def test_fuzz_structure(kind: str, tmp: Path, data: st.DataObject) -> None:
    texts, suffix, argv = KINDS[kind]
    path = tmp / f"case{next(_counter)}{suffix}"
    path.write_text(data.draw(texts, label="text"), encoding="utf-8")
    check(run([a.format(file=path) for a in argv]), absurd=False)
