"""Output files (plots, Gantt charts, Chrome traces): an unwritable path is a one-line ConfigError naming the
flag and the path, checked before the work starts; a failure at write time leaves nothing behind; files get
the process umask's mode (mkstemp alone creates 0600)."""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from greentrain.cli.main import main
from greentrain.errors import ConfigError
from greentrain.estimate.traffic.report import SweepPoint
from greentrain.report.files import check_output_path, check_plot_path, pyplot, save_figure, write_atomic
from greentrain.report.sim import check_gantt_path, write_gantt
from greentrain.report.trace import check_trace_path, write_chrome, write_json_atomic
from greentrain.sim.trace import Trace

TRAFFIC = ("--cluster_flop_rate 156e12 --num_experts 8 --batch_size 8192 --seq_len 8192 --dataset_size 13e12 "
           "--num_layers 120 --d_model 15360 --p_pipe 15 --p_data 16 --p_seq 1 --p_exp 8 --p_tensor_int 8 "
           "--p_tensor_ext 1")
SEARCH = ["--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048",
          "--tokens", "1e9", "--max-micro-batch", "2", "--no-interleave"]
STEP = ["simulate", "step", "--model", "llama3.2-1b", "--num-chips", "8", "--pp", "2", "--tp", "2", "--dp", "2",
        "--global-batch", "16", "--seq-len", "2048"]


def _trace() -> Trace:
    t = Trace()
    t.span("device/gpu0", "fwd", 0.0, 1e-3, "forward")
    t.span("link/gpu0.egress", "act", 1e-3, 2e-3, "p2p")
    return t


def _figure(path: Path, flag: str = "--plot") -> Path:
    fig, ax = pyplot().subplots()
    ax.plot([0, 1], [0, 1])
    return save_figure(fig, path, flag=flag)


def _sweep(path: Path) -> Path:
    from greentrain.report.seed001 import plot_sweep

    pts = [SweepPoint(dp=d, num_chips=8 * d, tx_bytes_per_chip=1e9 * d, rx_bytes_per_chip=2e9 * d) for d in (1, 2)]
    return plot_sweep(pts, path)


# (flag, what writes a file at the path, a suffix it accepts)
WRITERS: dict[str, tuple[str, Callable[[Path], object], str]] = {
    "save_figure": ("--plot", _figure, ".png"),
    "plot_sweep": ("--plot", _sweep, ".png"),
    "write_gantt": ("--gantt", lambda p: write_gantt(_trace(), p), ".png"),
    "write_chrome": ("--trace", lambda p: write_chrome(_trace(), p), ".json"),
    "write_json_atomic": ("--trace", lambda p: write_json_atomic(p, {"a": 1}), ".json"),
}
CHECKS: dict[str, Callable[[Path], Path]] = {
    "--plot": check_plot_path, "--gantt": check_gantt_path, "--trace": check_trace_path,
}


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder no file can be created in; skipped where the permission bits do not bind (root)."""
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        if os.access(d, os.W_OK):
            pytest.skip("permission bits do not bind (root with CAP_DAC_OVERRIDE); EACCES is simulated below")
        yield d
    finally:
        d.chmod(0o755)


def _one_line(exc: ConfigError, flag: str, path: Path) -> str:
    msg = str(exc)
    assert "\n" not in msg and exc.field == flag and exc.value == str(path)
    return msg


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writer_under_missing_folder_is_config_error(name: str, tmp_path: Path) -> None:
    flag, write, suffix = WRITERS[name]
    path = tmp_path / "no" / "such" / f"out{suffix}"
    with pytest.raises(ConfigError) as info:
        write(path)
    assert "does not exist" in _one_line(info.value, flag, path) or "No such file" in str(info.value)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writer_in_read_only_folder_is_config_error(name: str, read_only: Path) -> None:
    flag, write, suffix = WRITERS[name]
    path = read_only / f"out{suffix}"
    with pytest.raises(ConfigError) as info:
        write(path)
    assert "Permission denied" in _one_line(info.value, flag, path)
    assert list(read_only.iterdir()) == []


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writer_onto_a_directory_leaves_nothing_behind(name: str, tmp_path: Path) -> None:
    """The rename fails at write time (the target is a folder): ConfigError, no temporary file left."""
    flag, write, suffix = WRITERS[name]
    path = tmp_path / f"out{suffix}"
    path.mkdir()
    with pytest.raises(ConfigError) as info:
        write(path)
    assert "directory" in _one_line(info.value, flag, path).lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name] and list(path.iterdir()) == []


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_written_file_has_the_umask_mode(name: str, mask: int, tmp_path: Path) -> None:
    _, write, suffix = WRITERS[name]
    path = tmp_path / f"out{suffix}"
    old = os.umask(mask)
    try:
        write(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary or probe file left


@pytest.mark.parametrize("flag", sorted(CHECKS))
def test_checks_fail_before_any_work(flag: str, tmp_path: Path) -> None:
    check = CHECKS[flag]
    suffix = ".json" if flag == "--trace" else ".png"
    (tmp_path / "file").write_text("x")
    (tmp_path / f"dir{suffix}").mkdir()
    bad = {tmp_path / "missing" / f"a{suffix}": "does not exist",
           tmp_path / "file" / f"a{suffix}": "is not a directory",
           tmp_path / f"dir{suffix}": "is a directory",
           tmp_path / "a.gif": "must end in"}
    for path, rule in bad.items():
        with pytest.raises(ConfigError) as info:
            check(path)
        assert rule in _one_line(info.value, flag, path)
    assert check(tmp_path / f"ok{suffix}") == tmp_path / f"ok{suffix}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"dir{suffix}", "file"]  # the probe is removed


def test_unwritable_folder_is_refused_before_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the kernel answers for a folder one cannot write in (EACCES, as a non-root user sees it)."""
    def denied(*_: object, **__: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("greentrain.files.tempfile.mkstemp", denied)
    with pytest.raises(ConfigError, match=r"cannot write in .*Permission denied"):
        check_output_path(tmp_path / "x.png", "--plot")
    with pytest.raises(ConfigError, match="cannot be written: Permission denied"):
        write_atomic(tmp_path / "x.json", "--trace", lambda tmp: None)


def test_failing_writer_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("old")

    def fail(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(ConfigError, match="No space left on device"):
        write_atomic(path, "--trace", fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.json"]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("where", ["missing", "read_only"])
def test_cli_flags_exit_2_one_line(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "missing"
    if where == "read_only":
        folder.mkdir()
        folder.chmod(0o555)
        if os.access(folder, os.W_OK):
            pytest.skip("permission bits do not bind (root with CAP_DAC_OVERRIDE)")
    try:
        for args in (["search", *SEARCH, "--plot", f"{folder}/x.png"],
                     ["traffic", *shlex.split(TRAFFIC), "--plot", f"{folder}/x.png"],
                     [*STEP, "--trace", f"{folder}/t.json"], [*STEP, "--gantt", f"{folder}/g.png"]):
            flag = args[-2]
            assert f"{flag}='{folder}/" in _cli(args, capsys)
        assert not folder.exists() or list(folder.iterdir()) == []
    finally:
        if folder.exists():
            folder.chmod(0o755)


def test_cli_trace_is_world_readable_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    old = os.umask(0o022)
    try:
        assert main([*STEP, "--trace", str(path)]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and json.loads(path.read_text())["traceEvents"]
