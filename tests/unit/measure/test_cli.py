"""`greentrain track` (child exit status, hooks through GREENTRAIN_AUTO); `greentrain compare` is tested in
tests/unit/report/test_compare_typed.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from greentrain.cli.main import main

_SCRIPT = """
import sys, torch
sys.path.insert(0, {here!r})
from tiny_gpt import GPT, train_step
m = GPT(d=32, layers=1, heads=2, seq=16); opt = torch.optim.SGD(m.parameters(), lr=1e-3)
idx = torch.randint(0, 512, (2, 16))
for _ in range(4):
    train_step(m, opt, idx)
sys.exit(3)
"""


def test_track_passes_exit_status_and_counts_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT.format(here=str(Path(__file__).parent)))
    out = tmp_path / "out"
    code = main(["track", "--grid-g-per-kwh", "50", "--out", str(out), "--json", "--", sys.executable,
                 str(script)])
    assert code == 3
    data = json.loads((out / "measurement.json").read_text())
    assert data["num_steps"] == 4 and data["status"] == "exit 3"
    assert data["tokens"] == 4 * 32 and data["flop_per_step"] > 0 and data["cpu_energy_j"] > 0
    assert data["emissions_kg_co2e"] > 0 and {m["name"] for m in data["modules"]} >= {"blocks.0", "head"}
    assert json.loads(capsys.readouterr().out)["num_steps"] == 4


def test_track_json_stdout_is_only_json(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """With --json the command's own stdout goes to stderr, so stdout parses as JSON."""
    code = main(["track", "--no-hooks", "--out", str(tmp_path / "o"), "--json", "--", sys.executable, "-c",
                 "print('hello from the script')"])
    out, err = capfd.readouterr()
    assert code == 0 and json.loads(out)["status"] == "ok" and "hello from the script" in err


def test_track_summarize_an_earlier_track_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["track", "--no-hooks", "--out", str(out), "--", sys.executable, "-c", "pass"]) == 0
    (out / "measurement.json").unlink()
    capsys.readouterr()
    assert main(["track", "--summarize", str(out), "--region", "fr", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["region"] == "FRA" and data["status"] == "ok" and (out / "measurement.json").is_file()


@pytest.mark.parametrize("argv, text", [(["--pue", "0.5"], "pue"), ([], "command"),
                                        (["--depth", "zero"], "--depth"), (["--cpu-tdp-w", "-5"], "--cpu-tdp-w"),
                                        (["--region", "fr", "--grid-g-per-kwh", "5"], "not both"),
                                        (["--", "no-such-command-xyz"], "not found"),
                                        (["--pue", "nan"], "--pue"),
                                        (["--interval-s", "1e9"], "--interval-s=1000000000.0: must be in [0.001, 60]")])
def test_track_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], text: str) -> None:
    marker = tmp_path / "ran"
    cmd = [] if text in ("command", "not found") else ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    assert main(["track", "--out", str(tmp_path / "o"), *argv, *cmd]) == 2
    err = capsys.readouterr().err
    assert text in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists() and not marker.exists()  # nothing ran, nothing written


def test_track_out_must_be_a_writable_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    for out, rule in ((tmp_path / "file", "it is a file"), (tmp_path / "file" / "sub", "cannot be created")):
        assert main(["track", "--out", str(out), "--", sys.executable, "-c", "pass"]) == 2
        err = capsys.readouterr().err
        assert "--out" in err and rule in err and err.count("\n") == 1


def test_two_track_runs_into_one_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 3: each `track` run into one folder is its own run (run id, one emissions.csv row) and the
    first run's records are kept."""
    out = tmp_path / "out"
    ids = []
    for _ in range(2):
        assert main(["track", "--no-hooks", "--grid-g-per-kwh", "50", "--out", str(out), "--json", "--",
                     sys.executable, "-c", "pass"]) == 0
        ids.append(json.loads(capsys.readouterr().out)["run_id"])
    rows = (out / "emissions.csv").read_text().splitlines()
    assert len(rows) == 3 and ids[0] != ids[1] and ids[0] in rows[1] and ids[1] in rows[2]
    assert (out / "track.jsonl").read_text().count('"type":"start"') == 2


def test_merge_counts_only_the_steps_of_the_last_run(tmp_path: Path) -> None:
    """A steps file left by an earlier run (another run id, or more ranks) is not counted in this one."""
    from greentrain.measure.track import merge

    def records(run_id: str, steps: int, t_s: float) -> str:
        recs = [{"type": "start", "run_id": run_id, "world_size": 1}]
        recs += [{"type": "step", "t_s": 0.1 * (i + 1), "step": i, "step_time_s": 0.1, "tokens": 32.0}
                 for i in range(steps)]
        recs += [{"type": "sample", "t_s": t_s, "cpu_energy_j": 10.0}, {"type": "end", "t_s": t_s, "status": "ok"}]
        return "".join(json.dumps(r) + "\n" for r in recs)

    (tmp_path / "track.jsonl").write_text(records("A", 0, 9.0) + records("B", 0, 1.0))
    (tmp_path / "steps.jsonl").write_text(records("A", 100, 9.0) + records("B", 2, 1.0))
    (tmp_path / "steps.rank1.jsonl").write_text(records("A", 100, 9.0))  # a 2-rank first run
    m = merge(tmp_path, None)
    assert m.run_id == "B" and m.num_steps == 2 and m.tokens == 64 and m.duration_s == 1.0 and m.world_size == 1
