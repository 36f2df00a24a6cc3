"""Where the tests find the repository and their data, wherever the test module lives."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the folder of pyproject.toml)."""
TESTS = ROOT / "tests"
DATA = TESTS / "data"
"""Test data files (tests/data)."""


def console_script() -> str:
    """The `memoryscope-plugins` command of this environment (what a user or an MCP client starts)."""
    script = Path(sys.executable).parent / "memoryscope-plugins"
    assert script.exists(), f"no console script at {script}: install the project (pip install -e .)"
    return str(script)
