"""Search constraints (max chips, memory headroom, budget, deadline), `greentrain plan` choosing through the
search, and `--plot`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.engine import Constraints, best_strategy, chip_counts, search
from greentrain.search.space import SearchSpace

SPACE = SearchSpace(max_micro_batch=2, interleave=False)
SMALL = ["--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048",
         "--tokens", "1e9", "--max-micro-batch", "2", "--no-interleave"]


@pytest.fixture(scope="module")
def sc() -> Scenario:
    return scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                               "workload": {"global_batch_size": 16, "seq_len": 2048, "train_tokens": 1e9},
                               "site": {"region": "us-east-1"}})


def test_chip_counts() -> None:
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8}})
    assert chip_counts(sc, 0) == [8]
    assert chip_counts(sc, 24) == [1, 2, 4, 8, 16, 24]


def test_max_chips_searches_every_count(sc: Scenario) -> None:
    free = search([sc], space=SPACE, constraints=Constraints(max_chips=16), top_k=50)
    counts = {c.num_chips for c in free.pareto} | {c.num_chips for c in free.ranked}
    assert max(counts) == 16 and free.ranked[0].num_chips == 16  # fastest uses the most chips
    single = search([sc], space=SPACE)
    assert free.num_candidates > single.num_candidates
    assert free.ranked[0].run_time_s < single.ranked[0].run_time_s


def test_budget_and_deadline_filter(sc: Scenario) -> None:
    base = search([sc], space=SPACE, objective="cost", top_k=1, constraints=Constraints(max_chips=16))
    cheapest, fastest = base.ranked[0], search([sc], space=SPACE, constraints=Constraints(max_chips=16)).ranked[0]
    deadline = 0.5 * (cheapest.run_time_s + fastest.run_time_s)
    r = search([sc], space=SPACE, objective="cost", top_k=5,
               constraints=Constraints(max_chips=16, deadline_s=deadline))
    assert all(c.run_time_s <= deadline for c in r.ranked) and r.num_feasible < base.num_feasible
    assert r.ranked[0].cost_usd >= cheapest.cost_usd
    budget = 1.01 * cheapest.cost_usd
    b = search([sc], space=SPACE, top_k=5, constraints=Constraints(max_chips=16, budget_usd=budget))
    assert all(c.cost_usd <= budget for c in b.ranked) and b.ranked[0].run_time_s >= fastest.run_time_s
    with pytest.raises(InfeasibleError,
                       match=r"meets the constraints \(deadline .* days\); without them the fastest takes"):
        search([sc], space=SPACE, constraints=Constraints(deadline_s=1.0))


def test_memory_headroom(sc: Scenario) -> None:
    r = search([sc], space=SPACE, top_k=1, constraints=Constraints(memory_headroom=0.85))
    assert r.ranked[0].memory_bytes <= 0.15 * sc.cluster.chip.memory_bytes
    assert r.num_feasible < search([sc], space=SPACE, top_k=1).num_feasible
    with pytest.raises(ConfigError, match=r"constraints\.memory_headroom"):
        Constraints(memory_headroom=1.0)


def test_plan_uses_the_search(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *SMALL[:-3], "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 8},
                             "workload": {"global_batch_size": 16, "seq_len": 2048, "train_tokens": 1e9}})
    best = best_strategy(sc)
    assert d["strategy"]["chosen_by_planner"] and d["strategy"]["dp"] == best.dp and d["strategy"]["tp"] == best.tp
    fastest = search([sc], top_k=1).ranked[0]
    assert d["step_time_s"] == pytest.approx(fastest.step_time_s, rel=1e-12)


def test_cli_constraints_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "front.png"
    assert main(["search", *SMALL, "--num-chips", "16", "--max-chips", "16", "--deadline-days", "30",
                 "--budget-usd", "1e6",
                 "--memory-headroom", "0.1", "--plot", str(out), "--json", "--top", "3"]) == 0
    captured = capsys.readouterr()
    d = json.loads(captured.out)
    assert f"greentrain: wrote {out}" in captured.err.splitlines()
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"
    assert {r["num_chips"] for r in d["ranked"]} <= {1, 2, 4, 8, 16} and len(d["ranked"]) == 3
    assert not list(tmp_path.glob(".front*"))  # no temporary file left behind


@pytest.mark.parametrize("bad", [["--memory-headroom", "1.5"], ["--budget-usd", "-3"], ["--deadline-days", "0"],
                                 ["--max-chips", "0"], ["--plot", "x.gif"], ["--plot", "/nonexistent/dir/x.png"],
                                 ["--deadline-days", "1e-9"], ["--budget-usd", "inf"], ["--chip", ""],
                                 ["--region", "us-east-1,"], ["--memory-headroom", "nan"],
                                 # counts past any cluster or batch (found by a 1,500-example fuzz run)
                                 ["--top", "9" * 400], ["--max-tp", str(2**24 + 1)],
                                 ["--max-micro-batch", str(10**8 + 1)], ["--top", "1000001"]])
def test_bad_constraints_exit_2_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: list[str]) -> None:
    assert main(["search", *SMALL, *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_search_keeps_the_files_attention_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario file's strategy with flash_attention: false is searched with naive attention (selective
    recomputation then differs from none), and the search says which of the file's fields it pins."""
    job = tmp_path / "job.yaml"
    job.write_text("model: gpt3-175b\ncluster: {chip: a100-80gb, num_chips: 64}\n"
                   "strategy: {tp: 8, pp: 8, flash_attention: false}\n"
                   "workload: {global_batch_size: 64, seq_len: 2048, train_tokens: 3e11}\n")
    assert main(["search", str(job), "--json", "--top", "1"]) == 0
    out = capsys.readouterr()
    assert "pins tp=8 pp=8 flash_attention=false" in out.err
    assert json.loads(out.out)["ranked"][0]["estimate"]["strategy"]["flash_attention"] is False


def test_the_python_api_refuses_the_same_counts(sc: Scenario) -> None:
    with pytest.raises(ConfigError, match=r"search\.max_tp=16777217: must be an integer in \[0, 16,777,216\] "
                                          r"\(0: the node size\)"):
        SearchSpace(max_tp=2**24 + 1)
    with pytest.raises(ConfigError, match=r"search\.max_micro_batch"):
        SearchSpace(max_micro_batch=10**8 + 1)
    with pytest.raises(ConfigError, match=r"search\.top_k=1000001: must be between 1 and 1,000,000"):
        search([sc], top_k=10**6 + 1)
    SearchSpace(max_tp=2**24, max_micro_batch=10**8)  # the bounds themselves are taken
    with pytest.raises(ConfigError, match=r"search\.etp=16777217: must be an integer in \[0, 16,777,216\] \(0: as"):
        SearchSpace(etp=2**24 + 1)  # a pinned degree (plan --etp on a dense model was taken, then dropped)
