"""The second hop through the entity ledger: the entities the best hits name and the question does
not lead to their best memories, without a second search.

"What does the person who moved to Boston do for a living?" finds "My friend Anna moved to Boston";
the ledger knows that this memory names Anna and which other memories name her, so "Anna works night
shifts as a nurse" is one lookup away. The hits' entities come from their mentions, read from the
user's mention index (`ledger_cache.MentionIndex`, cached with the ledger: no store read of
mentions per query); the speakers' own entities are left out (they are in every turn) and so are
the entities the question names (the first hop searched them already). Their mentions' memories
are ranked by their vectors' cosine to the query: the first hop's candidates carry it, and
only when they hold too few are others' vectors read by id (`store.vectors_of`). The best few not
shown yet join the context as extra lines, exactly as `second_hop.second_hop`'s do; the ranked
memories stay as they are.

Used when the user's ledger holds entities other than the speakers (`usable`); otherwise the
pipeline falls back to `second_hop.second_hop`'s full-text search.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from ..storage.base import Candidate, MemoryFilter, MemoryStore
from ..storage.filtering import matches
from ..types import Memory, MemoryStatus, ScoredMemory
from .ledger_cache import MentionIndex, UserLedger, for_store
from .neighbours import ShownMemories

#: The most memories per hop whose vectors are read from the store (newest mentions first).
MAX_READ = 64


def usable(ledger: UserLedger, speakers: set[str]) -> bool:
    """Whether `ledger` knows anything beyond the speakers' own names (what record time alone gives)."""
    return bool(ledger) and len(ledger.entities) > len(ledger.speaker_entities(speakers))


def hop_entities(ledger: UserLedger, index: MentionIndex, hits: Sequence[Memory], query: str,
                 speakers: set[str]) -> list[str]:
    """The ids of the entities `hits` name (best hit first) that `query` and the speakers do not."""
    if not hits:
        return []
    named = [index.by_memory.get(memory.id, ()) for memory in hits]
    if not any(named):
        return []  # the hits name nothing: no need to look at the question
    excluded = ledger.matcher.entities_in(query) | ledger.speaker_entities(speakers)
    found = dict.fromkeys(eid for ids in named for eid in ids)
    return [eid for eid in found if eid in ledger.entities and eid not in excluded]


def ledger_hop(chosen: Sequence[ScoredMemory], shown: Sequence[Memory], query: str, vector: np.ndarray | None,
               store: MemoryStore, ledger: UserLedger, *, user_id: str, flt: MemoryFilter, hits: int, limit: int,
               candidates: Sequence[Candidate] = (), index: MentionIndex | None = None,
               statuses: tuple[MemoryStatus, ...] | None = (MemoryStatus.ACTIVE,)) -> list[Memory]:
    """Up to `limit` memories naming an entity of the best `hits` of `chosen` that `query` does not
    name (see the module docstring), nearest the query first, leaving out what `chosen` and `shown`
    hold or repeat, within the first hop's filter `flt`. `index`: the user's mentions (by default
    those of `ledger_cache.for_store(store)`)."""
    if hits <= 0 or limit <= 0 or not chosen:
        return []
    if index is None:
        index = for_store(store).mention_index(store, ledger)
    hit_memories = [item.memory for item in chosen[:hits]]
    if not any(index.by_memory.get(memory.id) for memory in hit_memories):
        return []  # the hits name no entity (as `hop_entities` finds): no need to gather the speakers
    speakers = {c.memory.speaker for c in candidates if c.memory.speaker}
    speakers |= {item.memory.speaker for item in chosen if item.memory.speaker}
    entities = hop_entities(ledger, index, hit_memories, query, speakers)
    if not entities:
        return []
    pool = {c.memory.id: c for c in candidates}
    seen = ShownMemories([*(item.memory for item in chosen), *shown])
    ids = list(dict.fromkeys(mid for _, _, mid in index.newest(entities) if mid not in seen.ids))
    score = {mid: pool[mid].vector_score or 0.0 for mid in ids if mid in pool}
    # the vector channel took the memories nearest the query: one it did not take is farther than
    # every one it did, so the store is read only when the candidates hold too few
    near = sum(1 for mid in score if pool[mid].vector_score is not None)
    outside = [mid for mid in ids if mid not in pool][:MAX_READ] if near < limit + 5 else []
    if outside and vector is not None:
        query_vector = np.asarray(vector, dtype=np.float32)
        for mid, row in store.vectors_of(user_id, outside).items():
            score[mid] = float(np.dot(np.asarray(row, dtype=np.float32), query_vector))
    best = sorted((mid for mid in [*score, *(m for m in outside if m not in score)]),
                  key=lambda mid: score.get(mid, -1.0), reverse=True)[:limit + 5]
    memories = {mid: pool[mid].memory for mid in best if mid in pool}
    missing = [mid for mid in best if mid not in memories]
    if missing:
        memories.update((m.id, m) for m in store.get(user_id, missing) if m.user_id == user_id)
    ordered: Iterable[Memory] = (memories[mid] for mid in best if mid in memories and matches(memories[mid], flt))
    return seen.take_new(ordered, statuses, limit)
