"""The package's layering (DESIGN.md, "Layout"), checked on the source without importing it.

Dependencies point downward: ``cli -> report -> (experiment | calibrate) -> (estimate | search | sim | emulate |
measure | offload) -> (model, hardware, parallel, footprint) -> results -> units``. Every import is read with ``ast``
(lazy imports inside functions included), so a module that is never imported by a test is checked too.
A module may import its own layer or any layer below; never one above; no import cycle, not even one through
``if TYPE_CHECKING:`` blocks (a helper types what it reads of a caller with a ``typing.Protocol``); only report/
imports Rich or matplotlib.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "greentrain"

# Layers from the bottom up. A unit is a subpackage or a root module of greentrain; "greentrain" is the
# package face (__init__.py) and "auto" the face kept for `import greentrain.auto`: both sit on top and
# nothing inside the package may import them. Root modules are placed by what they describe: units, errors,
# the version, the YAML/JSON reader, the output-file writer and num (a float or a column) are leaves;
# results/ (every result kind's typed view, its schema version and codec) sits just above them so that every
# producer and reader can use it; Workload is part of the data model; Scenario joins Model + Cluster +
# Strategy + Workload + Site.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"units", "errors", "_version", "config", "files", "num"}),
    frozenset({"results"}),
    frozenset({"model", "hardware", "parallel", "footprint", "workload"}),
    frozenset({"scenario"}),
    frozenset({"estimate", "search", "sim", "emulate", "measure", "offload"}),
    frozenset({"experiment", "calibrate"}),
    frozenset({"report"}),
    frozenset({"cli"}),
    frozenset({"greentrain", "auto"}),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}

# Upward imports that exist today, each with who removes it (and then deletes its line); none left. Nothing may be
# added here.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}

# Modules outside report/ that still import Rich or matplotlib, each with who moves it (issue 17: only
# report/ draws; cli/ prints Rich only through report/console.py and the report/ renderers); none left. Nothing
# may be added here.
KNOWN_DRAWING: dict[str, str] = {}
DRAWING_LIBRARIES = ("rich", "matplotlib")


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # importing module, e.g. greentrain.cli.search
    target: str  # imported module (greentrain.x.y) or top-level library name
    line: int
    type_only: bool  # inside `if TYPE_CHECKING:`


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return inside


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports_of(name: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    type_only = _type_checking_nodes(tree)
    modules = _modules()
    for node in ast.walk(tree):
        tc = id(node) in type_only
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, _owning_module(alias.name, modules), node.lineno, tc)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path, node)
            for alias in node.names:
                full = f"{base}.{alias.name}"  # `from greentrain.report import footprint` names a module
                yield Import(name, full if full in modules else _owning_module(base, modules), node.lineno, tc)


def _owning_module(target: str, modules: dict[str, Path]) -> str:
    """The module an import loads: greentrain modules by their dotted name, other libraries by their top name."""
    if not target.startswith("greentrain"):
        return target.split(".")[0]
    while target not in modules and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


@cache
def _all_imports() -> tuple[Import, ...]:
    return tuple(i for name, path in _modules().items() for i in _imports_of(name, path))


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _internal(imp: Import) -> bool:
    return imp.target.startswith("greentrain") and _unit(imp.source) != _unit(imp.target)


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _modules()}
    assert units - set(RANK) == set(), "place the new package or root module in LAYERS"


def test_no_upward_import() -> None:
    upward = [f"{i.source}:{i.line} imports {i.target} ({_unit(i.source)} is below {_unit(i.target)})"
              for i in _all_imports()
              if _internal(i) and RANK[_unit(i.source)] < RANK[_unit(i.target)]
              and (i.source, i.target) not in KNOWN_UPWARD]
    assert upward == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def _graph(key: str, type_only: bool = False) -> dict[str, set[str]]:
    """Import edges between modules or packages; ``type_only`` adds the ``if TYPE_CHECKING:`` imports."""
    edges: dict[str, set[str]] = {m: set() for m in _modules()} if key == "module" else {}
    for i in _all_imports():
        if (i.type_only and not type_only) or not i.target.startswith("greentrain") \
                or (i.source, i.target) in KNOWN_UPWARD:
            continue  # a known upward import is reported by test_no_upward_import, not twice as a cycle
        a, b = (i.source, i.target) if key == "module" else (_unit(i.source), _unit(i.target))
        if a != b:
            edges.setdefault(a, set()).add(b)
            edges.setdefault(b, set())
    return edges


@pytest.mark.parametrize("key", ["module", "package"])
def test_no_import_cycle(key: str) -> None:
    """No cycle between modules, nor between packages (a cycle through `if TYPE_CHECKING:` only is allowed:
    it never runs). Lazy imports inside functions count: they are dependencies all the same."""
    assert _cycles(_graph(key)) == []


@pytest.mark.parametrize("key", ["module", "package"])
def test_no_import_cycle_even_type_only(key: str) -> None:
    """Nor a cycle through `if TYPE_CHECKING:` imports: a module that needs only some attributes of a caller's
    type states them in a Protocol instead of importing the caller (sim/planner.py, model/mla.py)."""
    assert _cycles(_graph(key, type_only=True)) == []


def test_type_only_imports_make_edges() -> None:
    """The strict graph holds the type-only edges that the runtime graph leaves out (else the test above
    could not fail)."""
    type_only = {(i.source, i.target) for i in _all_imports() if i.type_only and i.target in _modules()
                 and i.source != i.target}
    assert type_only, "no type-only import of a greentrain module left to check"
    strict, runtime = _graph("module", type_only=True), _graph("module")
    assert all(b in strict[a] for a, b in type_only)
    assert any(b not in runtime[a] for a, b in type_only)


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_only_report_draws() -> None:
    """Rich and matplotlib are imported only in report/ (report/files.py holds the lazy pyplot)."""
    drawing = sorted({i.source for i in _all_imports()
                      if i.target in DRAWING_LIBRARIES and _unit(i.source) != "report"} - set(KNOWN_DRAWING))
    assert drawing == []


def test_nothing_imports_the_cli_or_the_faces() -> None:
    """No module imports the CLI (DESIGN.md), and none imports the package face or greentrain.auto (the face
    pulls in torch through Tracker; greentrain.auto installs global hooks)."""
    def bad(i: Import) -> bool:
        face = i.target in ("greentrain", "greentrain.auto")
        cli = i.target.startswith("greentrain.cli") and not i.source.startswith("greentrain.cli")
        return (face or cli) and (i.source, i.target) not in KNOWN_UPWARD

    assert [f"{i.source}:{i.line} imports {i.target}" for i in _all_imports() if bad(i)] == []


def test_the_import_reader_sees_lazy_relative_and_type_only_imports(tmp_path: Path) -> None:
    """The reader itself: an import inside a function, a relative one and a type-only one are all found."""
    pkg = tmp_path / "greentrain" / "x"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    mod = pkg / "m.py"
    mod.write_text("from typing import TYPE_CHECKING\nfrom . import n\nif TYPE_CHECKING:\n    import rich\n"
                   "def f():\n    import matplotlib.pyplot\n")
    found = {(i.target, i.type_only) for i in _imports_of("greentrain.x.m", mod)}
    assert {("rich", True), ("matplotlib", False)} <= found
    relative = ast.parse("from . import n").body[0]
    assert isinstance(relative, ast.ImportFrom) and _resolve("greentrain.x.m", mod, relative) == "greentrain.x"
    assert _resolve("greentrain.x", pkg / "__init__.py", relative) == "greentrain.x"
