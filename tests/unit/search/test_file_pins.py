"""`greentrain search job.yaml` honours the strategy the file sets (issue 16 item 7): every field the file's
strategy names is pinned in the search space, the others are searched; what the vectorised search cannot
enumerate is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.scenario import scenario_from_dict
from greentrain.search.pins import pinned_space
from greentrain.search.space import SearchSpace, meshes

JOB = ("model: llama3.2-1b\ncluster: {chip: h100-sxm, num_chips: 8}\n"
       "workload: {global_batch_size: 16, seq_len: 2048, train_tokens: 1.0e+9}\nsite: {region: us-east-1}\n")
FAST = ["--max-micro-batch", "2", "--no-interleave"]


def _search(tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str,
            *extra: str) -> tuple[int, dict, str]:
    job = tmp_path / "job.yaml"
    job.write_text(JOB + f"strategy: {strategy}\n")
    code = main(["search", str(job), "--json", "--top", "5", *FAST, *extra])
    out = capsys.readouterr()
    return code, json.loads(out.out) if code == 0 else {}, out.err


def test_the_files_fields_are_pinned_the_rest_searched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = _search(tmp_path, capsys, "{tp: 2, zero: 1, flash_attention: false}")
    assert code == 0
    rows = doc["ranked"] + doc["pareto"]
    assert rows and all(r["strategy"]["tp"] == 2 and r["strategy"]["zero"] == 1
                        and r["strategy"]["flash_attention"] is False for r in rows)
    assert len({(r["strategy"]["pp"], r["strategy"]["micro_batch_size"], r["strategy"]["recompute"])
                for r in doc["ranked"]}) > 1  # what the file does not set is still searched
    assert "pins tp=2 zero=1 flash_attention=false" in err


def test_a_file_without_strategy_searches_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    assert main(["search", str(job), "--json", "--top", "20", *FAST]) == 0
    out = capsys.readouterr()
    assert len({r["strategy"]["tp"] for r in json.loads(out.out)["ranked"]}) > 1 and "pins" not in out.err


@pytest.mark.parametrize(("strategy", "needle"), [
    ("{pp: 2, schedule: gpipe}", "strategy.schedule='gpipe': cannot be searched"),
    ("{pp: 2, stage_layers: [6, 10]}", "strategy.stage_layers=[6, 10]: cannot be searched"),
    ("{offload_optimizer: true}", "strategy.offload_optimizer=True: is outside the search space (False)"),
])
def test_what_cannot_be_honoured_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str,
                                            needle: str) -> None:
    code, _, err = _search(tmp_path, capsys, strategy, "--no-offload")
    assert code == 2 and err.count("\n") == 1 and needle in err, err


def test_pins_nothing_keeps_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _search(tmp_path, capsys, "{dp: 8, tp: 8}")
    assert code == 2 and err.count("\n") == 2  # the note, then the one-line error
    assert "no strategy on 8 x h100-sxm keeps the pinned dp=8 tp=8 for llama3.2-1b" in err


def test_pinned_space() -> None:
    space = pinned_space({"tp": 4, "zero": 1, "recompute": "full", "schedule": "1f1b", "etp": 1},
                         SearchSpace(max_micro_batch=2))
    assert (space.tp, space.vpp, space.zero, space.recompute, space.etp, space.max_micro_batch) == (
        4, 1, (1,), ("full",), 1, 2)
    assert pinned_space({"dp": 2, "tp": 2, "pp": 2}).cp == 1  # a sized mesh: no context parallelism
    assert pinned_space({"tp": 2}).cp == 0
    with pytest.raises(ConfigError, match=r"strategy\.zero"):
        pinned_space({"zero": 3}, SearchSpace(zero=(0, 1)))


def test_a_pinned_expert_tensor_degree() -> None:
    sc = scenario_from_dict({"model": "mixtral-8x7b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 64, "seq_len": 4096}})
    both = {s.etp for s in meshes(sc, SearchSpace(tp=4))}
    assert both == {0, 1}
    assert {s.etp for s in meshes(sc, SearchSpace(tp=4, etp=1))} == {1}
    assert {s.etp for s in meshes(sc, SearchSpace(tp=4, etp=4))} == {0}  # etp = tp is the default layout
