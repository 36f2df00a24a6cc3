"""Existing memories related to new text, found with the engine's own search (never a full scan).

Each text is searched with both channels of the store (full text and vector), restricted to the
given memory types; the fused scores are summed over the texts, so a memory related to several of
them ranks first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from ..retrieval.ranking import fuse
from ..storage.base import MemoryFilter, SearchRequest
from ..types import Memory, MemoryStatus, MemoryType

if TYPE_CHECKING:
    from ..engine import MemoryScope

ACTIVE_ONLY = (MemoryStatus.ACTIVE,)
QUERY_CHARS = 2000  # a search query needs no more (the stored text is never cut)


def find_related(engine: "MemoryScope", user_id: str, texts: Sequence[str], *,
                 types: tuple[MemoryType, ...], limit: int, statuses: tuple[MemoryStatus, ...] | None = ACTIVE_ONLY,
                 exclude: Iterable[str] = (), vectors: np.ndarray | None = None) -> list[Memory]:
    """Up to ``limit`` of the user's memories of ``types`` most related to ``texts``, best first."""
    if limit <= 0 or not texts:
        return []
    skip = set(exclude)
    texts = [text[:QUERY_CHARS] for text in texts]
    if vectors is None:
        vectors = engine.embedder.embed(texts, kind="query")
    totals: dict[str, float] = {}
    found: dict[str, Memory] = {}
    flt = MemoryFilter(types=types, statuses=statuses)
    per_text = max(limit, 10)
    for text, vector in zip(texts, vectors):
        candidates = engine.store.search(SearchRequest(user_id=user_id, text=text, vector=vector, filter=flt,
                                                       limit=per_text))
        for scored in fuse(candidates, engine.settings.retrieval):
            memory = scored.memory
            if memory.id in skip:
                continue
            totals[memory.id] = totals.get(memory.id, 0.0) + scored.score
            found[memory.id] = memory
    ranked = sorted(totals, key=lambda memory_id: totals[memory_id], reverse=True)
    return [found[memory_id] for memory_id in ranked[:limit]]
