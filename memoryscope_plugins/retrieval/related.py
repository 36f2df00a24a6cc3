"""Existing memories related to new text: the narrow search interface consolidation uses.

Consolidation needs to ask "which of this user's memories are about the same thing as this text?"
and nothing else of the engine. `RelatedSearch` answers that over a store and an embedder with the
engine's own hybrid search (full text + vectors, fused as retrieval fuses them); it never scans a
user's memories in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

import numpy as np

from ..models.base import Embedder
from ..settings import RetrievalSettings
from ..storage.base import Candidate, MemoryFilter, MemoryStore, SearchRequest
from ..types import Memory, MemoryStatus, MemoryType
from .ranking import fuse

ACTIVE_ONLY = (MemoryStatus.ACTIVE,)
QUERY_CHARS = 2000  # a search query needs no more (the stored text is never cut)


@dataclass(frozen=True, slots=True)
class RelatedMemory:
    """A memory found for one text, with how it was found (raw channel scores)."""

    memory: Memory
    score: float  # fused
    cosine: float | None  # similarity of the vectors, when the vector channel found it
    shares_terms: bool  # the full-text channel found it (a shared, analysed term)


class RelatedLookup(Protocol):
    """What consolidation and reflection may ask of retrieval."""

    def related(self, user_id: str, texts: Sequence[str], *, types: tuple[MemoryType, ...], limit: int,
                statuses: tuple[MemoryStatus, ...] | None = ACTIVE_ONLY, exclude: Iterable[str] = (),
                vectors: np.ndarray | None = None) -> list[Memory]: ...

    def related_each(self, user_id: str, text: str, vector: np.ndarray, *, types: tuple[MemoryType, ...],
                     limit: int) -> list[RelatedMemory]: ...


class RelatedSearch:
    """`RelatedLookup` over a store and an embedder (see the module docstring)."""

    def __init__(self, store: MemoryStore, embedder: Embedder, settings: RetrievalSettings) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings

    def related(self, user_id: str, texts: Sequence[str], *, types: tuple[MemoryType, ...], limit: int,
                statuses: tuple[MemoryStatus, ...] | None = ACTIVE_ONLY, exclude: Iterable[str] = (),
                vectors: np.ndarray | None = None) -> list[Memory]:
        """Up to ``limit`` of the user's memories of ``types`` most related to ``texts``, best first
        (fused scores summed over the texts, so a memory related to several ranks first)."""
        if limit <= 0 or not texts:
            return []
        skip = set(exclude)
        texts = [text[:QUERY_CHARS] for text in texts]
        if vectors is None:
            vectors = self.embedder.embed(texts, kind="query")
        totals: dict[str, float] = {}
        found: dict[str, Memory] = {}
        for text, vector in zip(texts, vectors):
            for scored in fuse(self._candidates(user_id, text, vector, types, statuses, max(limit, 10)),
                               self.settings):
                memory = scored.memory
                if memory.id in skip:
                    continue
                totals[memory.id] = totals.get(memory.id, 0.0) + scored.score
                found[memory.id] = memory
        ranked = sorted(totals, key=lambda memory_id: totals[memory_id], reverse=True)
        return [found[memory_id] for memory_id in ranked[:limit]]

    def related_each(self, user_id: str, text: str, vector: np.ndarray, *, types: tuple[MemoryType, ...],
                     limit: int) -> list[RelatedMemory]:
        """The active memories most related to one text, best first, with their raw evidence."""
        if limit <= 0:
            return []
        candidates = self._candidates(user_id, text[:QUERY_CHARS], vector, types, ACTIVE_ONLY, max(limit, 10))
        by_id = {c.memory.id: c for c in candidates}
        out = []
        for scored in sorted(fuse(candidates, self.settings), key=lambda s: s.score, reverse=True)[:limit]:
            cand = by_id[scored.memory.id]
            out.append(RelatedMemory(memory=scored.memory, score=scored.score, cosine=cand.vector_score,
                                     shares_terms=bool(cand.text_score)))
        return out

    def _candidates(self, user_id: str, text: str, vector: np.ndarray | None, types: tuple[MemoryType, ...],
                    statuses: tuple[MemoryStatus, ...] | None, limit: int) -> list[Candidate]:
        flt = MemoryFilter(types=types, statuses=statuses)
        return self.store.search(SearchRequest(user_id=user_id, text=text, vector=vector, filter=flt, limit=limit))
