"""Faults give one line and a clean exit status everywhere (cli/main.py): Ctrl-C 130, SIGTERM 143, a machine
failure (OSError) 1, a missing optional library 2 with the extra to install; an interrupted command leaves no
output, whole or half. `track` holds its --out folder; a full disk during `track` keeps the records so far;
`offload train` refuses host caps the machine does not have.

Full disks and unwritable folders are made without root's help: /proc refuses new files even to root, and
ENOSPC/EACCES are raised where the kernel would raise them (os.replace, the writer)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from greentrain import files
from greentrain.cli import main as cli_main
from greentrain.cli.main import main
from greentrain.errors import ConfigError

SLOW_COMMAND = textwrap.dedent("""
    import sys
    from greentrain.files import write_text_atomic

    def add_arguments(parser):
        parser.add_argument("out")

    def run(args):
        write_text_atomic(args.out, "the command's output", "out")  # staged until the command ends
        print("ready", flush=True)
        sys.stdin.read()  # blocks until the signal
        return 0
""")


@pytest.mark.parametrize("sig, status, word", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"),
                                               (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_signal_is_one_line_and_leaves_no_output(sig: int, status: int, word: str, tmp_path: Path) -> None:
    """A real process signalled while it runs: one line, 128 + the signal, its staged output removed. The test
    waits on the child's "ready" line (a pipe), not on time."""
    (tmp_path / "slowcmd.py").write_text(SLOW_COMMAND, encoding="utf-8")
    # Python keeps SIGINT ignored when it starts with it ignored (a background job of a non-interactive shell,
    # `nohup ... &`): the child takes Python's default handler, as an interactive terminal gives it
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from greentrain.cli import main as m; "
            "m.SUBCOMMANDS['slow'] = ('slowcmd', 'test'); sys.exit(m.main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "out.txt"
    p = subprocess.Popen([sys.executable, "-c", code, "slow", str(out)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        p.send_signal(sig)
        assert p.wait(timeout=60) == status
        assert p.stderr is not None
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()
    assert err.count("\n") == 1 and err.startswith(f"greentrain slow: {word}") and "Traceback" not in err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["slowcmd.py"]  # no output, no temporary file


def _fake_command(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """A subcommand `fake` whose run raises ``exc``."""
    module = types.ModuleType("greentrain_fake_command")

    def run(_: object) -> int:
        raise exc

    module.add_arguments = lambda parser: None  # type: ignore[attr-defined]
    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli_main.SUBCOMMANDS, "fake", (module.__name__, "test"))


@pytest.mark.parametrize("exc, line", [
    (OSError(errno.EIO, "Input/output error", "/data/x"), "Input/output error: /data/x"),
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    (PermissionError(errno.EACCES, "Permission denied", "/srv/out"), "Permission denied: /srv/out"),
    (MemoryError(), "out of memory"),
])
def test_machine_failure_while_working_is_one_line_exit_1(exc: BaseException, line: str,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _fake_command(monkeypatch, exc)
    assert main(["fake"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"greentrain fake: error: {line}")


def test_a_bug_is_still_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the user's and the machine's faults become one line; an ImportError of greentrain itself is a bug."""
    _fake_command(monkeypatch, ImportError("cannot import name 'x'", name="greentrain.nothing"))
    with pytest.raises(ImportError):
        main(["fake"])


def _plan_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["plan", "--model", "llama3.2-1b", "--num-chips", "8", "--json"]) == 0
    path = tmp_path / "plan.json"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("blocked, extra, argv", [
    ("matplotlib", "plot", ["report", "{plan}", "-o", "{tmp}/r.html"]),
    ("matplotlib", "plot", ["search", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16",
                            "--seq-len", "2048", "--tokens", "1e9", "--html", "{tmp}/s.html"]),
    ("matplotlib", "plot", ["search", "--model", "llama3.2-1b", "--num-chips", "8", "--global-batch", "16",
                            "--seq-len", "2048", "--tokens", "1e9", "--plot", "{tmp}/s.png"]),
    ("torch", "torch", ["offload", "train", "1", "1", "256", "tiny", "--device", "cpu"]),
    ("torch", "torch", ["emulate", "matmul", "--m", "64", "--n", "64", "--k", "64"]),
    ("transformers", "experiment", ["experiment", "run", "{example}", "--out", "{tmp}/e"]),
])
def test_light_install_names_the_extra(blocked: str, extra: str, argv: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The module is made unimportable (None in sys.modules, what `import` sees when it is not installed)."""
    example = Path(__file__).resolve().parents[3] / "examples" / "tiny-summarize.yaml"
    plan = _plan_json(tmp_path, capsys) if "{plan}" in argv else ""
    args = [a.format(plan=plan, tmp=tmp_path, example=example) for a in argv]
    for name in [m for m in sys.modules if m == blocked or m.startswith(blocked + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"greentrain[{extra}]" in err and "pip install" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["plan.json"] if plan else [])


def test_missing_extra_rule() -> None:
    assert cli_main.missing_extra(ImportError(name="matplotlib.pyplot")) == \
        'needs matplotlib, which is not installed: pip install "greentrain[plot]"'
    assert cli_main.missing_extra(ImportError(name="numpy")) == ""


# --- track: one run per folder, a full disk keeps what was written ---

def test_second_track_into_a_held_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    with files.folder_lock(out, "--out", "greentrain track run"):  # what a first `track` holds while it runs
        assert main(["track", "--no-hooks", "--out", str(out), "--", sys.executable, "-c", "pass"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is in use by another greentrain track run" in err
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # the second run wrote nothing


def test_full_disk_during_track_keeps_the_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """track.jsonl's writes fail after its first records (the disk fills): the command runs to its end, one
    line says what happened (exit 1), the records on disk stay whole and the outputs cover them."""
    from greentrain.measure import records

    real = records.JsonlWriter._flush_locked
    started = {"on_disk": False}

    def flush(self: records.JsonlWriter) -> None:  # the disk fills once the start record is on it (not after a
        if started["on_disk"]:  # fixed count of flushes: a slow machine can flush a sample first)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self)
        started["on_disk"] = self.path.is_file() and '"type":"start"' in self.path.read_text()

    monkeypatch.setattr(records.JsonlWriter, "_flush_locked", flush)
    out = tmp_path / "o"
    assert main(["track", "--no-hooks", "--out", str(out), "--json", "--", sys.executable, "-c", "pass"]) == 1
    cap = capsys.readouterr()
    assert cap.err.count("error:") == 1 and "No space left on device while writing" in cap.err
    assert "Traceback" not in cap.err
    m = json.loads((out / "measurement.json").read_text())
    assert any("No space left on device" in n for n in m["notes"]) and json.loads(cap.out)["run_id"] == m["run_id"]
    kept = [json.loads(x)["type"] for x in (out / "track.jsonl").read_text().splitlines()]  # every line whole
    assert kept[0] == "start" and "end" not in kept


def test_full_disk_at_track_outputs_says_how_to_recover(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    real = files._stage

    def stage(p: Path, write: Callable[[str], None], suffix: str) -> str:
        if p.name == "emissions.csv":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(p, write, suffix)

    monkeypatch.setattr(files, "_stage", stage)
    out = tmp_path / "o"
    # a fault of the machine, not bad input: 1 (as a full disk during the run), never 2
    assert main(["track", "--no-hooks", "--out", str(out), "--", sys.executable, "-c", "pass"]) == 1
    # the meters' fallback notices print once per process (measure/meters.py notice): whether this test's track
    # is the process's first depends on the order tests run in, so they are not the error's lines
    err = "".join(ln for ln in capsys.readouterr().err.splitlines(keepends=True) if not ln.startswith("greentrain: "))
    assert err.count("\n") == 1 and f"greentrain track --summarize {out}" in err
    assert sorted(p.name for p in out.iterdir()) == [".lock", "track.jsonl"]  # measurement.json removed too
    monkeypatch.setattr(files, "_stage", real)
    assert main(["track", "--summarize", str(out)]) == 0  # once there is room
    assert (out / "measurement.json").is_file() and (out / "emissions.csv").is_file()


def test_jsonl_writer_on_dev_full_never_raises(tmp_path: Path) -> None:
    if not Path("/dev/full").is_char_device():  # a regular file left by a rename over it is no full disk
        pytest.skip("no /dev/full device")
    from greentrain.measure.records import JsonlWriter

    w = JsonlWriter("/dev/full")
    w.append({"type": "start"})
    w.flush()
    w.append({"type": "sample"})
    w.close()
    assert w.error == "No space left on device"


# --- offload train: the host cap against the machine ---

def test_offload_train_refuses_a_host_cap_above_available_memory(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 002's `transformerDemo 80 20 16384 1` on a 24 GiB machine: refused before torch is imported."""
    from greentrain import units
    from greentrain.offload import launch

    monkeypatch.setattr(launch, "available_host_bytes", lambda: 22 * units.GIB)
    assert main(["offload", "train", "80", "20", "16384", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "offload.host_gib=80.0" in err and "(100.0 GiB)" in err and "22.0 GiB" in err


def test_available_host_bytes_reads_meminfo(tmp_path: Path) -> None:
    from greentrain.offload.config import OffloadCaps
    from greentrain.offload.launch import available_host_bytes, check_host_memory

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\n")
    assert available_host_bytes(meminfo) == 20000000 * 1024
    assert 0 < available_host_bytes(tmp_path / "none") < float("inf")  # os.sysconf's free pages
    caps = OffloadCaps.from_gib(device_gib=2, host_gib=8)
    assert check_host_memory(caps, "cuda", 9 * 2**30) == 8 * 2**30
    with pytest.raises(ConfigError, match="CPU-emulated device cap"):
        check_host_memory(caps, "cpu", 9 * 2**30)


def test_host_memory_cap_turns_an_overrun_into_memory_error() -> None:
    """Inside the cap an allocation past it fails in the process (no page is touched: the mapping is refused)."""
    import resource

    from greentrain.offload.launch import RUNTIME_SLACK_BYTES, host_memory_capped

    before = resource.getrlimit(resource.RLIMIT_DATA)
    with host_memory_capped(2**20), pytest.raises(MemoryError):
        bytearray(int(RUNTIME_SLACK_BYTES + 2**33))
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


@pytest.mark.slow  # a subprocess that imports matplotlib and searches: 7 s at load 7
def test_a_closed_stdout_still_writes_the_files(tmp_path: Path) -> None:
    """`greentrain search ... --plot P | head -1`: the reader leaves before the table is printed; the plot is
    still written (the command's files are committed), exit 0, no traceback."""
    plot = tmp_path / "s.png"
    p = subprocess.Popen([sys.executable, "-m", "greentrain.cli.main", "search", "--model", "llama3.2-1b",
                          "--num-chips", "8", "--global-batch", "16", "--seq-len", "2048", "--tokens", "1e9",
                          "--max-micro-batch", "2", "--plot", str(plot)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before the command prints anything: its first write meets a closed pipe
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err and plot.stat().st_size > 0
