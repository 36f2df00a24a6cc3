"""No import circles at run time among our modules.

The graph has an edge A -> B for every ``import B`` / ``from B import x`` in A, at module level AND
inside functions (a lazy import still runs, only later), and ``from P import m`` also leads to the
submodule P.m. Imports under ``if TYPE_CHECKING:`` are left out: they never run. Importing a
submodule runs its parent packages' ``__init__`` first; that implied edge is left out, as import
tools do (every module would otherwise sit in a circle with the top package).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "memoryscope_plugins"
# where each of our packages' files live (pyproject maps memoryscope_plugins.adapters to adapters/)
SOURCES = {PACKAGE: ROOT / PACKAGE, f"{PACKAGE}.adapters": ROOT / "adapters"}


def module_files(sources: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name -> its file (a package is named by its __init__.py)."""
    found: dict[str, Path] = {}
    for prefix, folder in sources.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if any(part.startswith(".") for part in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((prefix, *parts))
            if name.startswith(f"{PACKAGE}.adapters.") and folder != sources.get(f"{PACKAGE}.adapters", folder):
                continue  # a development symlink memoryscope_plugins/adapters -> ../adapters: read once
            found[name] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that can run: everywhere (functions too) except under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the else branch runs
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for inner in ast.iter_child_nodes(node):
            visit(inner)

    visit(tree)
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported module of ours: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                # `from P import m` runs P's __init__ (an edge to P) unless P is a package this module
                # is inside (already imported before it) and every name is a submodule
                reads_package = not name.startswith(f"{base}.") or any(m not in modules for m in submodules)
                targets = ([base] if reads_package else []) + submodules
            for target in targets:
                if target in modules and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def describe(component: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    members = set(component)
    lines = [" <-> ".join(component)]
    for name in component:
        for target, line in sorted(graph[name].items()):
            if target in members:
                lines.append(f"    {modules[name].relative_to(ROOT)}:{line} imports {target}")
    return "\n".join(lines)


def test_our_modules_import_no_circle() -> None:
    modules = module_files(SOURCES)
    assert f"{PACKAGE}.engine" in modules and f"{PACKAGE}.adapters.langchain" in modules
    graph = import_graph(modules)
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(describe(c, graph, modules) for c in found)


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_sees_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "def helper():\n    from .cli import main\n    return main\n",
        "pkg/mid.py": "from pkg import low\n",
        "pkg/cli.py": "import pkg.mid\n\ndef main():\n    pass\n",
    })
    modules = module_files({"pkg": tmp_path / "pkg"})
    assert cycles(import_graph(modules)) == [["pkg.cli", "pkg.low", "pkg.mid"]]


def test_the_checker_leaves_out_type_checking_imports(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from typing import TYPE_CHECKING\nfrom . import b\n",
        "pkg/b.py": ("import typing\nif typing.TYPE_CHECKING:\n    from .a import X\nelse:\n    pass\n"
                     "def f():\n    return 1\n"),
    })
    modules = module_files({"pkg": tmp_path / "pkg"})
    graph = import_graph(modules)
    assert graph["pkg.a"] == {"pkg.b": 2} and graph["pkg.b"] == {}
    assert cycles(graph) == []


ADAPTERS = f"{PACKAGE}.adapters"


def layering_breaches(graph: dict[str, dict[str, int]], lower: str, upper: str) -> list[tuple[str, str, int]]:
    """(module, imported module, line) for every import of a module in `upper` (or `upper` itself)
    by a module of `lower` outside `upper`: the engine must not depend on what is built on it."""
    def inside(name: str, package: str) -> bool:
        return name == package or name.startswith(f"{package}.")

    return [(name, target, line) for name, edges in sorted(graph.items())
            if inside(name, lower) and not inside(name, upper)
            for target, line in sorted(edges.items()) if inside(target, upper)]


def test_the_engine_imports_no_adapter() -> None:
    modules = module_files(SOURCES)
    graph = import_graph(modules)
    breaches = layering_breaches(graph, PACKAGE, ADAPTERS)
    assert not breaches, "the engine imports adapters:\n" + "\n".join(
        f"    {modules[name].relative_to(ROOT)}:{line} imports {target}" for name, target, line in breaches)


def test_the_checker_sees_an_engine_module_importing_an_adapter(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/engine.py": "X = 1\n",
        "pkg/bench/__init__.py": "",
        "pkg/bench/qa.py": "def block():\n    from ..adapters._common import render\n    return render\n",
        "pkg/bench/ok.py": "from ..engine import X\n",
        "adapters/__init__.py": "",
        "adapters/_common.py": "from pkg.engine import X\n\ndef render():\n    return X\n",
    })
    modules = module_files({"pkg": tmp_path / "pkg", "pkg.adapters": tmp_path / "adapters"})
    graph = import_graph(modules)
    assert layering_breaches(graph, "pkg", "pkg.adapters") == [("pkg.bench.qa", "pkg.adapters._common", 2)]
