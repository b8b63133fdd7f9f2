"""Core modules do not know the CLI (DESIGN.md; issue 17 item 5): their errors name fields (``strategy.pp``,
``constraints.max_chips``), never a flag; the CLI maps fields to flags (cli/fields.py, search/pins.py names)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from greentrain.cli.fields import fields_as_flags
from greentrain.cli.main import main
from greentrain.errors import ConfigError

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "greentrain"
FLAG = re.compile(r"(?<![\w-])--[a-z]")
COMMAND = re.compile(r"greentrain [\w-]+ --[\w-]+")  # naming the command that wrote a file is not asking for a flag
ERROR_CALLS = {"ConfigError", "InfeasibleError", "EmulationError", "require"}

# Files whose messages still name flags, each with who changes them (the suggested texts are in the issue 17
# item 5 notes); none left. Nothing may be added here.
KNOWN: dict[str, str] = {}


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _flag_messages(path: Path, name: str) -> list[str]:
    """``name:line`` of every error call in ``path`` whose arguments quote a flag (``--power-w``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if called in ERROR_CALLS and any(FLAG.search(COMMAND.sub("", s)) for a in node.args for s in _strings(a)):
                out.append(f"{name}:{node.lineno}")
    return out


def _core_files() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "cli"]


def test_core_errors_name_fields_not_flags() -> None:
    found = [m for p in _core_files() for m in _flag_messages(p, p.relative_to(PACKAGE).as_posix())]
    assert [m for m in found if m.split(":")[0] not in KNOWN] == []


def test_the_reader_finds_a_flag_in_an_error(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text('def f(v):\n    require(v > 0, "--max-chips", v, "must be > 0")\n'
                   '    raise ConfigError("chip", v, f"give --power-w or {v}")\n'
                   '    raise ConfigError("strategy.pp", v, "must divide the layers (pp-1 stages)")\n'
                   '    raise ConfigError("measured", v, "is a plan (greentrain plan --json)")\n')
    assert _flag_messages(src, "x.py") == ["x.py:2", "x.py:3"]


def test_the_cli_maps_fields_to_flags() -> None:
    with pytest.raises(ConfigError, match=r"^--max-chips=9: must"), fields_as_flags({"constraints.max_chips":
                                                                                     "--max-chips"}):
        raise ConfigError("constraints.max_chips", 9, "must be small")
    with pytest.raises(ConfigError, match=r"^strategy\.pp=3"), fields_as_flags({"constraints.max_chips": "--x"}):
        raise ConfigError("strategy.pp", 3, "must divide")


def test_an_error_is_one_line_whatever_its_parts_hold() -> None:
    """A field, value or rule holding a line break (a YAML key "\\n") still gives a one-line message."""
    e = ConfigError("site.\n", "a\r\nb", "is not a\nknown key")
    assert "\n" not in str(e) and "\r" not in str(e)
    assert str(e) == "site.\\n='a\\r\\nb': is not a\\nknown key"


@pytest.mark.parametrize(("argv", "message"), [
    (["track", "--interval-s", "0", "--out", "{tmp}/o", "--", "true"], "--interval-s=0.0: must be in [0.001, 60] s"),
    (["track", "--cpu-tdp-w", "-1", "--out", "{tmp}/o", "--", "true"],
     "argument --cpu-tdp-w: '-1' must be in [0.5, 10,000] W"),
    (["track", "--summarize", "{tmp}"], "--summarize='{tmp}': holds no greentrain.jsonl"),
    (["offload", "heatmap", "--model", "llama3.2-1b", "--seq-len", "4096", "--device-gib", "20", "--host-gib", "80",
      "--json", "--measured", "{tmp}/empty.csv"], "--measured='{tmp}/empty.csv': has no rows"),
    (["offload", "plan", "--model", "llama3.2-1b", "--chip", "tpu-v4", "--seq-len", "4096", "--device-gib", "20",
      "--host-gib", "80"], "--host-link=None: chip tpu-v4 has none in the catalog; give one (e.g. pcie4)"),
])
def test_the_cli_shows_the_flag_for_a_core_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  argv: list[str], message: str) -> None:
    """measure/ and offload/ name fields (track.interval_s, out_dir, measured, cluster.host_link); the user of
    `greentrain track` and `greentrain offload` reads the flag they typed."""
    (tmp_path / "empty.csv").write_text("")
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message.format(tmp=tmp_path) in err and "\n" not in err and "Traceback" not in err
