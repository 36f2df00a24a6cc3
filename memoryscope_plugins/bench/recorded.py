"""A store of LoCoMo conversations recorded as turns, for the measurements that ask many
questions of the same conversations without an LLM (bench/context_coverage.py,
bench/ledger_retrieval.py)."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from ..engine import MemoryScope
from ..settings import Settings
from .locomo import Conversation, ingest


@contextmanager
def recorded_turns(conversations: Sequence[Conversation], db: Path | None, *,
                   prefix: str = "memoryscope-bench-") -> Iterator[MemoryScope]:
    """A `MemoryScope` on a SQLite store (consolidation off) holding `conversations`, each
    recorded as `bench locomo` records them ("turns" mode): into `db` once, reused when that file
    exists; into a temporary store (its directory named from `prefix`) when `db` is None."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        path = db or Path(tmp) / "coverage.db"
        fresh = not path.exists()
        settings = Settings()
        settings = settings.model_copy(update={
            "store": settings.store.model_copy(update={"backend": "sqlite", "path": path}),
            "consolidation": settings.consolidation.model_copy(update={"enabled": False})})
        with MemoryScope(settings) as memory:
            if fresh:
                for conv in conversations:
                    ingest(memory, conv, "turns")
            yield memory
