"""`search` says the fp8 recipe it ranked with, as `plan` does (issue 23): in its JSON (top-level precision, each
ranked and Pareto candidate's fp8_recipe) and in its table's title."""

from __future__ import annotations

import json

import pytest

from greentrain.cli.main import main

ARGS = ["search", "--model", "llama3.2-1b", "--chip", "h100-sxm", "--num-chips", "8", "--top", "2"]


@pytest.mark.parametrize("flags, recipe", [(["--precision", "fp8", "--fp8-recipe", "rowwise"], "rowwise"),
                                           (["--precision", "fp8"], None),  # the framework's (estimate/fp8.yaml)
                                           (["--precision", "bf16"], "")])
def test_search_json_and_title_say_the_recipe(capsys: pytest.CaptureFixture[str], flags: list[str],
                                              recipe: str | None) -> None:
    assert main([*ARGS, *flags, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["precision"] == flags[1]
    recipe = doc["ranked"][0]["estimate"]["fp8_recipe"] if recipe is None else recipe
    assert bool(recipe) == (flags[1] == "fp8")
    for c in doc["ranked"]:  # the same recipe as the candidate's full estimate (plan --json)
        assert c["fp8_recipe"] == c["estimate"]["fp8_recipe"] == recipe
    assert doc["pareto"] and all(c["fp8_recipe"] == recipe for c in doc["pareto"])
    assert main([*ARGS, *flags]) == 0
    title = capsys.readouterr().out.splitlines()[0].strip()
    assert title == "Top 2 strategies by time" + (f", fp8, {recipe} recipe" if recipe else "")
