"""`search --workers N`: the parts are the table in order, and N processes give the one-process answer field by
field (rankings, Pareto front, counts, points, notes) for every objective, with chip types whose costs do
not compare (cloud price against electricity only) and several regions."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.hardware.catalog import get_chip
from greentrain.parallel.table import BOOL_FIELDS, INT_FIELDS
from greentrain.scenario import Scenario, build_cluster, scenario_from_dict, site_from_dict
from greentrain.search.engine import Constraints, SearchResult, search
from greentrain.search.feasibility import with_chips
from greentrain.search.space import SearchSpace, table
from greentrain.search.workers import parts, search_parallel

SPACE = SearchSpace(max_micro_batch=4)


@pytest.fixture(scope="module")
def scenarios() -> list[Scenario]:
    sc = scenario_from_dict({"model": "llama3.2-1b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
                             "workload": {"global_batch_size": 32, "seq_len": 2048, "train_tokens": 1e9},
                             "site": {"region": "us-east-1"}})
    # the RTX 4090 has no cloud price: its cost is electricity only and leaves the cost ranking
    return [sc, dataclasses.replace(sc, cluster=build_cluster(get_chip("rtx-4090"), 16, None))]


def _same(a: SearchResult, b: SearchResult) -> None:
    assert a.ranked == b.ranked
    assert a.pareto == b.pareto
    assert (a.num_candidates, a.num_feasible, a.notes) == (b.num_candidates, b.num_feasible, b.notes)
    assert np.array_equal(a.points, b.points)


def test_parts_concatenate_to_each_units_table(scenarios: list[Scenario]) -> None:
    cons = Constraints(max_chips=16)
    units, ps = parts(scenarios, SPACE, cons)
    assert [u for u, _ in ps] == sorted(u for u, _ in ps) and {u for u, _ in ps} == set(range(len(units)))
    for unit in {u for u, _ in ps}:
        mine = [sp for u, sp in ps if u == unit]
        whole = table(units[unit], SPACE)
        pieces = [table(units[unit], sp) for sp in mine]
        for f in INT_FIELDS + BOOL_FIELDS:
            assert np.array_equal(getattr(whole, f), np.concatenate([getattr(p, f) for p in pieces])), (unit, f)


@pytest.mark.parametrize(("objective", "top_k"), [("time", 1), ("cost", 7), ("co2e", 3)])
def test_two_workers_give_the_one_process_answer(scenarios: list[Scenario], objective: str, top_k: int) -> None:
    # top 1: the ranking's pick among near-ties (engine._tie_keys) is rarely a part's own fastest row
    kw = {"objective": objective, "top_k": top_k, "space": SPACE, "constraints": Constraints(max_chips=16),
          "sites": [site_from_dict({"region": r}) for r in ("us-east-1", "eu-north-1")]}
    one = search(scenarios, **kw)  # type: ignore[arg-type]
    ticks: list[tuple[int, int]] = []
    two = search_parallel(scenarios, workers=2, progress=lambda d, t: ticks.append((d, t)), **kw)  # type: ignore[arg-type]
    _same(one, two)
    assert one.notes and len(one.pareto) >= 1 and len(one.ranked) == top_k
    assert [d for d, _ in ticks] == list(range(1, len(ticks) + 1)) and ticks[-1][0] == ticks[-1][1] > 2


def test_whole_units_as_parts_give_the_one_process_answer(scenarios: list[Scenario],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With many units per worker each unit is one part (no tp split): the same answer."""
    from greentrain.search import workers

    kw = {"objective": "cost", "top_k": 5, "space": SPACE, "constraints": Constraints(max_chips=16),
          "sites": [site_from_dict({"region": r}) for r in ("us-east-1", "eu-north-1")]}
    monkeypatch.setattr(workers, "UNITS_PER_WORKER_TO_SPLIT", 0)
    units, ps = parts(scenarios, SPACE, Constraints(max_chips=16), workers=2)
    assert [u for u, _ in ps] == list(range(len(units)))  # one part per unit
    _same(search(scenarios, **kw), search_parallel(scenarios, workers=2, **kw))  # type: ignore[arg-type]


def test_a_pinned_tp_is_one_part(scenarios: list[Scenario]) -> None:
    space = dataclasses.replace(SPACE, tp=2)
    assert len(parts(scenarios[:1], space, Constraints())[1]) == 1
    _same(search(scenarios[:1], space=space), search_parallel(scenarios[:1], workers=3, space=space))


def test_bad_worker_count_is_refused(scenarios: list[Scenario]) -> None:
    with pytest.raises(ConfigError, match=r"search\.workers"):
        search_parallel(scenarios, workers=0)


def test_cli_workers_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048",
            "--tokens", "1e9", "--max-micro-batch", "2", "--pareto", "--json"]
    docs = []
    for workers in ("1", "2"):
        assert main([*args, "--workers", workers]) == 0
        doc = json.loads(capsys.readouterr().out)
        doc.pop("search_time_s")
        docs.append(doc)
    assert docs[0] == docs[1]
    assert main([*args, "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err


def test_near_ties_across_parts(scenarios: list[Scenario]) -> None:
    """On 8 H100 the ranking's pick among the candidates within the tie tolerance of the fastest is not the
    fastest row of its tp part: a part that sent only its own top k would lose it."""
    sc = with_chips(scenarios[0], 8)
    _same(search([sc], top_k=1, space=SPACE), search_parallel([sc], workers=2, top_k=1, space=SPACE))


@pytest.mark.slow
def test_workers_start_from_a_fork_server_when_a_thread_runs(scenarios: list[Scenario]) -> None:
    """At a terminal the progress bar runs a thread: the workers then come from a fork server, not a fork."""
    stop = threading.Event()
    bar = threading.Thread(target=stop.wait, daemon=True)
    bar.start()
    try:
        assert threading.active_count() > 1
        _same(search(scenarios[:1], space=SPACE), search_parallel(scenarios[:1], workers=2, space=SPACE))
    finally:
        stop.set()
        bar.join()


def test_without_points_only_the_plot_data_is_left_out(scenarios: list[Scenario]) -> None:
    kw = {"space": SPACE, "constraints": Constraints(max_chips=16)}
    one = search(scenarios, **kw)  # type: ignore[arg-type]
    two = search_parallel(scenarios, workers=2, points=False, **kw)  # type: ignore[arg-type]
    assert two.points.shape == (0, 3) and len(one.points) == one.num_feasible > 0
    _same(one, dataclasses.replace(two, points=one.points))


def _die(part: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer ends a worker


def test_a_worker_killed_stops_the_search_with_one_error(scenarios: list[Scenario],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """multiprocessing.Pool replaced a killed worker and waited for its part for ever; the executor breaks."""
    from greentrain.search import workers
    monkeypatch.setattr(workers, "_run_part", _die)
    monkeypatch.setattr(workers, "_pool", lambda n, shared: ProcessPoolExecutor(n, mp_context=mp.get_context("fork")))
    with pytest.raises(ChildProcessError, match="a search worker process died before it answered"):
        search_parallel(scenarios[:1], workers=2, space=SPACE)
