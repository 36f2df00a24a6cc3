"""The Elasticsearch store, on the official `elasticsearch` 8.x Python client.

Indices (the prefix is configurable, default ``memoryscope``):

- ``<prefix>-memories``: one document per memory (``_id`` = the memory id). Full text goes to a
  ``search_text`` field (`indexing.full_text`: date, the turn answered, speaker, content) analysed with the
  ``english`` analyzer, with a
  ``search_text.cjk`` subfield analysed by the ``cjk`` analyzer (bigrams), so Chinese, Japanese and
  Korean queries match without a segmenter. Filters use keyword fields (user, agent, type, status,
  session, embedding model) and integer microsecond times (message time, event start, event end),
  so time ranges compare exactly. Every original value (content, ISO times with their offsets,
  metadata as JSON) is kept verbatim in ``_source``. Each embedding model gets its own
  ``dense_vector`` field (``vec_<hash>_<dims>``, cosine), added to the mapping at first use, so a
  new embedder of another dimension needs no reindex and vectors of another model are never compared.
  The mapping carries ``_meta.mapping_version``; it is created or migrated when the store opens.
- ``<prefix>-messages``: the durable message log; ``<prefix>-leases``: one document per user being
  consolidated, taken with ``op_type=create`` or an ``if_seq_no``/``if_primary_term`` conditional
  write (optimistic concurrency); ``<prefix>-meta``: key/value facts and the sequence counters.

Search: the engine fuses the two channels itself (so every backend ranks the same way), which needs
each channel's own ranks and scores. Elasticsearch's RRF retriever returns only the fused rank, so
the store sends the two searches (BM25 ``multi_match`` and filtered ``knn``, the same filters) in one
``_msearch`` round trip and reports both.

Writes: bulk requests with ``refresh=wait_for`` (a recorded memory is searchable when the call
returns) and per-item error handling. Elasticsearch has no multi-document transactions; a batch is
checked before anything is written (ids owned by another user are refused), new documents are
created with ``op_type=create`` and changed ones written conditionally on the version that was read;
if any item still fails, the items that succeeded are rolled back (created documents deleted, changed
ones restored) and `StoreError` names the ids that failed.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import re
import time
from typing import Any, Iterator, Literal, Sequence

import numpy as np

try:
    from elasticsearch import ApiError, ConflictError, Elasticsearch, NotFoundError as ESNotFoundError, TransportError
except ImportError as exc:  # pragma: no cover - the engine turns this into a ConfigError
    raise ImportError("the elasticsearch backend needs: pip install 'memoryscope-plugins[elasticsearch]'") from exc

from ..errors import LeaseLostError, MessagesGoneError, SchemaVersionError, StoreError
from ..indexing import full_text
from ..types import Entity, EntityMention, Memory, ProfileValue
from . import base, elasticsearch_tools, messages, records, tool_counters
from .base import Candidate, LedgerChanges, MemoryFilter, SearchRequest, StoredMessage, VectorRows
from .core import StoreBase, in_order
from .elasticsearch_ledger import ElasticsearchLedger, doc_key
from .leases import Lease, require_held
from .overview import StoreOverview, from_rows
from .timecodes import epoch_microseconds

log = logging.getLogger(__name__)

MAPPING_VERSION = 2
_STORED = {"type": "keyword", "index": False, "doc_values": False}  # kept in _source, never searched
_VEC = "vec_"

_MEMORY_PROPERTIES: dict[str, Any] = {
    "id": {"type": "keyword"},
    "user_id": {"type": "keyword"},
    "agent_id": {"type": "keyword"},
    "type": {"type": "keyword"},
    "status": {"type": "keyword"},
    "session_id": {"type": "keyword"},
    "speaker": {"type": "keyword"},
    "role": {"type": "keyword"},
    "previous_id": _STORED,
    "content": {"type": "text", "index": False},
    "context": {"type": "text", "index": False},
    "search_text": {"type": "text", "analyzer": "english",
                    "fields": {"cjk": {"type": "text", "analyzer": "cjk"}}},
    "created_at": _STORED, "updated_at": _STORED, "event_start": _STORED, "event_end": _STORED,
    "created_us": {"type": "long"},
    "event_start_us": {"type": "long"},
    "event_last_us": {"type": "long"},  # the event's end, or its start when it has no end
    "superseded_by": {"type": "keyword"},
    "source_ids": {"type": "keyword"},
    "metadata_json": _STORED,
    "embedding_model": {"type": "keyword"},
    "seq": {"type": "long"},
}
_MESSAGE_PROPERTIES: dict[str, Any] = {
    "id": {"type": "keyword"}, "user_id": {"type": "keyword"}, "agent_id": {"type": "keyword"},
    "session_id": {"type": "keyword"}, "role": {"type": "keyword"}, "name": _STORED,
    "content": {"type": "text", "index": False}, "timestamp": _STORED, "metadata_json": _STORED,
    "seq": {"type": "long"}, "state": {"type": "keyword"}, "attempts": {"type": "integer"},
}
_LEASE_PROPERTIES = {"user_id": {"type": "keyword"}, "owner": {"type": "keyword"}, "expires_ms": {"type": "long"}}
_META_PROPERTIES = {"value": _STORED, "n": {"type": "long"}}

# Additive mapping changes per version (new fields only: Elasticsearch cannot change a field's
# type in place; such a change would need a reindex step here).
_MIGRATIONS: list[tuple[int, dict[str, Any]]] = [
    (1, {}),
    (2, {}),  # the entity ledger and the profile: indices of their own (`elasticsearch_ledger`)
]


_doc_id = doc_key  # a memory's, message's or lease's document id


def _all_pending(docs: Sequence[dict[str, Any]]) -> bool:
    """Whether every message document of an mget was found, pending."""
    return all(d.get("found") and d["_source"].get("state") == messages.PENDING for d in docs)


# the shared columns under the field names of this mapping (metadata is kept as JSON text)
_MEMORY_FIELDS = tuple("metadata_json" if c == "metadata" else c for c in records.MEMORY_COLUMNS)
_MESSAGE_FIELDS = tuple("metadata_json" if c == "metadata" else c for c in records.MESSAGE_COLUMNS)


def _memory_source(memory: Memory, seq: int) -> dict[str, Any]:
    source = records.memory_values(memory)
    source["metadata_json"] = source.pop("metadata")
    event_last = memory.event_end if memory.event_end is not None else memory.event_start
    source.update(
        source_ids=list(memory.source_ids), search_text=full_text(memory),
        created_us=epoch_microseconds(memory.created_at), event_start_us=epoch_microseconds(memory.event_start),
        event_last_us=epoch_microseconds(event_last), embedding_model=None, seq=seq,
    )
    return source


def _source_to_memory(src: dict[str, Any]) -> Memory:
    return records.memory_from_row([src.get(name) for name in _MEMORY_FIELDS])


def _source_to_message(src: dict[str, Any]) -> StoredMessage:
    return records.message_from_row([src.get(name) for name in _MESSAGE_FIELDS])


class ElasticsearchStore(StoreBase):
    """A `MemoryStore` on Elasticsearch 8.x.

    Args:
        hosts: the cluster URL(s), e.g. ``https://localhost:9200``; or pass ``cloud_id``.
        embedding_model: the name of the embedder whose vectors this store compares.
        index_prefix: prefix of the four indices (lower case).
        api_key / basic_auth / cloud_id / verify_certs / ca_certs: connection security, as the
            official client takes them.
        vector_index_type: ``hnsw`` (float vectors, exact scores) or ``int8_hnsw`` (4x smaller).
        client: a ready `Elasticsearch` client instead of the arguments above.
    """

    text_statistics: Literal["user", "index"] = "index"  # see MemoryStore

    def __init__(self, hosts: str | list[str] | None = None, *, embedding_model: str | None = None,
                 index_prefix: str = "memoryscope", api_key: str | None = None,
                 basic_auth: tuple[str, str] | None = None, cloud_id: str | None = None,
                 verify_certs: bool = True, ca_certs: str | None = None, request_timeout_s: float = 30.0,
                 vector_index_type: str = "hnsw", number_of_shards: int | None = None,
                 client: Elasticsearch | None = None) -> None:
        prefix = index_prefix.lower().rstrip("-_")
        if not re.match(r"^[a-z0-9][a-z0-9_.-]{0,200}$", prefix):
            raise ValueError(f"index prefix {index_prefix!r} must be lower-case letters, digits, '-', '_' or '.'")
        self.embedding_model = embedding_model
        self.prefix = prefix
        self.memories_index = f"{prefix}-memories"
        self.messages_index = f"{prefix}-messages"
        self.leases_index = f"{prefix}-leases"
        self.meta_index = f"{prefix}-meta"
        self.tools_index = f"{prefix}-tool-counters"
        self._ledger = ElasticsearchLedger(self)
        self._vector_index_type = vector_index_type
        self._shards = number_of_shards
        self._fields: dict[str, tuple[str, int]] = {}  # model -> (field, dims)
        self._closed = False
        self._own_client = client is None
        if client is None:
            kwargs: dict[str, Any] = {"request_timeout": request_timeout_s, "retry_on_timeout": True,
                                      "max_retries": 3}
            if cloud_id:
                kwargs["cloud_id"] = cloud_id
            elif hosts:
                kwargs["hosts"] = hosts if isinstance(hosts, list) else [hosts]
            else:
                raise StoreError("the elasticsearch backend needs store.url or store.cloud_id")
            if api_key:
                kwargs["api_key"] = api_key
            if basic_auth:
                kwargs["basic_auth"] = basic_auth
            if ca_certs:
                kwargs["ca_certs"] = ca_certs
            if not verify_certs:
                kwargs["verify_certs"] = False
                kwargs["ssl_show_warn"] = False
            client = Elasticsearch(**kwargs)
        self.es = client
        self._init_indices()

    @classmethod
    def from_settings(cls, cfg: Any, *, embedding_model: str | None = None) -> "ElasticsearchStore":
        """Build from `StoreSettings`: url or cloud_id; api_key or username/password; TLS options."""
        basic = None
        if cfg.username:
            basic = (cfg.username, cfg.password.get_secret_value() if cfg.password is not None else "")
        return cls(cfg.url, embedding_model=embedding_model, index_prefix=cfg.index_prefix or "memoryscope",
                   api_key=cfg.api_key.get_secret_value() if cfg.api_key is not None else None,
                   basic_auth=basic, cloud_id=cfg.cloud_id, verify_certs=cfg.verify_certs, ca_certs=cfg.ca_certs)

    # -- plumbing -------------------------------------------------------------------------------
    def _call(self, fn, *args, **kwargs):
        """Run a client call, translating transport and API failures to StoreError."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            return fn(*args, **kwargs)
        except (ApiError, TransportError) as exc:
            status = getattr(exc, "status_code", None) or getattr(getattr(exc, "meta", None), "status", None)
            if status in (401, 403):
                raise StoreError(f"Elasticsearch rejected the credentials ({status}): {exc}") from exc
            raise StoreError(f"Elasticsearch error: {exc}") from exc

    def _init_indices(self) -> None:
        self._ensure_index(self.meta_index, _META_PROPERTIES, {"mapping_version": MAPPING_VERSION})
        self._ensure_index(self.leases_index, _LEASE_PROPERTIES, {"mapping_version": MAPPING_VERSION})
        self._ensure_index(self.messages_index, _MESSAGE_PROPERTIES, {"mapping_version": MAPPING_VERSION})
        self._ensure_index(self.tools_index, elasticsearch_tools.PROPERTIES, {"mapping_version": MAPPING_VERSION})
        for name, properties in self._ledger.properties().items():
            self._ensure_index(name, properties, {"mapping_version": MAPPING_VERSION})
        self._ensure_index(self.memories_index, _MEMORY_PROPERTIES, {"mapping_version": MAPPING_VERSION},
                           migrations=True)

    def _ensure_index(self, name: str, properties: dict[str, Any], meta: dict[str, Any], *,
                      migrations: bool = False) -> None:
        exists = self._call(self.es.indices.exists, index=name)
        if not exists:
            settings: dict[str, Any] = {}
            if self._shards:
                settings["number_of_shards"] = self._shards
            try:
                self.es.indices.create(index=name, mappings={"dynamic": "strict", "_meta": meta,
                                                             "properties": properties},
                                       settings=settings or None)
                return
            except ApiError as exc:
                if "resource_already_exists" not in str(exc):  # a concurrent process made it
                    raise StoreError(f"cannot create Elasticsearch index {name}: {exc}") from exc
            except TransportError as exc:
                raise StoreError(f"Elasticsearch unreachable: {exc}") from exc
        mapping = self._call(self.es.indices.get_mapping, index=name)
        current = next(iter(mapping.values()))["mappings"]
        version = int((current.get("_meta") or {}).get("mapping_version", 0))
        if version > MAPPING_VERSION:
            raise SchemaVersionError(f"Elasticsearch index {name} has mapping version {version}; this library "
                                     f"knows up to {MAPPING_VERSION}. Upgrade memoryscope-plugins.")
        if version < MAPPING_VERSION:
            additions: dict[str, Any] = {}
            if migrations:
                for target, props in _MIGRATIONS:
                    if target > version:
                        additions.update(props)
            missing = {k: v for k, v in properties.items() if k not in current.get("properties", {})}
            additions.update(missing)
            log.info("migrating Elasticsearch index %s from mapping version %d to %d", name, version,
                     MAPPING_VERSION)
            self._call(self.es.indices.put_mapping, index=name, properties=additions or {},
                       meta={**(current.get("_meta") or {}), "mapping_version": MAPPING_VERSION})

    def drop_indices(self) -> None:
        """Delete this store's indices (tests and tear-down)."""
        for name in (self.memories_index, self.messages_index, self.leases_index, self.meta_index,
                     self.tools_index, *self._ledger.properties()):
            self._call(self.es.options(ignore_status=404).indices.delete, index=name)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._own_client:
                self.es.close()

    # -- meta and counters --------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        try:
            doc = self._call(self.es.options(ignore_status=404).get, index=self.meta_index, id="k:" + key)
        except StoreError:
            raise
        if not doc.get("found"):
            return None
        return doc["_source"].get("value")

    def set_meta(self, key: str, value: str) -> None:
        self._call(self.es.index, index=self.meta_index, id="k:" + key, document={"value": value},
                   refresh="wait_for")

    def _reserve(self, counter: str, n: int) -> int:
        """Reserve n consecutive sequence numbers of a store-wide counter; returns the first."""
        if n <= 0:
            return 0
        resp = self._call(self.es.update, index=self.meta_index, id="c:" + counter,
                          script={"source": "ctx._source.n += params.n", "params": {"n": n}},
                          upsert={"n": n}, source=True, retry_on_conflict=50)
        last = int(resp["get"]["_source"]["n"])
        return last - n + 1

    # -- vector fields ------------------------------------------------------------------------
    def _field_of(self, model: str) -> tuple[str, int] | None:
        if model in self._fields:
            return self._fields[model]
        raw = self.get_meta("vector_field:" + model)
        if raw is None:
            return None
        info = json.loads(raw)
        self._fields[model] = (info["field"], int(info["dims"]))
        return self._fields[model]

    def _ensure_field(self, model: str, dims: int) -> str:
        known = self._field_of(model)
        if known is None:
            field = f"{_VEC}{hashlib.blake2b(model.encode('utf-8'), digest_size=6).hexdigest()}_{dims}"
            self._call(self.es.indices.put_mapping, index=self.memories_index, properties={field: {
                "type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine",
                "index_options": {"type": self._vector_index_type}}})
            try:
                self.es.index(index=self.meta_index, id="k:vector_field:" + model, op_type="create",
                              document={"value": json.dumps({"field": field, "dims": dims})}, refresh="wait_for")
            except ConflictError:
                pass  # another process registered it first: use what it recorded
            except (ApiError, TransportError) as exc:
                raise StoreError(f"Elasticsearch error: {exc}") from exc
            self._fields.pop(model, None)
            known = self._field_of(model)
            assert known is not None
        if known[1] != dims:
            raise ValueError(f"vectors of {model!r} have {known[1]} dimensions in this store, not {dims}")
        return known[0]

    # -- bulk with rollback -------------------------------------------------------------------
    def _bulk(self, ops: list[dict[str, Any]], undo: list[dict[str, Any] | None], what: str,
              fence: str | None = None) -> None:
        """Run bulk operations; when any item fails, undo the ones that succeeded and raise
        (`LeaseLostError` when the failed item is the lease document `fence`)."""
        if not ops:
            return
        body: list[dict[str, Any]] = []
        for op in ops:
            action = {k: v for k, v in op.items() if k not in ("_source", "_op_type")}
            body.append({op["_op_type"]: action})
            if "_source" in op:
                body.append(op["_source"])
        resp = self._call(self.es.bulk, operations=body, refresh="wait_for")
        if not resp.get("errors"):
            return
        failed, undo_ops, lost = [], [], False
        for op, item, back in zip(ops, resp["items"], undo):
            result = next(iter(item.values()))
            if result.get("status", 500) >= 300:
                lost = lost or (op["_index"] == self.leases_index and op["_id"] == fence)
                error = result.get("error") or {}
                reason = str(error.get("reason", "")).split("Preview of field's value")[0].strip()[:200]
                failed.append(f"{op['_id']} ({error.get('type', result.get('status'))}: {reason})")
            elif back is not None:
                undo_ops.append(back)
        if undo_ops:
            try:
                rollback: list[dict[str, Any]] = []
                for op in undo_ops:
                    rollback.append({op["_op_type"]: {k: v for k, v in op.items() if k not in ("_source", "_op_type")}})
                    if "_source" in op:
                        rollback.append(op["_source"])
                self.es.bulk(operations=rollback, refresh="wait_for")
            except (ApiError, TransportError) as exc:  # pragma: no cover - best effort
                log.error("rollback of a failed %s failed too: %s", what, exc)
        if lost:
            raise LeaseLostError("the user's lease changed hands during the commit; nothing kept")
        raise StoreError(f"{what} failed for {len(failed)} item(s), nothing kept: " + "; ".join(failed[:20]))

    def _memory_ops(self, memories: Sequence[Memory], vectors: Any
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
        """Bulk operations (and their undo) that put `memories`; checks ownership first."""
        if not memories:
            return [], []
        merged, cleared = base.merge_batch(memories, vectors)
        model = self.embedding_model
        field = None
        dims = {v.shape[0] for _, v in merged.values() if v is not None}
        if len(dims) > 1:
            raise ValueError("vectors of one batch must have one dimension")
        if dims and model is not None:
            field = self._ensure_field(model, dims.pop())
        doc_ids = [_doc_id(i) for i in merged]
        found = self._call(self.es.mget, index=self.memories_index, ids=doc_ids)["docs"]
        existing = {d["_id"]: d for d in found if d.get("found")}
        for memory, _ in merged.values():
            old = existing.get(_doc_id(memory.id))
            if old is not None and old["_source"]["user_id"] != memory.user_id:
                raise ValueError(f"memory id {memory.id!r} belongs to another user")
        new_count = sum(1 for i in doc_ids if i not in existing)
        first_seq = self._reserve("memory_seq", new_count)
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        for memory, vector in merged.values():
            doc_id = _doc_id(memory.id)
            old = existing.get(doc_id)
            if old is None:
                seq, first_seq = first_seq, first_seq + 1
            else:
                seq = old["_source"]["seq"]
            source = _memory_source(memory, seq)
            if vector is not None:
                source["embedding_model"] = model
                if field is not None:
                    source[field] = vector.tolist()
            elif old is not None and memory.id not in cleared:  # keep the stored vector (and its model)
                source["embedding_model"] = old["_source"].get("embedding_model")
                source.update({k: v for k, v in old["_source"].items() if k.startswith(_VEC)})
            if old is None:
                ops.append({"_op_type": "create", "_index": self.memories_index, "_id": doc_id, "_source": source})
                undo.append({"_op_type": "delete", "_index": self.memories_index, "_id": doc_id})
            else:
                ops.append({"_op_type": "index", "_index": self.memories_index, "_id": doc_id, "_source": source,
                            "if_seq_no": old["_seq_no"], "if_primary_term": old["_primary_term"]})
                undo.append({"_op_type": "index", "_index": self.memories_index, "_id": doc_id,
                             "_source": old["_source"]})
        return ops, undo

    # -- writes -----------------------------------------------------------------------------
    def _commit(self, memories: Sequence[Memory], vectors: VectorRows | None,
                done_message_ids: Sequence[str], lease: Lease | None = None,
                ledger: LedgerChanges | None = None) -> None:
        """All or nothing (see the module docstring). With `lease`, the lease document is checked
        and rewritten unchanged, conditionally on the version checked, in the same bulk request:
        a takeover in between fails that item, and the rest is undone as for any failed item."""
        fence_ops: list[dict[str, Any]] = []
        if lease is not None:
            fence_ops = [self._fence_op(lease)]
        mem_ops, mem_undo = self._memory_ops(memories, vectors)
        if ledger is not None:
            led_ops, led_undo = self._ledger.ops(ledger, memories)
            mem_ops, mem_undo = mem_ops + led_ops, mem_undo + led_undo
        msg_ops, msg_undo = self._message_ops(done_message_ids, messages.DONE, pending=True)
        try:
            self._bulk(fence_ops + mem_ops + msg_ops, [None] * len(fence_ops) + mem_undo + msg_undo,
                       "put" if not done_message_ids else "commit_consolidation",
                       fence=_doc_id(lease.user_id) if lease is not None else None)
        except StoreError:  # undone; a message forgotten or done between the read and the write: gone
            if done_message_ids and not self._still_pending(done_message_ids):
                raise MessagesGoneError("a message of this commit is no longer pending") from None
            raise

    def _still_pending(self, ids: Sequence[str]) -> bool:
        docs = self._call(self.es.mget, index=self.messages_index, ids=builtins.list(dict.fromkeys(ids)),
                          source_includes=["state"])["docs"]
        return _all_pending(docs)

    def _fence_op(self, lease: Lease) -> dict[str, Any]:
        """The bulk item that fences a commit: the lease document as read, if still that version."""
        current = self._call(self.es.options(ignore_status=404).get, index=self.leases_index, id=_doc_id(lease.user_id))
        held = current["_source"] if current.get("found") else None
        require_held(lease, held["owner"] if held else None, bool(held and held["expires_ms"] > time.time() * 1000))
        assert held is not None
        return {"_op_type": "index", "_index": self.leases_index, "_id": current["_id"], "_source": held,
                "if_seq_no": current["_seq_no"], "if_primary_term": current["_primary_term"]}

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the vectors of existing memories (used when the embedding model changes)."""
        rows = base.vector_rows_for(ids, vectors)
        if not rows:
            return
        model = self.embedding_model
        dims = {v.shape[0] for v in rows if v is not None}
        if len(dims) > 1:
            raise ValueError("vectors of one batch must have one dimension")
        field = self._ensure_field(model, next(iter(dims))) if dims and model is not None else None
        wanted = {_doc_id(i): v for i, v in zip(ids, rows) if v is not None}
        found = self._call(self.es.mget, index=self.memories_index, ids=list(wanted))["docs"]
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        for doc in found:
            if not doc.get("found"):
                continue
            old = doc["_source"]
            source = {k: v for k, v in old.items() if not k.startswith(_VEC)}
            source["embedding_model"] = model
            if field is not None:
                source[field] = wanted[doc["_id"]].tolist()
            ops.append({"_op_type": "index", "_index": self.memories_index, "_id": doc["_id"], "_source": source,
                        "if_seq_no": doc["_seq_no"], "if_primary_term": doc["_primary_term"]})
            undo.append({"_op_type": "index", "_index": self.memories_index, "_id": doc["_id"], "_source": old})
        self._bulk(ops, undo, "set_vectors")

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        ids = base.id_list(ids)
        if not ids:
            return 0
        # which ids are this user's memories: their turns' messages are deleted with them (a tool
        # call's message has no memory, and an id that is no memory deletes nothing)
        turns = [memory.id for memory in self.get(user_id, builtins.list(dict.fromkeys(ids)))]
        # the messages first: should the memories' delete then fail, a retry finds them and does both
        self._forget_messages(user_id, turns)
        resp = self._call(self.es.delete_by_query, index=self.memories_index, refresh=True, conflicts="proceed",
                          query={"bool": {"filter": [{"ids": {"values": [_doc_id(i) for i in ids]}},
                                                     {"term": {"user_id": user_id}}]}})
        self._ledger.delete_mentions_of(user_id, ids)
        return int(resp.get("deleted", 0))

    def _forget_messages(self, user_id: str, ids: Sequence[str]) -> None:
        """The user's logged messages of these ids kept without their words, done (`StoreBase.delete`):
        one bulk request, each item conditional on the version read (a step marking one done
        meanwhile fails that item, and the request is undone and raised, as every write here)."""
        if not ids:
            return
        docs = self._call(self.es.mget, index=self.messages_index, ids=builtins.list(dict.fromkeys(ids)))["docs"]
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        for doc in docs:
            if not doc.get("found") or doc["_source"].get("user_id") != user_id or doc["_source"].get("role") == "tool":
                continue
            old = doc["_source"]
            new = dict(old, content="", name=None, metadata_json=messages.FORGOTTEN_METADATA, state=messages.DONE)
            ops.append({"_op_type": "index", "_index": self.messages_index, "_id": doc["_id"], "_source": new,
                        "if_seq_no": doc["_seq_no"], "if_primary_term": doc["_primary_term"]})
            undo.append({"_op_type": "index", "_index": self.messages_index, "_id": doc["_id"], "_source": old})
        if ops:
            self._bulk(ops, undo, "delete")

    def delete_user(self, user_id: str) -> int:
        query = {"bool": {"filter": [{"term": {"user_id": user_id}}]}}
        resp = self._call(self.es.delete_by_query, index=self.memories_index, refresh=True, conflicts="proceed",
                          query=query)
        for index in (self.messages_index, self.leases_index, self.tools_index, *self._ledger.properties()):
            self._call(self.es.delete_by_query, index=index, refresh=True, conflicts="proceed", query=query)
        return int(resp.get("deleted", 0))

    def rename_user(self, old_user_id: str, new_user_id: str) -> int:
        """Re-index the old user's documents under the new id in one bulk request (undone as a whole
        when any item fails, like every write here)."""
        new_query = {"bool": {"filter": [{"term": {"user_id": new_user_id}}]}}
        ledger = builtins.list(self._ledger.properties())
        for index in (self.memories_index, self.messages_index, *ledger):
            if int(self._call(self.es.count, index=index, query=new_query)["count"]):
                raise ValueError("the new user id already has memories, messages or ledger entries")
        old_query = {"bool": {"filter": [{"term": {"user_id": old_user_id}}]}}
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        moved = 0
        for index in (self.memories_index, self.messages_index, self.tools_index, *ledger):
            order = "key" if index in ledger else "slot" if index == self.tools_index else "seq"
            for hits in self._scan(index, old_query, [{order: "asc"}]):
                for hit in hits:
                    source = dict(hit["_source"], user_id=new_user_id)
                    ops.append({"_op_type": "index", "_index": index, "_id": hit["_id"], "_source": source})
                    undo.append({"_op_type": "index", "_index": index, "_id": hit["_id"], "_source": hit["_source"]})
                    moved += index == self.memories_index
        self._bulk(ops, undo, "rename_user")
        self._call(self.es.delete_by_query, index=self.leases_index, refresh=True, conflicts="proceed",
                   query=old_query)
        return moved

    # -- the entity ledger and the profile (elasticsearch_ledger) ------------------------------
    def _edit_ledger(self, user_id: str, edit: base.LedgerEdit) -> LedgerChanges | None:
        return self._ledger.edit(user_id, edit)

    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        return self._ledger.entities(user_id, ids, kind)

    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]:
        return self._ledger.mentions(user_id, entity_ids, memory_ids)

    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]:
        return self._ledger.profile_values(user_id, key, current_only)

    # -- reads ------------------------------------------------------------------------------
    _NO_VECTORS = [_VEC + "*"]

    def get(self, user_id: str, ids: Sequence[str]) -> list[Memory]:
        ids = base.id_list(ids)
        if not ids:
            return []
        docs = self._call(self.es.mget, index=self.memories_index, ids=[_doc_id(i) for i in ids],
                          source_excludes=self._NO_VECTORS)["docs"]
        found = {}
        for doc in docs:
            if doc.get("found") and doc["_source"]["user_id"] == user_id:
                found[doc["_source"]["id"]] = _source_to_memory(doc["_source"])
        return in_order(ids, found)

    @staticmethod
    def _filters(user_id: str, flt: MemoryFilter) -> list[dict[str, Any]]:
        clauses: list[dict[str, Any]] = [{"term": {"user_id": user_id}}]
        if flt.agent_id is not None:
            clauses.append({"term": {"agent_id": flt.agent_id}})
        if flt.types:
            clauses.append({"terms": {"type": [t.value for t in flt.types]}})
        if flt.statuses:
            clauses.append({"terms": {"status": [s.value for s in flt.statuses]}})
        if flt.session_id is not None:
            clauses.append({"term": {"session_id": flt.session_id}})
        if flt.time_range is not None:
            lo, hi = epoch_microseconds(flt.time_range.start), epoch_microseconds(flt.time_range.end)
            by_message: dict[str, Any] = {}
            if lo is not None:
                by_message["gte"] = lo
            if hi is not None:
                by_message["lt"] = hi
            by_event: list[dict[str, Any]] = [{"exists": {"field": "event_start_us"}}]
            if hi is not None:
                by_event.append({"range": {"event_start_us": {"lt": hi}}})
            if lo is not None:
                by_event.append({"range": {"event_last_us": {"gte": lo}}})
            message_clause = ({"range": {"created_us": by_message}} if by_message
                              else {"exists": {"field": "created_us"}})
            clauses.append({"bool": {"should": [message_clause, {"bool": {"filter": by_event}}],
                                     "minimum_should_match": 1}})
        return clauses

    def _scan(self, index: str, query: dict[str, Any], sort: list[dict[str, Any]], *, skip: int = 0,
              limit: int | None = None, page: int = 1000, excludes: list[str] | None = None
              ) -> Iterator[list[dict[str, Any]]]:
        """Pages of hits in `sort` order (which must end with a unique field), via search_after."""
        after = None
        remaining = limit
        while remaining is None or remaining > 0:
            size = page if remaining is None else max(1, min(page, remaining + skip))
            kwargs: dict[str, Any] = {"index": index, "query": query, "sort": sort, "size": size,
                                      "track_total_hits": False}
            if excludes:
                kwargs["source_excludes"] = excludes
            if after is not None:
                kwargs["search_after"] = after
            hits = self._call(self.es.search, **kwargs)["hits"]["hits"]
            if not hits:
                return
            after = hits[-1]["sort"]
            full = len(hits) == size
            if skip:
                dropped = min(skip, len(hits))
                skip -= dropped
                hits = hits[dropped:]
            if remaining is not None:
                hits = hits[:remaining]
                remaining -= len(hits)
            if hits:
                yield hits
            if not full:
                return

    def list(self, user_id: str, flt: MemoryFilter, *, limit: int = 100, offset: int = 0,
             newest_first: bool = True) -> builtins.list[Memory]:
        if limit <= 0:
            return []
        order = "desc" if newest_first else "asc"
        query = {"bool": {"filter": self._filters(user_id, flt)}}
        sort = [{"created_us": order}, {"seq": order}]
        if offset + limit <= 10_000:
            resp = self._call(self.es.search, index=self.memories_index, query=query, sort=sort, from_=offset,
                              size=limit, source_excludes=self._NO_VECTORS, track_total_hits=False)
            return [_source_to_memory(h["_source"]) for h in resp["hits"]["hits"]]
        out: list[Memory] = []
        for hits in self._scan(self.memories_index, query, sort, skip=offset, limit=limit,
                               excludes=self._NO_VECTORS):
            out.extend(_source_to_memory(h["_source"]) for h in hits)
        return out

    def count(self, user_id: str, flt: MemoryFilter) -> int:
        resp = self._call(self.es.count, index=self.memories_index,
                          query={"bool": {"filter": self._filters(user_id, flt)}})
        return int(resp["count"])

    def _distinct(self, index: str, field: str, query: dict[str, Any] | None = None) -> set[str]:
        """Distinct values of a keyword field: composite aggregation pages, else one terms aggregation."""
        out: set[str] = set()
        after = None
        try:
            while True:
                composite: dict[str, Any] = {"size": 10_000, "sources": [{"v": {"terms": {"field": field}}}]}
                if after is not None:
                    composite["after"] = after
                resp = self.es.search(index=index, size=0, query=query, aggs={"d": {"composite": composite}})
                agg = resp["aggregations"]["d"]
                out.update(b["key"]["v"] for b in agg["buckets"])
                after = agg.get("after_key")
                if not agg["buckets"] or after is None:
                    return out
        except ApiError as exc:
            if "composite" not in str(exc):
                raise StoreError(f"Elasticsearch error: {exc}") from exc
        resp = self._call(self.es.search, index=index, size=0, query=query,
                          aggs={"d": {"terms": {"field": field, "size": 65_536}}})
        return {b["key"] for b in resp["aggregations"]["d"]["buckets"]}

    def users(self) -> builtins.list[str]:
        users = self._distinct(self.memories_index, "user_id") | self._distinct(self.messages_index, "user_id")
        return sorted(users, key=lambda u: u.encode("utf-8"))

    def stored_users(self) -> builtins.list[str]:
        users: set[str] = set()
        for index in (self.memories_index, self.messages_index, *self._ledger.properties(), self.tools_index):
            users |= self._distinct(index, "user_id")
        return sorted(users, key=lambda u: u.encode("utf-8"))

    def _memory_page(self, user_id: str | None, *, needing_vectors: bool, after: int,
                     limit: int) -> builtins.list[tuple[int, Memory]]:
        query: dict[str, Any] = {"filter": [{"range": {"seq": {"gt": after}}}]}
        if user_id is not None:
            query["filter"].append({"term": {"user_id": user_id}})
        if needing_vectors:
            query.update(self._needing_query()["bool"])
        hits = self._call(self.es.search, index=self.memories_index, query={"bool": query}, sort=[{"seq": "asc"}],
                          size=limit, source_excludes=self._NO_VECTORS, track_total_hits=False)["hits"]["hits"]
        return [(int(h["_source"]["seq"]), _source_to_memory(h["_source"])) for h in hits]

    def _needing_query(self) -> dict[str, Any]:
        return {"bool": {"must_not": [{"term": {"embedding_model": self.embedding_model or ""}}]}}

    def count_needing_vectors(self) -> int:
        return int(self._call(self.es.count, index=self.memories_index, query=self._needing_query())["count"])

    # -- search -----------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> builtins.list[Candidate]:
        limit = max(1, min(int(request.limit), 10_000))
        filters = self._filters(request.user_id, request.filter)
        searches: list[dict[str, Any]] = []
        channels: list[str] = []
        if request.text and request.text.strip():
            searches += [{"index": self.memories_index}, {
                "query": {"bool": {"must": [{"multi_match": {"query": request.text, "type": "best_fields",
                                                             "fields": ["search_text", "search_text.cjk"]}}],
                                   "filter": filters}},
                "size": limit, "_source": {"excludes": self._NO_VECTORS}, "track_total_hits": False}]
            channels.append("text")
        model = self.embedding_model
        if request.vector is not None and model is not None:
            known = self._field_of(model)
            if known is not None:
                field, dims = known
                vector = np.asarray(request.vector, dtype=np.float32).reshape(-1)
                if vector.shape[0] != dims:
                    raise ValueError(f"query vector has {vector.shape[0]} dimensions; the store's vectors have {dims}")
                searches += [{"index": self.memories_index}, {
                    "knn": {"field": field, "query_vector": vector.tolist(), "k": limit,
                            "num_candidates": min(10_000, max(100, 2 * limit)),
                            "filter": {"bool": {"filter": filters + [{"term": {"embedding_model": model}}]}}},
                    "size": limit, "_source": {"excludes": self._NO_VECTORS}, "track_total_hits": False}]
                channels.append("vector")
        if not searches:
            return []
        responses = self._call(self.es.msearch, searches=searches)["responses"]
        found: dict[str, Candidate] = {}
        for channel, resp in zip(channels, responses):
            if "error" in resp:
                raise StoreError(f"Elasticsearch {channel} search failed: {resp['error']}")
            for rank, hit in enumerate(resp["hits"]["hits"], start=1):
                cand = found.get(hit["_id"])
                if cand is None:
                    cand = found[hit["_id"]] = Candidate(memory=_source_to_memory(hit["_source"]))
                if channel == "text":
                    cand.text_rank, cand.text_score = rank, float(hit["_score"])
                else:  # Elasticsearch's cosine score is (1 + cos) / 2
                    cand.vector_rank, cand.vector_score = rank, 2.0 * float(hit["_score"]) - 1.0
        return list(found.values())

    # -- the durable message log ------------------------------------------------------------------
    def _log(self, rows: Sequence[tuple[Any, ...]], memories: Sequence[Memory], vectors: VectorRows | None,
             ledger: LedgerChanges | None = None) -> None:
        mem_ops, mem_undo = self._memory_ops(memories, vectors)
        if ledger is not None:
            led_ops, led_undo = self._ledger.ops(ledger, memories)
            mem_ops, mem_undo = mem_ops + led_ops, mem_undo + led_undo
        first = self._reserve("message_seq", len(rows))
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        for i, row in enumerate(rows):
            source = dict(zip(records.MESSAGE_WRITE_COLUMNS, row))
            source.update(metadata_json=source.pop("metadata"), seq=first + i, attempts=0)
            ops.append({"_op_type": "create", "_index": self.messages_index, "_id": source["id"], "_source": source})
            undo.append({"_op_type": "delete", "_index": self.messages_index, "_id": source["id"]})
        tool_ops, tool_undo = elasticsearch_tools.ops(self.tools_index, tool_counters.increments(rows))
        self._bulk(ops + tool_ops + mem_ops, undo + tool_undo + mem_undo, "append_messages")

    def tool_counters(self, agent_id: str, *, tool: str | None = None, user_id: str | None = None,
                      team: str | None = None) -> builtins.list[tool_counters.Counter]:
        hits = [hit for page in self._scan(self.tools_index, elasticsearch_tools.query(agent_id, tool, user_id, team),
                                           [{"slot": "asc"}]) for hit in page]
        return elasticsearch_tools.counters(hits)

    def _read_messages(self, user_id: str, *, agent_id: str | None = None, state: str | None = None,
                       before_seq: int | None = None, limit: int,
                       newest_first: bool) -> builtins.list[StoredMessage]:
        clauses: list[dict[str, Any]] = [{"term": {"user_id": user_id}}]
        if agent_id is not None:
            clauses.append({"term": {"agent_id": agent_id}})
        if state is not None:
            clauses.append({"term": {"state": state}})
        if before_seq is not None:
            clauses.append({"range": {"seq": {"lt": before_seq}}})
        out: list[StoredMessage] = []
        for hits in self._scan(self.messages_index, {"bool": {"filter": clauses}},
                               [{"seq": "desc" if newest_first else "asc"}], limit=limit, page=min(limit, 1000) or 1):
            out.extend(_source_to_message(h["_source"]) for h in hits)
        return out

    def _message_ops(self, ids: Sequence[str], state: str, *, pending: bool = False,
                     ) -> tuple[builtins.list[dict[str, Any]], builtins.list[dict[str, Any] | None]]:
        """Bulk items setting the messages' state, each conditional on the version read. With
        `pending` (a commit's), `MessagesGoneError` when one is no longer there or no longer pending
        (deleted, or done by another step meanwhile)."""
        if not ids:
            return [], []
        docs = self._call(self.es.mget, index=self.messages_index, ids=list(dict.fromkeys(ids)))["docs"]
        if pending and not _all_pending(docs):
            raise MessagesGoneError("a message of this commit is no longer pending")
        ops: list[dict[str, Any]] = []
        undo: list[dict[str, Any] | None] = []
        for doc in docs:
            old = doc.get("_source") if doc.get("found") else None
            if old is None or old.get("metadata_json") == messages.FORGOTTEN_METADATA and not old.get("content"):
                continue  # a forgotten message (its turn deleted) stays done: counting an attempt never revives it
            failed = 1 if state == messages.FAILED else 0
            new = dict(old, state=state, attempts=int(old.get("attempts") or 0) + failed)
            ops.append({"_op_type": "index", "_index": self.messages_index, "_id": doc["_id"], "_source": new,
                        "if_seq_no": doc["_seq_no"], "if_primary_term": doc["_primary_term"]})
            undo.append({"_op_type": "index", "_index": self.messages_index, "_id": doc["_id"], "_source": old})
        return ops, undo

    def logged_message_ids(self, user_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        # a get by id is real-time in Elasticsearch: a message just logged is seen without a refresh
        docs = self._call(self.es.mget, index=self.messages_index, ids=list(dict.fromkeys(ids)),
                          source_includes=["user_id"])["docs"]
        return {doc["_id"] for doc in docs if doc.get("found") and doc["_source"].get("user_id") == user_id}

    def _set_message_state(self, ids: Sequence[str], state: str) -> None:
        ops, undo = self._message_ops(ids, state)
        self._bulk(ops, undo, "mark_messages")

    def _message_page(self, user_id: str, *, after_seq: int, limit: int) -> builtins.list[StoredMessage]:
        query = {"bool": {"filter": [{"term": {"user_id": user_id}}, {"range": {"seq": {"gt": after_seq}}}]}}
        hits = self._call(self.es.search, index=self.messages_index, query=query, sort=[{"seq": "asc"}],
                          size=limit, track_total_hits=False)["hits"]["hits"]
        return [_source_to_message(h["_source"]) for h in hits]

    def vectors_of(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        docs = self._call(self.es.mget, index=self.memories_index, ids=[_doc_id(i) for i in ids],
                          source_includes=["id", "user_id", "embedding_model", _VEC + "*"])["docs"]
        out: dict[str, np.ndarray] = {}
        for doc in docs:
            src = doc.get("_source") if doc.get("found") else None
            if src is None or src["user_id"] != user_id or not src.get("embedding_model"):
                continue
            field = self._field_of(src["embedding_model"])
            if field is not None and src.get(field[0]) is not None:
                out[src["id"]] = np.asarray(src[field[0]], dtype=np.float32)
        return out

    def users_with_pending(self) -> builtins.list[str]:
        return sorted(self._distinct(self.messages_index, "user_id", {"term": {"state": messages.PENDING}}))

    def overview(self) -> StoreOverview:
        """Counts of messages per state, users and memories per type (`storage.overview`)."""
        states = self._call(self.es.search, index=self.messages_index, size=0,
                            aggs={"s": {"terms": {"field": "state", "size": 16}}})["aggregations"]["s"]["buckets"]
        first = self._call(self.es.search, index=self.messages_index, size=1, sort=[{"seq": "asc"}],
                           query={"term": {"state": messages.PENDING}})["hits"]["hits"]
        kinds = self._call(self.es.search, index=self.memories_index, size=0, aggs={"t": {
            "terms": {"field": "type", "size": 16}, "aggs": {"s": {"terms": {"field": "status", "size": 16}}}}})
        return from_rows(messages=[(b["key"], b["doc_count"]) for b in states],
                         oldest_pending=first[0]["_source"]["timestamp"] if first else None, users=len(self.users()),
                         memories=[(t["key"], st["key"], st["doc_count"]) for t in kinds["aggregations"]["t"]["buckets"]
                                   for st in t["s"]["buckets"]])

    # -- leases -----------------------------------------------------------------------------
    def acquire_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        """Create the lease document, or take it over (conditionally on its version) when it is
        ours or expired. Expiry uses this host's clock: keep workers' clocks in sync."""
        doc_id = _doc_id(user_id)
        now_ms = int(time.time() * 1000)
        source = {"user_id": user_id, "owner": owner, "expires_ms": now_ms + int(ttl_s * 1000)}
        try:
            current = self.es.options(ignore_status=404).get(index=self.leases_index, id=doc_id)
            if not current.get("found"):
                self.es.index(index=self.leases_index, id=doc_id, document=source, op_type="create", refresh="wait_for")
                return True
            held = current["_source"]
            if held["owner"] != owner and held["expires_ms"] > now_ms:
                return False
            self.es.index(index=self.leases_index, id=doc_id, document=source, if_seq_no=current["_seq_no"],
                          if_primary_term=current["_primary_term"], refresh="wait_for")
            return True
        except ConflictError:
            return False  # another worker took or renewed it in between
        except (ApiError, TransportError) as exc:
            raise StoreError(f"Elasticsearch error: {exc}") from exc

    def renew_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        doc_id = _doc_id(user_id)
        now_ms = int(time.time() * 1000)
        try:
            current = self.es.options(ignore_status=404).get(index=self.leases_index, id=doc_id)
            held = current["_source"] if current.get("found") else None
            if held is None or held["owner"] != owner or held["expires_ms"] <= now_ms:
                return False
            renewed = dict(held, expires_ms=now_ms + int(ttl_s * 1000))
            self.es.index(index=self.leases_index, id=doc_id, document=renewed,
                          if_seq_no=current["_seq_no"], if_primary_term=current["_primary_term"], refresh="wait_for")
            return True
        except ConflictError:
            return False  # changed hands in between
        except (ApiError, TransportError) as exc:
            raise StoreError(f"Elasticsearch error: {exc}") from exc

    def release_lease(self, user_id: str, owner: str) -> None:
        doc_id = _doc_id(user_id)
        try:
            current = self.es.options(ignore_status=404).get(index=self.leases_index, id=doc_id)
            if current.get("found") and current["_source"]["owner"] == owner:
                self.es.delete(index=self.leases_index, id=doc_id, if_seq_no=current["_seq_no"],
                               if_primary_term=current["_primary_term"], refresh="wait_for")
        except (ConflictError, ESNotFoundError):
            pass  # taken over or gone: nothing of ours to release
        except (ApiError, TransportError) as exc:
            raise StoreError(f"Elasticsearch error: {exc}") from exc
