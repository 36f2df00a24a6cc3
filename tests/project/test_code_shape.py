"""The shape rules of the code, checked on the source: no function over 80 lines in the package and
the adapters, and no bench script reaching into the package's private names."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

MAX_FUNCTION_LINES = 80
PACKAGE = "memoryscope_plugins"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def long_functions(folders: list[Path], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``file:line name (n lines)`` for every function or method (nested ones too: each counts with
    its body) longer than `limit` lines, from its ``def`` to its last line."""
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > limit:
                        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                        found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def private_uses(source: str) -> list[str]:
    """Where a script uses a private name of the package: a private module or name imported from it,
    or a private attribute of anything but the script's own ``self``/``cls`` (an object the package
    made: ``run._context``, ``embedder._load()``). ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE:
            if any(map(_private, (node.module or "").split("."))):
                found.append(f"{node.lineno}: from {node.module} import ...")
            found += [f"{node.lineno}: from {node.module} import {alias.name}" for alias in node.names
                      if _private(alias.name)]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {alias.name}" for alias in node.names
                      if alias.name.split(".")[0] == PACKAGE and any(map(_private, alias.name.split(".")))]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda use: int(use.split(":", 1)[0]))


def test_no_function_in_the_package_or_the_adapters_is_longer_than_80_lines():
    too_long = long_functions([ROOT / PACKAGE, ROOT / "adapters"])
    assert not too_long, "split these into functions with one job each:\n" + "\n".join(too_long)


def test_no_bench_script_uses_a_private_name_of_the_package():
    found = [f"{path.relative_to(ROOT)}:{use}" for path in sorted((ROOT / "bench").rglob("*.py"))
             for use in private_uses(path.read_text(encoding="utf-8"))]
    assert not found, ("bench scripts use what the package may change at will; give them a public, "
                       "documented name instead:\n" + "\n".join(found))


def test_the_checks_find_what_they_are_for(tmp_path):
    script = ("from memoryscope_plugins.bench.qa import QARun, _language\n"
              "from memoryscope_plugins.adapters._common import MemoryBridge\n"
              "import memoryscope_plugins._hidden\n"
              "from scale_store import _percentiles\n"  # a bench script's own helper: not the package's
              "class Own:\n    def go(self):\n        return self._x, cls_free.__doc__\n"
              "run._context = lambda: None\nrun._judge(1)\n")
    assert private_uses(script) == ["1: from memoryscope_plugins.bench.qa import _language",
                                    "2: from memoryscope_plugins.adapters._common import ...",
                                    "3: import memoryscope_plugins._hidden",
                                    "8: run._context", "9: run._judge"]
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "m.py").write_text("def f():\n" + "    x = 1\n" * 80 + "\n\ndef g():\n    pass\n", encoding="utf-8")
    assert [line.split(" ", 1)[1] for line in long_functions([folder], 80)] == ["f (81 lines)"]
