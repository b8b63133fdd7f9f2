"""A framework profile says which model-parallel axes it runs (efficiency.yaml `parallelisms`): the planner
never picks another, an explicit strategy on one is refused in one line, and --workers agrees with one process."""

from __future__ import annotations

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError, InfeasibleError
from greentrain.estimate.efficiency import PARALLEL_AXES, Profile, efficiency_for
from greentrain.estimate.step import estimate_step
from greentrain.parallel.strategy import Strategy
from greentrain.scenario import scenario_from_dict
from greentrain.search.engine import search
from greentrain.search.space import SearchSpace
from greentrain.search.workers import search_parallel

SCENARIO = {"model": "llama3-8b", "cluster": {"chip": "h100-sxm", "num_chips": 16},
            "workload": {"global_batch_size": 64, "seq_len": 4096, "train_tokens": 1e9}}


def test_profiles_name_their_axes() -> None:
    assert efficiency_for("h100-sxm", "megatron").parallelisms == PARALLEL_AXES
    assert "pp" not in efficiency_for("h100-sxm", "torchtune").parallelisms
    assert efficiency_for("h100-sxm", "ddp").parallelisms == ()
    assert efficiency_for("h100-sxm", "ddp").lacks(tp=2, pp=1, cp=4) == ("tp", "cp")


@pytest.mark.parametrize(("framework", "axes", "model"), [("torchtune", ("pp",), "llama3-8b"),
                                                           ("ddp", PARALLEL_AXES, "llama3.2-1b")])
def test_the_planner_picks_only_what_the_framework_runs(framework: str, axes: tuple[str, ...], model: str) -> None:
    sc = scenario_from_dict({**SCENARIO, "model": model})
    space = SearchSpace(max_micro_batch=1, interleave=False)
    res = search([sc], top_k=50, space=space, profile=Profile(framework=framework))
    assert res.ranked and res.num_feasible
    for c in (*res.ranked, *res.pareto):
        assert all(getattr(c.strategy, axis) == 1 for axis in axes), c.strategy.describe()
        assert framework != "ddp" or not c.strategy.offload_optimizer  # DDP steps where the parameters are
    # megatron on the same space reaches the axes this framework lacks
    wide = search([sc], top_k=50, space=space, profile=Profile(framework="megatron"))
    assert wide.num_candidates > res.num_candidates
    # the answer of two worker processes is the one-process answer
    two = search_parallel([sc], workers=2, top_k=50, space=space, profile=Profile(framework=framework))
    assert (two.num_candidates, two.num_feasible) == (res.num_candidates, res.num_feasible)
    assert [c.strategy for c in two.ranked] == [c.strategy for c in res.ranked]


def test_an_explicit_strategy_on_a_missing_axis_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    sc = scenario_from_dict(SCENARIO)
    with pytest.raises(InfeasibleError, match=r"torchtune framework has no pipeline parallelism \(pp\)"):
        estimate_step(sc, Strategy(dp=8, pp=2, zero=3), eff=efficiency_for("h100-sxm", "torchtune"))
    with pytest.raises(ConfigError, match=r"strategy\.tp.*ddp framework has no tensor parallelism"):
        search([sc], space=SearchSpace(tp=2), profile=Profile(framework="ddp"))
    argv = ["plan", "--model", "llama3-8b", "--chip", "h100-sxm", "--num-chips", "8", "--framework", "torchtune",
            "--pp", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()  # "it runs tp, cp beside data parallelism"
    assert len(err) == 1 and "--pp=2" in err[0] and "no pipeline parallelism" in err[0]  # the flag typed
    ddp = ["plan", "--model", "llama3.2-1b", "--chip", "h100-sxm", "--num-chips", "8", "--framework", "ddp"]
    assert main([*ddp, "--offload-optimizer"]) == 2
    assert "no optimizer offload" in capsys.readouterr().err


def test_what_would_fit_is_said_for_the_framework(capsys: pytest.CaptureFixture[str]) -> None:
    """DDP replicates 16 bytes per parameter: an 8B model fits on no count of 80 GB chips (the lightest
    choices of another framework, ZeRO-3 with offload, would fit on 24)."""
    argv = ["plan", "--model", "llama3-8b", "--chip", "h100-sxm", "--num-chips", "16", "--framework", "ddp"]
    assert main(argv) == 2
    assert "no count up to 2^20 fits" in capsys.readouterr().err


def test_pins_that_need_a_missing_axis_name_it(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--model", "llama3.2-1b", "--chip", "h100-sxm", "--num-chips", "8"]
    for argv, field in (([*base, "--framework", "torchtune", "--vpp", "2"], "--vpp=2"),  # the flags typed
                        ([*base, "--framework", "ddp", "--sp"], "--sp=True")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and field in err and "framework has no" in err


def test_no_layout_is_said_for_the_framework(capsys: pytest.CaptureFixture[str]) -> None:
    """8 chips, a batch of 4: megatron runs dp 4 x tp 2; DDP needs dp = 8 sequences, and says so."""
    base = ["plan", "--model", "llama3.2-1b", "--chip", "h100-sxm", "--num-chips", "8", "--global-batch", "4"]
    assert main([*base, "--framework", "megatron"]) == 0
    capsys.readouterr()
    assert main([*base, "--framework", "ddp"]) == 2
    err = capsys.readouterr().err
    assert "ddp framework runs data parallelism only" in err and "nearest counts that do: 4" in err
