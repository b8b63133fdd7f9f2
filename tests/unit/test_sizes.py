"""Issue 17's goals on the source, read with ``ast`` (nothing imported): no module over MAX_MODULE_LINES lines
and no function or method over MAX_FUNCTION_LINES lines (from ``def`` to its last line, docstring included,
decorators not), in src/greentrain. No exceptions: none was over them when this test was written."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "greentrain"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _sizes(path: Path) -> tuple[int, list[tuple[str, int]]]:
    """The module's line count, and (name:line, lines) of every function in it (nested ones and methods too)."""
    text = path.read_text(encoding="utf-8")
    functions = [(f"{n.name}:{n.lineno}", (n.end_lineno or n.lineno) - n.lineno + 1)
                 for n in ast.walk(ast.parse(text, filename=str(path)))
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return len(text.splitlines()), functions


def _over(package: Path) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        name = str(path.relative_to(package.parent))
        lines, functions = _sizes(path)
        if lines > MAX_MODULE_LINES:
            out.append(f"{name}: {lines} lines (at most {MAX_MODULE_LINES})")
        out += [f"{name} {fn}: {n} lines (at most {MAX_FUNCTION_LINES})" for fn, n in functions
                if n > MAX_FUNCTION_LINES]
    return out


def test_no_module_or_function_over_the_limits() -> None:
    assert sum(1 for _ in PACKAGE.rglob("*.py")) > 100  # the walk sees the package
    assert _over(PACKAGE) == []


def test_the_check_finds_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    pkg = tmp_path / "greentrain"
    pkg.mkdir()
    lines = [f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES)]  # under a def line: 61 lines
    (pkg / "long_function.py").write_text("\n".join(["class A:", "    def f(self):", *lines]) + "\n")
    (pkg / "short.py").write_text("\n".join(["def g():", *lines[1:]]) + "\n")  # 60 lines: allowed
    (pkg / "long_module.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert _over(pkg) == ["greentrain/long_function.py f:2: 61 lines (at most 60)",
                          "greentrain/long_module.py: 401 lines (at most 400)"]
