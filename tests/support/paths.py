"""Where the tests find the repository and their data, wherever the test module lives."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the folder of pyproject.toml)."""
TESTS = ROOT / "tests"
DATA = TESTS / "data"
"""Test data files (tests/data)."""
