"""The wheel ships every package of the source tree: pyproject lists packages by hand, so a new
subpackage missing from the list would install without it (the engine then fails to import)."""

from __future__ import annotations

import re

from tests.support.paths import ROOT


def _source_packages() -> set[str]:
    found = {"memoryscope_plugins"}
    for init in (ROOT / "memoryscope_plugins").rglob("__init__.py"):
        folder = init.parent.relative_to(ROOT)
        if "__pycache__" in folder.parts or folder.parts[:2] == ("memoryscope_plugins", "adapters"):
            continue  # adapters/ is mapped from its own folder, listed below
        found.add(".".join(folder.parts))
    if (ROOT / "adapters" / "__init__.py").exists():
        found.add("memoryscope_plugins.adapters")
    return found


def test_every_source_package_is_in_the_wheel() -> None:
    # read with a pattern: tomllib is 3.11+, and the project supports 3.10
    block = re.search(r"^packages = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text("utf-8"), re.M | re.S)
    assert block is not None, "pyproject.toml has no packages list"
    listed = set(re.findall(r'"([\w.]+)"', block.group(1)))
    assert _source_packages() - listed == set()
