"""A user's entity ledger as retrieval reads it: the entities and their compiled `NameMatcher`, kept a
short while per user so that a retrieval does not compile names (about 0.15 ms a name) every time.

One `LedgerCache` per store (`for_store`). An entry lives `ttl_s` seconds; when it expires the
entities are read again and the matcher is compiled again only when their names changed (mention
figures change with every message, names rarely). A write that changes a user's entities can drop
the entry at once with `invalidate(user_id)`; without it the change is seen within `ttl_s`. An entry
is one user's: it is read with that user's id and only ever used for that user.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..person.matching import NameMatcher, normalise_name
from ..types import Entity

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
                self._entries.pop(next(iter(self._entries)))
            self._entries[user_id] = (now, entry)
        return entry

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget `user_id`'s entry (every user's with None): the next retrieval reads the store."""
        with self._lock:
            if user_id is None:
                self._entries.clear()
            else:
                self._entries.pop(user_id, None)


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
