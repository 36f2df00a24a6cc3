"""Settings and an engine from the command-line options every subcommand shares (``--config``, ``--store``).

The lower layer of the command line: `cli.main` and `server.cli` both use it, so neither imports the other.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine import MemoryScope
    from ..settings import Settings


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings file named by ``--config`` (else the environment), with ``--store`` as the SQLite file."""
    from ..settings import Settings
    settings = Settings.load(args.config) if args.config else Settings()
    if args.store:
        settings = settings.model_copy(update={"store": settings.store.model_copy(
            update={"backend": "sqlite", "path": Path(args.store)})})
    return settings


def engine_from_args(args: argparse.Namespace, **kwargs: Any) -> MemoryScope:
    """An engine on `settings_from_args`; `kwargs` go to `MemoryScope` (models, a store)."""
    from ..engine import MemoryScope
    return MemoryScope(settings_from_args(args), **kwargs)
