"""attempts.csv after faults (#24): a row torn by a full disk or a kill mid-append is left out (its variant runs
again) and the next append starts on its own line; a row greentrain did not write, or a foreign header, is
refused in one line naming the file, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.experiment.attempts import Attempt, append_attempt, previous_attempts

DONE = Attempt(variant_id="base", attempt=1, config_hash="abc", status="done", wall_s=1.5, energy_j=2.0,
               emissions_kg_co2e=None, cost_usd=0.25, folder="variants/base")


def test_a_torn_row_is_left_out_and_the_next_append_starts_a_line(tmp_path: Path) -> None:
    append_attempt(tmp_path, DONE)
    with (tmp_path / "attempts.csv").open("a", encoding="utf-8") as f:
        f.write("bs32,1,def,do")  # the disk filled here
    assert previous_attempts(tmp_path) == [DONE]
    again = Attempt(variant_id="bs32", attempt=1, config_hash="def", status="done", wall_s=3.0, energy_j=4.0,
                    emissions_kg_co2e=0.1, cost_usd=None, folder="variants/bs32")
    append_attempt(tmp_path, again)
    assert previous_attempts(tmp_path) == [DONE, again]
    assert (tmp_path / "attempts.csv").read_text("utf-8").splitlines()[2] == "bs32,1,def,do"


def test_an_empty_file_or_a_last_cell_cut_short_is_no_attempt(tmp_path: Path) -> None:
    for torn in ("", "variant_id,attempt,conf"):  # the disk filled on the very first append
        (tmp_path / "attempts.csv").write_text(torn, encoding="utf-8")
        assert previous_attempts(tmp_path) == []
    append_attempt(tmp_path, DONE)  # over the torn header: the record starts again
    assert previous_attempts(tmp_path) == [DONE]
    with (tmp_path / "attempts.csv").open("a", encoding="utf-8") as f:
        f.write("bs32,1,def,done,3.0,4.0,,,variants/bs")  # every cell there, the folder cut short
    assert previous_attempts(tmp_path) == [DONE]


@pytest.mark.parametrize(("text", "named"), [
    ("variant_id,attempt\nbase,1\n", "header"),
    ("variant_id,attempt,config_hash,status,wall_s,energy_j,emissions_kg_co2e,cost_usd,folder\n"
     "base,one,abc,done,1,2,,,variants/base\n", ":2"),
    ("variant_id,attempt,config_hash,status,wall_s,energy_j,emissions_kg_co2e,cost_usd,folder\n"
     "base,1,abc,done,1,2,,,variants/base,extra\n", "more cells"),
    ("variant_id,attempt,config_hash,status,wall_s,energy_j,emissions_kg_co2e,cost_usd,folder\n"
     + "x" * 200_000 + ",1,abc,done,1,2,,,f\n", "field limit"),
])
def test_a_row_greentrain_did_not_write_is_refused(tmp_path: Path, text: str, named: str) -> None:
    (tmp_path / "attempts.csv").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=named) as e:
        previous_attempts(tmp_path)
    assert "attempts.csv" in str(e.value) and "\n" not in str(e.value)
