"""A user's entity ledger as retrieval reads it: the entities and their compiled `NameMatcher`, kept a
short while per user so that a retrieval does not compile names (about 0.15 ms a name) every time,
and, read on first use, the user's mentions indexed both ways (`MentionIndex`), so that the hop
through the ledger reads no mention from the store per query.

One `LedgerCache` per store (`for_store`). An entry lives `ttl_s` seconds; when it expires the
entities are read again and the matcher is compiled again only when their names changed (mention
figures change with every message, names rarely); the mention index is read again with it. A write
that changes a user's entities can drop the entry at once with `invalidate(user_id)`; a write that
only adds mentions (recording a turn that names a known entity) passes them to `add_mentions`, which
puts them in the cached index (no read); without either the change is seen within `ttl_s`. An entry
is one user's: it is read with that user's id and only ever used for that user.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..person.matching import NameMatcher, normalise_name
from ..types import Entity, EntityMention

#: Seconds a user's entities are reused before they are read again.
TTL_S = 10.0
MAX_USERS = 2048


@dataclass(frozen=True)
class UserLedger:
    """One user's entities by id, with the matcher of their names."""

    user_id: str
    entities: Mapping[str, Entity]
    matcher: NameMatcher
    names: tuple[tuple[str, tuple[str, ...]], ...]  # (id, names) of every entity: what the matcher was built from
    by_name: Mapping[str, frozenset[str]]  # normalised name -> the ids of the entities it names
    speakers: frozenset[str]  # the entities recording made from a named speaker (metadata["speaker_role"])

    def __bool__(self) -> bool:
        return bool(self.entities)

    def speaker_entities(self, speakers: set[str]) -> set[str]:
        """The ids of the entities one of whose names is one of `speakers` (normalised), or that
        recording made from a named speaker (``metadata["speaker_role"]``)."""
        found = set(self.speakers)
        for speaker in speakers:
            if speaker:
                found |= self.by_name.get(normalise_name(speaker), frozenset())
        return found


#: (-said_at timestamp, entity id, memory id): the order the hop takes mentions in, newest first
MentionKey = tuple[float, str, str]


@dataclass(frozen=True)
class MentionIndex:
    """One user's mentions, both ways: the entities each memory names, and each entity's mentions
    newest first (ties by entity id, then memory id: the stores' `mention_order` read backwards by
    time)."""

    by_memory: Mapping[str, tuple[str, ...]]  # memory id -> entity ids
    by_entity: Mapping[str, tuple[MentionKey, ...]]

    @classmethod
    def of(cls, mentions: Iterable[EntityMention]) -> "MentionIndex":
        """The index of `mentions` (one user's)."""
        by_memory: dict[str, set[str]] = {}
        by_entity: dict[str, set[MentionKey]] = {}
        for m in mentions:
            by_memory.setdefault(m.memory_id, set()).add(m.entity_id)
            by_entity.setdefault(m.entity_id, set()).add((-m.said_at.timestamp(), m.entity_id, m.memory_id))
        return cls({mid: tuple(sorted(ids)) for mid, ids in by_memory.items()},
                   {eid: tuple(sorted(keys)) for eid, keys in by_entity.items()})

    def plus(self, mentions: Iterable[EntityMention]) -> "MentionIndex":
        """A new index with `mentions` added (a mention already held is not repeated)."""
        added = list(mentions)
        if not added:
            return self
        by_memory = dict(self.by_memory)
        by_entity = dict(self.by_entity)
        for m in added:
            by_memory[m.memory_id] = tuple(sorted({*by_memory.get(m.memory_id, ()), m.entity_id}))
            key = (-m.said_at.timestamp(), m.entity_id, m.memory_id)
            held = by_entity.get(m.entity_id, ())
            # the same (entity, memory) said at another time replaces the old key, as the store's upsert does
            kept = [k for k in held if k[2] != m.memory_id]
            by_entity[m.entity_id] = tuple(sorted([*kept, key]))
        return MentionIndex(by_memory, by_entity)

    def newest(self, entity_ids: Iterable[str]) -> list[MentionKey]:
        """The mentions of `entity_ids`, newest first (as `MentionIndex` orders them)."""
        found: list[MentionKey] = []
        for eid in dict.fromkeys(entity_ids):
            found.extend(self.by_entity.get(eid, ()))
        found.sort()
        return found


def user_ledger(user_id: str, entities: list[Entity], matcher: NameMatcher) -> UserLedger:
    """A `UserLedger` of `entities` (one user's) with their `matcher`."""
    by_name: dict[str, set[str]] = {}
    for entity in entities:
        for name in entity.names:
            by_name.setdefault(normalise_name(name), set()).add(entity.id)
    return UserLedger(user_id, {e.id: e for e in entities}, matcher, _names(entities),
                      {name: frozenset(ids) for name, ids in by_name.items()},
                      frozenset(e.id for e in entities if "speaker_role" in e.metadata))


def _names(entities: list[Entity]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((e.id, tuple(e.names)) for e in sorted(entities, key=lambda e: e.id))


class LedgerCache:
    """Per-user `UserLedger`s of one store, each reused for `ttl_s` seconds. Thread-safe."""

    def __init__(self, ttl_s: float = TTL_S, max_users: int = MAX_USERS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_users = max_users
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, UserLedger]] = {}
        self._indexes: dict[str, tuple[UserLedger, MentionIndex]] = {}  # valid with that very ledger entry

    def ledger(self, store: Any, user_id: str) -> UserLedger:
        """`user_id`'s entities and matcher, read from `store` when not cached (or expired)."""
        now = self._clock()
        with self._lock:
            cached = self._entries.get(user_id)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        entities = [e for e in store.entities(user_id) if e.user_id == user_id]
        names = _names(entities)
        if cached is not None and cached[1].names == names:
            matcher = cached[1].matcher  # same names: the compiled matcher still holds
        else:
            matcher = NameMatcher(entities)
        entry = user_ledger(user_id, entities, matcher)
        with self._lock:
            if len(self._entries) >= self.max_users and user_id not in self._entries:
                dropped = next(iter(self._entries))
                self._entries.pop(dropped)
                self._indexes.pop(dropped, None)
            self._entries[user_id] = (now, entry)
        return entry

    def mention_index(self, store: Any, ledger: UserLedger) -> MentionIndex:
        """The mentions of `ledger`'s user, indexed (`MentionIndex`): read from `store` once per
        ledger entry (`ledger`, as `ledger()` returned it), then kept up to date by `add_mentions`."""
        user_id = ledger.user_id
        with self._lock:
            held = self._indexes.get(user_id)
        if held is not None and held[0] is ledger:
            return held[1]
        index = MentionIndex.of(m for m in store.mentions(user_id) if m.user_id == user_id)
        with self._lock:
            current = self._entries.get(user_id)
            if current is not None and current[1] is ledger:
                self._indexes[user_id] = (ledger, index)
        return index

    def add_mentions(self, user_id: str, mentions: Iterable[EntityMention]) -> None:
        """Put `mentions` (stored just now for `user_id`, of entities the cached entry knows) in the
        cached index, if there is one; a mention of an entity it does not know drops the entry."""
        added = [m for m in mentions if m.user_id == user_id]
        if not added:
            return
        with self._lock:
            held = self._indexes.get(user_id)
            if held is None:
                return
            if any(m.entity_id not in held[0].entities for m in added):
                self._entries.pop(user_id, None)
                self._indexes.pop(user_id, None)
                return
            self._indexes[user_id] = (held[0], held[1].plus(added))

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget `user_id`'s entry (every user's with None): the next retrieval reads the store."""
        with self._lock:
            if user_id is None:
                self._entries.clear()
                self._indexes.clear()
            else:
                self._entries.pop(user_id, None)
                self._indexes.pop(user_id, None)


_CACHES: weakref.WeakKeyDictionary[Any, LedgerCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def for_store(store: Any) -> LedgerCache:
    """The `LedgerCache` of `store` (one per store object, made on first use, gone with the store).
    The engine calls ``for_store(store).invalidate(user_id)`` after it changes a user's entities."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = LedgerCache()
        return cache
