"""What consolidation works with: a store, an embedder, a chat model, the settings and a narrow
search for related memories. Never the engine itself (the engine builds one of these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models.base import ChatModel, Embedder
from ..retrieval.related import RelatedLookup, RelatedSearch
from ..settings import Settings
from ..storage.base import MemoryStore


@dataclass(slots=True)
class ConsolidationBackend:
    """The parts consolidation and reflection use (see the module docstring)."""

    store: MemoryStore
    embedder: Embedder
    llm: ChatModel | None
    settings: Settings
    search: RelatedLookup

    @classmethod
    def of(cls, parts: Any) -> "ConsolidationBackend":
        """A backend from anything with ``store``, ``embedder``, ``llm`` and ``settings`` (e.g. a
        `MemoryScope`); its related-memory search is built over the same store and embedder."""
        if isinstance(parts, cls):
            return parts
        return cls(store=parts.store, embedder=parts.embedder, llm=parts.llm, settings=parts.settings,
                   search=RelatedSearch(parts.store, parts.embedder, parts.settings.retrieval))
