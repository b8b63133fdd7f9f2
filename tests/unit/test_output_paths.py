"""Output files (plots, Gantt charts, Chrome traces): an unwritable path is a one-line ConfigError naming the
flag and the path, checked before the work starts; a failure at write time leaves nothing behind; files get
the process umask's mode (mkstemp alone creates 0600)."""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from greentrain import files
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


# --- greentrain.files: every output whole or absent, all of a command's outputs or none, names confined ---

def _enospc(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_dev_full_is_a_full_disk_and_leaves_nothing(tmp_path: Path) -> None:
    """A writer that writes to /dev/full (the kernel answers ENOSPC) fails like a full disk would."""
    def to_dev_full(tmp: str) -> None:
        Path(tmp).write_text("x")
        with open("/dev/full", "w", encoding="utf-8") as f:
            f.write("y" * 10_000)
            f.flush()

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with pytest.raises(ConfigError, match="No space left on device"):
        files.write_atomic(tmp_path / "a.json", "--out", to_dev_full)
    assert list(tmp_path.iterdir()) == []


def test_batch_stages_all_then_renames(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("old")
    with files.AtomicBatch() as batch:
        batch.add_text(a, "--a", "new a")
        batch.add_text(b, "--b", "new b")
        assert a.read_text() == "old" and not b.exists()  # nothing visible before the commit
    assert a.read_text() == "new a" and b.read_text() == "new b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_batch_full_disk_on_the_second_output_leaves_neither(tmp_path: Path) -> None:
    a, b = tmp_path / "a.png", tmp_path / "b.html"
    batch = files.AtomicBatch()
    batch.add_text(a, "--plot", "png")

    def half_then_full(tmp: str) -> None:
        Path(tmp).write_text("<html>")
        _enospc()

    with pytest.raises(ConfigError) as info:
        batch.add(b, "--html", half_then_full)
    msg = _one_line(info.value, "--html", b)
    assert "No space left on device" in msg and f"{a}, staged before it, removed" in msg
    assert list(tmp_path.iterdir()) == []


def test_batch_rename_failure_says_what_was_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    batch = files.AtomicBatch()
    batch.add_text(a, "--a", "A")
    batch.add_text(b, "--b", "B")
    real = os.replace

    def replace(src: str, dst: str | Path) -> None:
        if Path(dst) == b:
            raise OSError(errno.EACCES, "Permission denied")
        real(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(ConfigError) as info:
        batch.commit()
    msg = _one_line(info.value, "--b", b)
    assert f"written: {a}" in msg and f"not written: {b}" in msg and "Permission denied" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # the staged b is removed


def test_all_or_none_defers_write_atomic_and_aborts_on_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), files.all_or_none():
        files.write_text_atomic(tmp_path / "x.json", "{}", "--trace")
        assert not (tmp_path / "x.json").exists()
        raise RuntimeError("the command failed after its first output")
    assert list(tmp_path.iterdir()) == []
    with files.all_or_none():
        files.write_json_atomic(tmp_path / "x.json", {"a": 1}, "--trace")
        with files.all_or_none():  # nested: joins the outer batch
            files.write_text_atomic(tmp_path / "y.txt", "y", "--y")
        assert not (tmp_path / "y.txt").exists()
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1} and (tmp_path / "y.txt").read_text() == "y"


@pytest.mark.parametrize("command, first, second", [
    ("simulate", ("--trace", "t.json"), ("--gantt", "g.png")),
    ("search", ("--plot", "s.png"), ("--html", "s.html")),
])
def test_cli_two_outputs_full_disk_leaves_none(command: str, first: tuple[str, str], second: tuple[str, str],
                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate step --trace T --gantt G`, `search --plot P --html H`: the disk fills after the first output is
    written, so neither file is left and the line names the one removed."""
    real = files._stage

    def stage(p: Path, write: Callable[[str], None], suffix: str) -> str:
        if p.name == second[1]:
            _enospc()
        return real(p, write, suffix)

    monkeypatch.setattr(files, "_stage", stage)
    argv = STEP if command == "simulate" else ["search", *SEARCH]
    assert main([*argv, first[0], str(tmp_path / first[1]), second[0], str(tmp_path / second[1])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"greentrain {command}: error: {second[0]}=") and "No space left on device" in err[-1]
    assert f"{first[1]}, staged before it, removed" in err[-1] and "Traceback" not in "".join(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../../../../X", "/etc/x", "a/b", "..", ".", "", " x", "a\nb", "a\\b", "x" * 201])
def test_names_from_files_never_leave_the_folder(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        files.confined(tmp_path, name, "name")
    assert "\n" not in str(info.value) and str(info.value).startswith("name=")


def test_a_symlinked_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "exp").symlink_to(tmp_path)
    with pytest.raises(ConfigError, match="is a link that leaves it"):
        files.confined(tmp_path / "out", "exp", "name")
    assert files.confined(tmp_path / "out", "tiny-summarize", "name") == tmp_path / "out" / "tiny-summarize"


def test_experiment_name_escaping_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    src = Path(__file__).resolve().parents[2] / "examples" / "tiny-summarize.yaml"
    text = src.read_text(encoding="utf-8").replace("name: tiny-summarize", "name: ../../../../X")
    exp = tmp_path / "a" / "b" / "c" / "d" / "x.yaml"
    exp.parent.mkdir(parents=True)
    exp.write_text(text, encoding="utf-8")
    monkeypatch.chdir(exp.parent)
    for action in ("plan", "run"):
        assert main(["experiment", action, str(exp)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "name='../../../../X'" in err and "may not leave it" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and not (exp.parent / "experiments").exists()


def test_fresh_deletes_only_in_an_experiment_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine"
    (out / "variants").mkdir(parents=True)
    (out / "variants" / "keep.txt").write_text("the user's")
    src = Path(__file__).resolve().parents[2] / "examples" / "tiny-summarize.yaml"
    assert main(["experiment", "run", str(src), "--out", str(out), "--fresh"]) == 2
    assert "is not an experiment's results folder" in capsys.readouterr().err
    assert (out / "variants" / "keep.txt").read_text() == "the user's"


def test_check_output_dir(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert files.check_output_dir(tmp_path / "new" / "deeper", "--out") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checked, not created
    for path, rule in ((tmp_path / "file", "it is a file"), (tmp_path / "file" / "sub", "cannot be created"),
                       (Path("/proc/greentrain-out"), "cannot write in")):
        with pytest.raises(ConfigError) as info:
            files.check_output_dir(path, "--out")
        assert rule in _one_line(info.value, "--out", path)


def test_proc_is_an_unwritable_folder_even_for_root() -> None:
    """Where chmod does not bind (CI runs as root), /proc still refuses new files: the check is the kernel's."""
    with pytest.raises(ConfigError, match="cannot write in /proc"):
        check_output_path("/proc/x.png", "--plot", (".png",))


def test_folder_lock_refuses_a_second_holder(tmp_path: Path) -> None:
    with files.folder_lock(tmp_path / "o", "--out", "greentrain track run"):
        with pytest.raises(ConfigError) as info, files.folder_lock(tmp_path / "o", "--out", "greentrain track run"):
            pass
        assert f"in use by another greentrain track run (pid {os.getpid()})" in str(info.value)
    with files.folder_lock(tmp_path / "o", "--out", "x"):  # released at the end of the block
        pass
