"""The entity ledger and the profile in the Elasticsearch store: three indices beside the memories
(``<prefix>-entities``, ``<prefix>-mentions``, ``<prefix>-profile``), created when the store opens.

Writes are bulk items added to the same bulk request as the call's memories and messages
(`ElasticsearchLedger.ops`), so they share its all-or-nothing handling: everything is checked
before the request (no id of another user; every mention's memory and entity the user's, counting
the call's own memories and entities), and a failed item undoes the rest. The mention figures
are computed here from the mentions (`ledger_records.figures_of`) on their exact ISO times.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from elasticsearch import ApiError, ConflictError, NotFoundError, TransportError

from ..errors import StoreError
from ..types import Entity, EntityMention, Memory, ProfileValue
from . import ledger_records as lr
from .base import LedgerChanges, LedgerEdit
from .timecodes import epoch_microseconds

if TYPE_CHECKING:  # pragma: no cover
    from .elasticsearch_store import ElasticsearchStore

_STORED = {"type": "keyword", "index": False, "doc_values": False}
_KEY = {"type": "keyword"}
ENTITY_PROPERTIES: dict[str, Any] = {
    "key": _KEY, "id": _KEY, "user_id": _KEY, "name": _STORED, "kind": _KEY, "aliases": _STORED,
    "created_at": _STORED, "updated_at": _STORED, "metadata": _STORED,
}
MENTION_PROPERTIES: dict[str, Any] = {
    "key": _KEY, "entity_id": _KEY, "memory_id": _KEY, "user_id": _KEY, "said_at": _STORED, "event_at": _STORED,
    "counted": {"type": "boolean"}, "said_us": {"type": "long"},
}
PROFILE_PROPERTIES: dict[str, Any] = {
    "key": _KEY, "id": _KEY, "user_id": _KEY, "profile_key": _KEY, "value": _STORED, "valid_from": _STORED,
    "valid_to": _KEY, "source_ids": _STORED, "set_by": _KEY, "superseded_by": _KEY, "created_at": _STORED,
    "updated_at": _STORED,
}
# the profile's `key` column is kept as the field `profile_key`: `key` is every ledger document's own id
_PROFILE_FIELDS = tuple("profile_key" if c == "key" else c for c in lr.PROFILE_COLUMNS)
KINDS = ("entities", "mentions", "profile")
_PAGE = 1000
EDIT_LOCK_TTL_S = 30.0  # an edit lock older than this was left by a crashed process: taken over
EDIT_LOCK_WAIT_S = 60.0  # how long an edit waits for the lock before StoreError


def doc_key(*parts: str) -> str:
    """The document id of one id (a memory's, an entity's ...) or of several (a mention's entity
    and memory). Elasticsearch ids are at most 512 bytes; longer ids are hashed (the document's
    fields keep them). Ids that start with "h:" are hashed too, so no id can name another id's
    hashed document (a user id "h:<sha256 of a long id>" would otherwise share that user's lease)."""
    text = parts[0] if len(parts) == 1 else json.dumps(list(parts), ensure_ascii=False)
    if len(parts) == 1 and len(text.encode("utf-8")) <= 500 and not text.startswith("h:"):
        return text
    return "h:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _entity_source(entity: Entity) -> dict[str, Any]:
    return {"key": doc_key(entity.id), **dict(zip(lr.ENTITY_COLUMNS, lr.entity_values(entity)))}


def _mention_source(mention: EntityMention) -> dict[str, Any]:
    return {"key": doc_key(mention.entity_id, mention.memory_id), **dict(zip(lr.MENTION_COLUMNS,
                                                                             lr.mention_values(mention))),
            "said_us": epoch_microseconds(mention.said_at)}


def _profile_source(value: ProfileValue) -> dict[str, Any]:
    return {"key": doc_key(value.id), **dict(zip(_PROFILE_FIELDS, lr.profile_row(value)))}


class ElasticsearchLedger:
    """The ledger's indices of one store; uses the store's client calls and bulk handling."""

    def __init__(self, store: ElasticsearchStore) -> None:
        self.store = store
        self.index = {kind: f"{store.prefix}-{kind}" for kind in KINDS}

    def properties(self) -> dict[str, dict[str, Any]]:
        return {self.index["entities"]: ENTITY_PROPERTIES, self.index["mentions"]: MENTION_PROPERTIES,
                self.index["profile"]: PROFILE_PROPERTIES}

    # -- reading documents -------------------------------------------------------------------
    def _mget(self, kind: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not keys:
            return {}
        docs = self.store._call(self.store.es.mget, index=self.index[kind], ids=list(dict.fromkeys(keys)))["docs"]
        return {d["_id"]: d for d in docs if d.get("found")}

    def _hits(self, kind: str, filters: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for hits in self.store._scan(self.index[kind], {"bool": {"filter": filters}}, [{"key": "asc"}],
                                     page=_PAGE):
            for hit in hits:
                yield hit

    @staticmethod
    def _user(user_id: str) -> dict[str, Any]:
        return {"term": {"user_id": user_id}}

    # -- writes ----------------------------------------------------------------------------
    def ops(self, changes: LedgerChanges, memories: Sequence[Memory]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
        """Bulk items (and their undo) that apply `changes` after `memories` (the same call's);
        `ValueError` before anything is sent when an item is refused."""
        user = changes.user_id
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        removed = set(changes.removed_entities)
        entities = self._mget("entities", [doc_key(i) for i in {*(e.id for e in changes.entities), *removed,
                                                                   *(m.entity_id for m in changes.mentions)}])
        self._refuse_foreign("entities", user, [entities.get(doc_key(e.id)) for e in changes.entities])
        profile = self._mget("profile", [doc_key(p.id) for p in changes.profile])
        self._refuse_foreign("profile", user, [profile.get(doc_key(p.id)) for p in changes.profile])
        if changes.mentions:
            self._check_mentions(changes, memories, entities, removed)
        for entity in changes.entities:
            self._put(ops, undo, "entities", _entity_source(entity), entities.get(doc_key(entity.id)))
        for entity_id in sorted(removed):
            old = entities.get(doc_key(entity_id))
            if old is not None and old["_source"]["user_id"] == user:
                self._remove(ops, undo, "entities", old)
            for hit in self._hits("mentions", [self._user(user), {"term": {"entity_id": entity_id}}]):
                self._remove(ops, undo, "mentions", hit)
        written = {doc_key(m.entity_id, m.memory_id) for m in changes.mentions}
        if changes.relinked_memories:  # their other links go; the ones written again are replaced below
            for hit in self._hits("mentions", [self._user(user),
                                               {"terms": {"memory_id": sorted(set(changes.relinked_memories))}}]):
                if hit["_id"] not in written and hit["_source"]["entity_id"] not in removed:
                    self._remove(ops, undo, "mentions", hit)
        mentions = self._mget("mentions", sorted(written))
        for mention in changes.mentions:
            self._put(ops, undo, "mentions", _mention_source(mention),
                      mentions.get(doc_key(mention.entity_id, mention.memory_id)))
        for value in changes.profile:
            self._put(ops, undo, "profile", _profile_source(value), profile.get(doc_key(value.id)))
        return ops, undo

    @staticmethod
    def _refuse_foreign(kind: str, user_id: str, found: Sequence[dict[str, Any] | None]) -> None:
        for doc in found:
            if doc is not None and doc["_source"]["user_id"] != user_id:
                raise ValueError(f"{kind} id {doc['_source']['id']!r} belongs to another user")

    def _check_mentions(self, changes: LedgerChanges, memories: Sequence[Memory],
                        entities: dict[str, dict[str, Any]], removed: set[str]) -> None:
        user = changes.user_id
        mine = {m.id for m in memories if m.user_id == user}
        wanted = [m.memory_id for m in changes.mentions if m.memory_id not in mine]
        if wanted:
            docs = self.store._call(self.store.es.mget, index=self.store.memories_index,
                                    ids=list(dict.fromkeys(doc_key(i) for i in wanted)),
                                    source_includes=["id", "user_id"])["docs"]
            mine |= {d["_source"]["id"] for d in docs if d.get("found") and d["_source"]["user_id"] == user}
        known = {e.id for e in changes.entities}
        known |= {d["_source"]["id"] for d in entities.values() if d["_source"]["user_id"] == user}
        lr.refuse_unknown(lr.unknown_mentions(changes, mine, known - removed), user)

    def _put(self, ops: list, undo: list, kind: str, source: dict[str, Any], old: dict[str, Any] | None) -> None:
        index = self.index[kind]
        ops.append({"_op_type": "index", "_index": index, "_id": source["key"], "_source": source})
        undo.append({"_op_type": "delete", "_index": index, "_id": source["key"]} if old is None else
                    {"_op_type": "index", "_index": index, "_id": source["key"], "_source": old["_source"]})

    def _remove(self, ops: list, undo: list, kind: str, old: dict[str, Any]) -> None:
        index = self.index[kind]
        ops.append({"_op_type": "delete", "_index": index, "_id": old["_id"]})
        undo.append({"_op_type": "index", "_index": index, "_id": old["_id"], "_source": old["_source"]})

    # -- edits (read-modify-write) -----------------------------------------------------------
    def edit(self, user_id: str, edit: LedgerEdit) -> LedgerChanges | None:
        """`StoreBase._edit_ledger`: under the user's edit lock, read (searches see every earlier
        edit: each is written with ``refresh=wait_for`` before its lock is released) and write
        the changes in one bulk request with the store's all-or-nothing handling."""
        with self._edit_lock(user_id):
            changes = edit(self.store)
            if changes is not None:
                ops, undo = self.ops(changes, ())
                self.store._bulk(ops, undo, "edit_ledger")
        return changes

    @contextmanager
    def _edit_lock(self, user_id: str) -> Iterator[None]:
        """A per-user lock document in the meta index (``n``: when it expires, epoch ms), created
        with ``op_type=create``; one left by a crashed process is taken over after
        `EDIT_LOCK_TTL_S`, conditionally on the version read. Released conditionally on our own
        version, so a lock taken over from us is not deleted."""
        es, index, doc_id = self.store.es, self.store.meta_index, "l:" + doc_key(user_id)
        deadline = time.monotonic() + EDIT_LOCK_WAIT_S
        mine: Any = None  # the response that created or took the lock: its version
        try:
            while mine is None:
                expires = {"n": int((time.time() + EDIT_LOCK_TTL_S) * 1000)}
                try:
                    current = es.options(ignore_status=404).get(index=index, id=doc_id)
                    if not current.get("found"):
                        mine = es.index(index=index, id=doc_id, document=expires, op_type="create")
                    elif current["_source"].get("n", 0) < time.time() * 1000:  # left by a crashed process
                        mine = es.index(index=index, id=doc_id, document=expires, if_seq_no=current["_seq_no"],
                                        if_primary_term=current["_primary_term"])
                except ConflictError:
                    pass  # another edit took it first
                if mine is None:
                    if time.monotonic() > deadline:
                        raise StoreError(f"the entity ledger stayed locked by another edit for {EDIT_LOCK_WAIT_S:g} s")
                    time.sleep(random.uniform(0.005, 0.05))
        except (ApiError, TransportError) as exc:
            raise StoreError(f"Elasticsearch error: {exc}") from exc
        assert mine is not None
        try:
            yield
        finally:
            try:
                es.delete(index=index, id=doc_id, if_seq_no=mine["_seq_no"], if_primary_term=mine["_primary_term"])
            except (ConflictError, NotFoundError):
                pass  # taken over after it expired: not ours to release
            except (ApiError, TransportError) as exc:  # pragma: no cover - it expires on its own
                raise StoreError(f"Elasticsearch error: {exc}") from exc

    def delete_mentions_of(self, user_id: str, memory_ids: Sequence[str]) -> None:
        self.store._call(self.store.es.delete_by_query, index=self.index["mentions"], refresh=True,
                         conflicts="proceed", query={"bool": {"filter": [
                             self._user(user_id), {"terms": {"memory_id": list(memory_ids)}}]}})

    # -- reads -------------------------------------------------------------------------------
    def entities(self, user_id: str, ids: Sequence[str] | None, kind: str | None) -> list[Entity]:
        filters = [self._user(user_id)]
        if ids is not None:
            filters.append({"terms": {"id": list(ids)}})
        if kind is not None:
            filters.append({"term": {"kind": lr.kind_value(kind)}})
        rows = [[h["_source"].get(c) for c in lr.ENTITY_COLUMNS] for h in self._hits("entities", filters)]
        if not rows:
            return []
        found = [r[0] for r in rows]
        mentions = self.mentions(user_id, None if ids is None and kind is None else found, None)
        figures = lr.figures_of((m.entity_id, m.said_at, m.event_at, m.counted) for m in mentions)
        return sorted((lr.entity_from_row(r, figures.get(r[0])) for r in rows), key=lambda e: e.id)

    def mentions(self, user_id: str, entity_ids: Sequence[str] | None,
                 memory_ids: Sequence[str] | None) -> list[EntityMention]:
        filters = [self._user(user_id)]
        if entity_ids is not None:
            filters.append({"terms": {"entity_id": list(entity_ids)}})
        if memory_ids is not None:
            filters.append({"terms": {"memory_id": list(memory_ids)}})
        return lr.mention_order(lr.mention_from_row([h["_source"].get(c) for c in lr.MENTION_COLUMNS])
                                for h in self._hits("mentions", filters))

    def profile_values(self, user_id: str, key: str | None, current_only: bool) -> list[ProfileValue]:
        filters: list[dict[str, Any]] = [self._user(user_id)]
        if key is not None:
            filters.append({"term": {"profile_key": key}})
        values = [lr.profile_from_row([h["_source"].get(c) for c in _PROFILE_FIELDS])
                  for h in self._hits("profile", filters)]
        return lr.profile_order(v for v in values if v.current or not current_only)
