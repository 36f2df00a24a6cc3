"""A LangGraph ``BaseStore`` over the MemoryScope engine.

Usage::

    from memoryscope_plugins.adapters.langgraph_store import MemoryScopeStore

    store = MemoryScopeStore(engine)                       # namespaces look like (user_id, ...)
    agent = create_agent(model, tools, store=store)        # or graph.compile(store=store)
    store.put(("anna", "memories"), "dog", {"content": "Anna's dog is Biscuit."})
    store.search(("anna", "memories"), query="pets")       # MemoryScope's hybrid retrieval

LangMem's tools (``create_manage_memory_tool`` / ``create_search_memory_tool``) work on it too.

How namespaces map onto the engine: one element of the namespace is the user (``user_index``,
default 0: ``("anna", "memories")``; LangMem's usual ``("memories", "{langgraph_user_id}")``
wants ``user_index=-1``). Every item is one ``custom`` memory of that user, recorded under
`agent_id`; its text is ``value["content"]`` when that is a string (LangMem's shape), else the
value as JSON, and the namespace, key and value are kept in its metadata. The memory id is
derived from (namespace, key), so ``put`` on an existing key updates that memory in place.
``search(query=...)`` uses the engine's retrieval (full text + vectors, time-aware, the
relevance floor); without a query items are listed newest first. ``filter`` compares value
fields for equality. TTLs are not supported (``supports_ttl`` is False).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memoryscope_plugins.engine import MemoryScope
from memoryscope_plugins.errors import NotFoundError
from memoryscope_plugins.types import Memory, MemoryType, as_aware

__all__ = ["MemoryScopeStore"]

_META = "langgraph"  # the metadata entry that holds an item's namespace, key and value
_SCAN = 10_000  # most items considered by a listing without a query


class MemoryScopeStore(BaseStore):
    """LangGraph's key-value + search store, kept in MemoryScope.

    Args:
        memory: the engine.
        user_index: which namespace element is the user id (0 = first, -1 = last).
        agent_id: the agent recorded with every item (default ``"langgraph"``).
    """

    supports_ttl = False

    def __init__(self, memory: MemoryScope, *, user_index: int = 0, agent_id: str = "langgraph") -> None:
        if not isinstance(memory, MemoryScope):
            raise TypeError(f"memory must be a MemoryScope, not {type(memory).__name__}")
        if isinstance(user_index, bool) or not isinstance(user_index, int):
            raise TypeError("user_index must be an integer")
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValueError("agent_id must be a non-empty string")
        self.memory = memory
        self.user_index = user_index
        self.agent_id = agent_id

    # -- BaseStore ------------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run get / search / put / list-namespaces operations in order."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of `batch` (the same work, off the event loop)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- operations -------------------------------------------------------------------------------------
    def _user(self, namespace: tuple[str, ...]) -> str:
        try:
            user = namespace[self.user_index]
        except IndexError:
            raise InvalidNamespaceError(f"namespace {namespace!r} has no element {self.user_index} "
                                        "(the user id; see user_index)") from None
        if not isinstance(user, str) or not user.strip():
            raise InvalidNamespaceError("the namespace's user element must be a non-empty string")
        return user

    @staticmethod
    def _id(namespace: tuple[str, ...], key: str) -> str:
        return uuid.uuid5(uuid.NAMESPACE_URL, json.dumps([list(namespace), key])).hex

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        try:
            memory = self.memory.get(self._user(namespace), self._id(namespace, key))
        except NotFoundError:
            return None
        return _item(memory)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        if not namespace or any(not isinstance(part, str) or not part or "." in part for part in namespace):
            raise InvalidNamespaceError(f"invalid namespace {namespace!r}")
        user, memory_id = self._user(namespace), self._id(namespace, op.key)
        if op.value is None:
            try:
                self.memory.delete(user, memory_id)
            except NotFoundError:
                pass
            return
        value = dict(op.value)
        content = value["content"] if isinstance(value.get("content"), str) and value["content"].strip() \
            else json.dumps(value, ensure_ascii=False, default=str)
        metadata = {_META: {"namespace": list(namespace), "key": op.key, "value": value}}
        try:
            self.memory.get(user, memory_id)
        except NotFoundError:
            self.memory.add(user, content, agent_id=self.agent_id, metadata=metadata, memory_id=memory_id)
        else:
            self.memory.update(user, memory_id, content=content, metadata=metadata)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        user = self._user(prefix)
        wanted = op.offset + op.limit
        scored: list[tuple[Memory, float | None]]
        if op.query:
            # ask for more than needed: memories outside the prefix or the filter are dropped
            result = self.memory.retrieve(user, op.query, types=[MemoryType.CUSTOM],
                                          top_k=min(1000, max(wanted * 4, 20)))
            scored = [(m.memory, m.score) for m in result.memories]
        else:
            scored = [(m, None) for m in self.memory.list(user, types=[MemoryType.CUSTOM], limit=_SCAN)]
        items = [_search_item(memory, score) for memory, score in scored
                 if _in(memory, prefix) and _matches(memory, op.filter)]
        return items[op.offset:wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        for user in self.memory.users():
            for memory in self.memory.list(user, types=[MemoryType.CUSTOM], limit=_SCAN):
                entry = memory.metadata.get(_META)
                if not isinstance(entry, dict):
                    continue
                namespace = tuple(entry["namespace"])
                if all(_condition(namespace, c) for c in op.match_conditions or ()):
                    found.add(namespace[:op.max_depth] if op.max_depth is not None else namespace)
        return sorted(found)[op.offset:op.offset + op.limit]


# -- helpers ----------------------------------------------------------------------------------------

def _item(memory: Memory) -> Item:
    entry = memory.metadata.get(_META) or {}
    namespace = tuple(entry.get("namespace") or (memory.user_id,))
    stored = entry.get("value")
    value: dict[str, Any] = stored if isinstance(stored, dict) else {"content": memory.content}
    if isinstance(value.get("content"), str) and value["content"] != memory.content:
        value = {**value, "content": memory.content}  # edited through the engine since
    created, updated = _aware(memory.created_at), _aware(memory.updated_at or memory.created_at)
    return Item(value=value, key=entry.get("key", memory.id), namespace=namespace, created_at=created,
                updated_at=updated)


def _search_item(memory: Memory, score: float | None) -> SearchItem:
    """A search result: the item with its relevance (None for a search without a query, as in
    langgraph's own stores)."""
    item = _item(memory)
    return SearchItem(namespace=item.namespace, key=item.key, value=item.value, created_at=item.created_at,
                      updated_at=item.updated_at, score=score)


def _aware(moment: datetime) -> datetime:
    return as_aware(moment)


def _in(memory: Memory, prefix: tuple[str, ...]) -> bool:
    entry = memory.metadata.get(_META)
    return isinstance(entry, dict) and tuple(entry.get("namespace", ()))[:len(prefix)] == prefix


def _matches(memory: Memory, flt: dict[str, Any] | None) -> bool:
    if not flt:
        return True
    value = memory.metadata[_META].get("value") or {}
    return all(value.get(field) == expected for field, expected in flt.items())


def _condition(namespace: tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    part = namespace[:len(path)] if condition.match_type == "prefix" else namespace[-len(path):] if path else ()
    if len(part) != len(path):
        return False
    return all(p == "*" or p == n for p, n in zip(path, part))
