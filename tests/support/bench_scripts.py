"""The scripts of bench/ loaded as modules, for their tests (bench/ is no package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT


def load_bench_script(file_name: str, module_name: str) -> ModuleType:
    """bench/`file_name` as the module `module_name`, registered in sys.modules (dataclasses
    resolve their module by name)."""
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "bench" / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
