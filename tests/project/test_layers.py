"""The layers of docs/architecture.md hold in the code: every import that runs points to the same
layer or a lower one.

The table is read from the doc itself (its "Layers" table: layer, the packages and modules in it), so
the picture and the code cannot drift apart: move a module, or import upwards, and this fails naming
the file and line. The graph is the one the import-circle test builds (imports inside functions
count, ``if TYPE_CHECKING:`` ones do not).
"""

from __future__ import annotations

import re

from tests.project.test_import_graph import PACKAGE, SOURCES, import_graph, module_files
from tests.support.paths import ROOT

DOC = ROOT / "docs" / "architecture.md"


def doc_layers() -> dict[str, int]:
    """Component (``engine``, ``storage``, ``consolidation.worker``...) -> its layer number, from the
    rows ``| N name | `a`, `b` ... |`` of the doc's layer table."""
    layers: dict[str, int] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        row = re.match(r"^\|\s*(\d)\s+[^|]*\|(.*)\|\s*$", line)
        if row:
            for name in re.findall(r"`([\w.]+)`", row.group(2)):
                layers[name] = int(row.group(1))
    return layers


def layer_of(module: str, layers: dict[str, int]) -> tuple[str, int] | None:
    """The most specific component of the table that `module` belongs to, with its layer."""
    parts = module.split(".")[1:] or ["__init__"]
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in layers:
            return name, layers[name]
    return None


def test_the_doc_names_a_layer_for_every_module():
    layers = doc_layers()
    assert len(set(layers.values())) >= 4, "docs/architecture.md lost its layer table"
    unplaced = [name for name in module_files(SOURCES) if layer_of(name, layers) is None]
    assert not unplaced, f"modules in no layer of docs/architecture.md: {unplaced}"


def upward_imports(graph: dict[str, dict[str, int]], layers: dict[str, int]) -> list[str]:
    """Each import in `graph` whose target sits in a higher layer than its module, as a readable line."""
    upward = []
    for module, targets in graph.items():
        source = layer_of(module, layers)
        for target, line in targets.items():
            found = layer_of(target, layers) if target.startswith(PACKAGE) else None
            if source is not None and found is not None and found[1] > source[1]:
                upward.append(f"{module}:{line} ({source[0]}, layer {source[1]}) imports {target} "
                              f"({found[0]}, layer {found[1]})")
    return upward


def test_imports_point_to_the_same_layer_or_lower():
    upward = upward_imports(import_graph(module_files(SOURCES)), doc_layers())
    assert not upward, "imports against the layers of docs/architecture.md:\n" + "\n".join(upward)


def test_an_upward_import_is_reported():
    """The check can fail: storage importing the engine, and timeparse importing retrieval, are named;
    the engine importing storage is not."""
    layers = doc_layers()
    graph = {f"{PACKAGE}.storage.sqlite_store": {f"{PACKAGE}.engine": 12, f"{PACKAGE}.types": 3},
             f"{PACKAGE}.timeparse.parser": {f"{PACKAGE}.retrieval.ranking": 7},
             f"{PACKAGE}.engine": {f"{PACKAGE}.storage.base": 5}}
    found = upward_imports(graph, layers)
    assert len(found) == 2
    assert found[0].startswith(f"{PACKAGE}.storage.sqlite_store:12 (storage, layer 2) imports {PACKAGE}.engine")
    assert found[1].startswith(f"{PACKAGE}.timeparse.parser:7 (timeparse, layer 2)")
