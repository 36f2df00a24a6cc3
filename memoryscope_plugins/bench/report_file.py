"""A benchmark's report written to the file a user names, by export's rules (`safe_write`: a file is
replaced whole, a link written through, a device written directly, a folder refused)."""

from __future__ import annotations

import json
import os
from typing import Any

from ..safe_write import open_for_writing


def write_report(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (a report already formatted) to `path`; `ValidationError` when it cannot be."""
    with open_for_writing(path, what="report") as handle:
        handle.write(text)


def print_report(report: Any, path: str | os.PathLike[str] | None = None) -> None:
    """Print `report` as indented JSON and, with `path`, write the same text there (the bench
    scripts' ``--json``)."""
    text = json.dumps(report, indent=2)
    print(text)
    if path:
        write_report(path, text + "\n")
