"""Infeasible requests (no layout, no fit, absurd chip counts), mixed cost bases, and the search table."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from rich.console import Console

from greentrain.cli.main import main
from greentrain.hardware.catalog import get_chip
from greentrain.hardware.cluster import MAX_CHIPS, valid_chip_count
from greentrain.report.search import render_search
from greentrain.scenario import Scenario, scenario_from_dict
from greentrain.search.engine import search
from greentrain.search.feasibility import fits, layout_counts, min_chips_to_fit
from greentrain.search.space import SearchSpace, divisors

SPACE = SearchSpace(max_micro_batch=2, interleave=False)


def _sc(chips: int, chip: str = "h100-sxm", model: str = "llama3.2-1b") -> Scenario:
    return scenario_from_dict({"model": model, "cluster": {"chip": chip, "num_chips": chips},
                               "workload": {"global_batch_size": 32, "seq_len": 2048, "train_tokens": 1e10},
                               "site": {"region": "us-east-1"}})


def test_divisors_match_brute_force() -> None:
    rng = random.Random(0)
    for n in [1, 2, 12, 97, 1024, 720720, *(rng.randrange(1, 200_000) for _ in range(50))]:
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


def test_no_layout_names_the_user_count_and_the_nearest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A 4-layer model on 7 chips: 7 divides neither the heads nor the batch, and a pipeline needs a layer per
    stage (any split of the layers is allowed, so 7 chips of a 16-layer model do plan: pp 7)."""
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("name: tiny\nnum_layers: 4\nhidden_size: 256\nnum_heads: 4\nffn_hidden_size: 1024\n"
                    "vocab_size: 1000\n")
    assert main(["plan", "--model", str(tiny), "--num-chips", "7", "--seq-len", "512"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no parallel layout of 7 x h100-sxm" in err and "global batch 512" in err
    assert "pp at most the layers" in err and "the nearest counts that do: 6 or 8" in err and "14" not in err
    assert layout_counts(_sc(5)) == (4, 6)  # 16 layers: pp 5 of uneven stages is a layout
    assert main(["plan", "--num-chips", "7", "--json"]) == 0  # llama3-8b on 7 chips: 32 layers over pp 7


@pytest.mark.parametrize("argv", [["plan", "--num-chips", str(MAX_CHIPS + 1)],
                                  ["search", "--max-chips", str(MAX_CHIPS + 1)]])
def test_absurd_chip_counts_fail_fast(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "16,777,216" in capsys.readouterr().err


def test_min_chips_to_fit_is_a_valid_count_that_fits() -> None:
    big = _sc(2, chip="a100-40gb", model="llama3-70b")
    need = min_chips_to_fit(big)
    assert need is not None and valid_chip_count(need, big.cluster.chips_per_node) and fits(big, need)
    below = [c for c in range(3, need) if valid_chip_count(c, 8)]
    assert not any(fits(big, c) for c in below[-3:])  # the counts just below do not fit


def test_mixed_cost_bases_rank_only_comparable_costs() -> None:
    """mi300x has no cloud price: its cost is electricity only and must not win a cost ranking."""
    scs = [_sc(8), dataclasses.replace(_sc(8), cluster=dataclasses.replace(_sc(8).cluster,
                                                                           chip=get_chip("mi300x")))]
    by_cost = search(scs, objective="cost", top_k=50, space=SPACE)
    assert {c.chip for c in by_cost.ranked} == {"h100-sxm"} and {c.cost_basis for c in by_cost.ranked} == {"cloud"}
    assert all(c.cost_basis == "cloud" for c in by_cost.pareto)
    assert len(by_cost.notes) == 1 and "mi300x" in by_cost.notes[0] and "electricity only" in by_cost.notes[0]
    by_time = search(scs, objective="time", top_k=2000, space=SPACE)
    assert "electricity" in {c.cost_basis for c in by_time.ranked}  # still ranked by time
    alone = search(scs[1:], objective="cost", top_k=3, space=SPACE)  # one basis only: nothing to separate
    assert alone.notes == () and alone.ranked[0].chip == "mi300x"


def test_search_table_never_cuts_numbers() -> None:
    result = search([_sc(8)], objective="time", top_k=3, space=SPACE)
    console = Console(width=100, record=True, color_system=None)
    render_search(result, console)
    text = console.export_text()
    assert "…" not in text
    c = result.ranked[0]
    assert f"{c.cost_usd:,.0f}" in text and f"{c.mfu:.1%}" in text


def test_partial_strategy_flags_pin_and_the_search_fills_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    """`plan --sp` or `--offload-optimizer` alone used to fix every other degree at its default (tp 1,
    ZeRO 0, mb 1) and fail to fit; now each flag pins its own choice and the search chooses the rest."""
    import json

    for flags, check in ((["--sp"], lambda s: s["sp"] and s["tp"] > 1),
                         (["--offload-optimizer"], lambda s: s["offload_optimizer"]),
                         (["--tp", "8"], lambda s: s["tp"] == 8 and s["dp"] * s["pp"] * s["cp"] == 8)):
        assert main(["plan", *flags, "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert check(d["strategy"]) and d["strategy"]["chosen_by_planner"] is True
    # a whole strategy (tp, pp, zero, recompute, micro-batch given) is taken as given
    assert main(["plan", "--tp", "2", "--pp", "1", "--zero", "1", "--recompute", "full", "--micro-batch", "1",
                 "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["strategy"]
    assert (s["tp"], s["dp"], s["cp"], s["chosen_by_planner"]) == (2, 32, 1, False)
    # pins nothing satisfies: the flags' own rule is named (here dp x tp x pp != chips, cp not searched)
    assert main(["plan", "--num-chips", "64", "--tp", "8", "--pp", "2", "--dp", "2"]) == 2
    assert "!= num_chips" in capsys.readouterr().err
