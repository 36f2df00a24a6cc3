"""The storage protocol every backend implements (embedded SQLite, PostgreSQL, Elasticsearch).

Kept narrow on purpose: records in and out, one candidate search that returns both the full-text
and the vector channel, a durable message log that doubles as the consolidation queue, and a
small key/value table for store-wide facts (schema version, embedding model). Ranking (fusion,
weights, time boosts) happens in the engine, so every backend ranks the same way.

Backends implement it by subclassing `core.StoreBase`, which builds the convenience methods on a
few primitives (listed there and in docs/storage.md).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Protocol, Sequence, TypeAlias, runtime_checkable

import numpy as np

from ..types import Entity, EntityMention, Memory, MemoryStatus, MemoryType, Message, ProfileValue, TimeRange
from .leases import Lease
from .messages import PENDING

if TYPE_CHECKING:
    from .tool_counters import Counter

# vectors aligned with the memories they go with: a 2-D array, or rows where None keeps the stored
# vector and an empty row clears it
VectorRows: TypeAlias = "np.ndarray | Sequence[np.ndarray | None]"


@dataclass(slots=True)
class MemoryFilter:
    """Which of a user's memories a call may see. `None` means no constraint on that field.

    `time_range` keeps a memory whose message time falls in the range or whose event time
    overlaps it.
    """

    agent_id: str | None = None
    types: tuple[MemoryType, ...] | None = None
    statuses: tuple[MemoryStatus, ...] | None = (MemoryStatus.ACTIVE,)
    time_range: TimeRange | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        # one shape for every backend (a tuple of members: the stores key cached masks by it): a
        # list, one member or its value ("insight") are taken; anything else is a ValueError here
        self.types = _members(MemoryType, self.types, "types")
        self.statuses = _members(MemoryStatus, self.statuses, "statuses")


def _members(enum: Any, value: Any, what: str) -> Any:
    """`value` (None, one member or its value, or an iterable of them) as a tuple of `enum` members."""
    if value is None:
        return None
    items = [value] if isinstance(value, (str, enum)) else value
    try:
        return tuple(enum(item) for item in items)
    except (TypeError, ValueError):
        raise ValueError(f"MemoryFilter {what} must be {enum.__name__} members or their values") from None


def id_list(ids: Any, what: str = "ids") -> list[str]:
    """`ids` as a list of strings; `ValueError` for a string (it would be read letter by letter)
    or anything that is not a sequence of strings."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Collection) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{what} must be a list of id strings")
    return list(ids)


@dataclass(slots=True)
class SearchRequest:
    user_id: str
    text: str | None  # raw query text; the backend analyses it its own way
    vector: np.ndarray | None  # normalised query vector in the store's embedding space
    filter: MemoryFilter = field(default_factory=MemoryFilter)
    limit: int = 50  # candidates per channel


@dataclass(slots=True)
class Candidate:
    """One memory found by either channel, with its rank (1 = best) and raw score in each."""

    # the stores build candidates positionally from `user_index.search`'s fields: keep this order
    memory: Memory
    text_rank: int | None = None
    text_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None  # cosine similarity
    # the memory's stored vector when the store holds it at hand (None: read it with `vectors_of`)
    vector: np.ndarray | None = None


@dataclass(slots=True)
class StoredMessage:
    """A recorded message in the durable log (the consolidation queue)."""

    id: str
    user_id: str
    agent_id: str
    message: Message
    seq: int
    state: str = PENDING  # one of messages.MESSAGE_STATES: pending | done | failed
    attempts: int = 0
    session_id: str | None = None


@dataclass(slots=True)
class LedgerChanges:
    """Changes to one user's entity ledger and profile, written with the memories of the same
    call in one transaction (or alone by `put_ledger`).

    Entities and profile values are upserted by id, mentions by (entity_id, memory_id);
    `removed_entities` are deleted with their mentions (never their memories). `relinked_memories`
    are memories whose text changed: their mentions are dropped first, so the call's `mentions`
    of them are all their links afterwards (none: unlinked). Every item must belong to `user_id`
    (`ValueError` otherwise, nothing written)."""

    user_id: str
    entities: Sequence[Entity] = ()
    mentions: Sequence[EntityMention] = ()
    removed_entities: Sequence[str] = ()
    profile: Sequence[ProfileValue] = ()
    relinked_memories: Sequence[str] = ()

    def __bool__(self) -> bool:
        return bool(self.entities or self.mentions or self.removed_entities or self.profile
                    or self.relinked_memories)


class LedgerReader(Protocol):
    """The ledger's reads, as `MemoryStore` has them; inside `MemoryStore.edit_ledger`, bound to
    the edit's transaction."""

    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]: ...
    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]: ...
    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]: ...


# an edit of one user's ledger: reads what it needs, returns the changes to write (None: nothing)
LedgerEdit: TypeAlias = Callable[[LedgerReader], "LedgerChanges | None"]


@runtime_checkable
class MemoryStore(Protocol):
    """A store of memory records, partitioned by user. Every call names its user; no call crosses users
    except the admin ones that say so (`users`, `iter_memories(None)`).

    `embedding_model` is the name of the embedder whose vectors the store compares; the engine
    sets it before use. `text_statistics` says whose statistics full-text ranking uses: "user"
    (each user's own memories: another user's never change your ranking) or "index" (the whole
    index, as Elasticsearch does)."""

    embedding_model: str | None
    text_statistics: Literal["user", "index"]

    # -- store-wide facts --------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...

    # -- records ------------------------------------------------------------------------------
    def put(self, memories: Sequence[Memory], vectors: VectorRows | None = None) -> None:
        """Insert or replace records (and their vectors, aligned by row) atomically: all or none.

        A None vector row keeps an existing memory's stored vector; an empty row (size 0) clears it,
        so the memory counts as needing a vector until it is re-embedded. Ids are unique across
        the store: a put of an id that belongs to another user raises `ValueError`."""
    def get(self, user_id: str, ids: Sequence[str]) -> list[Memory]: ...
    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        """Delete the user's memories of these ids with their mentions, and the logged messages of
        the turns among them (logged under the turn's id); returns how many memories were deleted."""
    def delete_user(self, user_id: str) -> int: ...
    def list(self, user_id: str, flt: MemoryFilter, *, limit: int = 100, offset: int = 0,
             newest_first: bool = True) -> builtins.list[Memory]: ...
    def count(self, user_id: str, flt: MemoryFilter) -> int: ...
    def users(self) -> builtins.list[str]: ...
    def rename_user(self, old_user_id: str, new_user_id: str) -> int:
        """Move every memory (with its vector) and logged message of one user to another id in one
        transaction; returns how many memories moved. `ValueError` when the new id already has
        memories or messages. Leases of the old id are dropped (the caller holds them)."""
    def iter_memories(self, user_id: str | None, batch_size: int = 1000) -> Iterator[builtins.list[Memory]]: ...
    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None: ...
    def count_needing_vectors(self) -> int:
        """Memories whose vector is missing or was made by another embedding model than the store's."""
    def iter_needing_vectors(self, batch_size: int = 1000) -> Iterator[builtins.list[Memory]]: ...

    # -- search -------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> builtins.list[Candidate]: ...
    def vectors_of(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors (float32 rows) of those of the user's memories `ids` that have one, by
        id; retrieval reads its candidates' vectors with it, right after `search`."""

    # -- the durable message log ----------------------------------------------------------------
    def append_messages(self, user_id: str, agent_id: str, messages: Sequence[Message],
                        session_id: str | None = None,
                        memories: Sequence[Memory] = (), vectors: np.ndarray | None = None, *,
                        message_ids: Sequence[str] | None = None,
                        ledger: LedgerChanges | None = None) -> builtins.list[str]:
        """Log messages (and, in the same transaction, the memories made from them and the ledger
        changes they bring); returns their ids (`message_ids` when given: the engine gives each
        message its turn memory's id)."""
    def logged_message_ids(self, user_id: str, ids: Sequence[str]) -> set[str]:
        """Those of `ids` that name a message of the user's log (any state), read from the
        primary (a keyed `record` asks it which of its messages are there already)."""
    def pending_messages(self, user_id: str, limit: int = 100) -> builtins.list[StoredMessage]: ...
    def mark_messages(self, ids: Sequence[str], state: str) -> None: ...
    def commit_consolidation(self, memories: Sequence[Memory], vectors: VectorRows | None,
                             done_message_ids: Sequence[str], *, lease: Lease | None = None,
                             ledger: LedgerChanges | None = None) -> None:
        """Put `memories` (new or changed; a None vector row keeps the stored vector), apply the
        `ledger` changes and mark the messages done, in one transaction; with `lease`, only while
        that lease is held (checked in the same transaction; `LeaseLostError` otherwise, nothing
        written)."""
    def users_with_pending(self) -> builtins.list[str]: ...
    def iter_messages(self, user_id: str, batch_size: int = 1000) -> Iterator[builtins.list[StoredMessage]]:
        """Batches of every logged message of a user (every state), oldest first."""
    def copy_messages(self, messages: Sequence[StoredMessage], memories: Sequence[Memory] = (),
                      vectors: VectorRows | None = None, *, ledger: LedgerChanges | None = None) -> None:
        """Log messages with their own ids, users, agents, sessions and states (and, in the same
        transaction, `memories` and `ledger` changes), all or nothing."""
    def recent_messages(self, user_id: str, agent_id: str | None, before_seq: int | None,
                        limit: int) -> builtins.list[StoredMessage]: ...

    def tool_counters(self, agent_id: str, *, tool: str | None = None, user_id: str | None = None,
                      team: str | None = None) -> builtins.list[Counter]:
        """The counters of the agent's logged tool calls (storage.tool_counters), summed over its
        users (or of one user's calls, or over the users of one team: ids starting ``<team>:``,
        for team "" the ids without ``:``), in (tool, kind, key) order."""

    # -- the entity ledger and the profile ---------------------------------------------------------
    def put_ledger(self, changes: LedgerChanges) -> None:
        """Apply `changes` in one transaction; `ValueError`, nothing written, when an item is
        another user's or a mention names a memory or entity the user does not have."""
    def edit_ledger(self, user_id: str, edit: LedgerEdit) -> LedgerChanges | None:
        """Read and change one user's ledger with no other `edit_ledger` of that user in between
        (a read-modify-write that loses no concurrent edit): `edit` reads through the reader it
        is given and returns the changes to write, or None; returns what was written. `edit` may
        run more than once (a store that checks optimistically runs it again after a concurrent
        edit), so it only reads and computes; an exception from it writes nothing."""
    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        """The user's entities by id, with the figures computed from their mentions."""
    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]: ...
    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]: ...

    # -- per-user lease, so one user's consolidation runs in one worker at a time ---------------
    def acquire_lease(self, user_id: str, owner: str, ttl_s: float) -> bool: ...
    def renew_lease(self, user_id: str, owner: str, ttl_s: float) -> bool: ...
    def release_lease(self, user_id: str, owner: str) -> None: ...

    def close(self) -> None: ...


#: the largest finite float16: SQLite and PostgreSQL keep vectors as float16 (an embedder's vectors
#: are normalised, far below it)
FLOAT16_MAX = 65504.0


def vector_rows(vectors: Any, n: int) -> list[np.ndarray | None]:
    """Vectors aligned with n records, as float32 rows: a 2-D array, or a sequence whose rows may
    be None (keep the stored vector) or empty (clear it). Shared by the server stores."""
    if vectors is None:
        return [None] * n
    if len(vectors) != n:
        raise ValueError("vectors must align with memories")
    out: list[np.ndarray | None] = []
    for row in vectors:
        if row is None:
            out.append(None)
        else:
            arr = np.asarray(row, dtype=np.float32).reshape(-1)
            if not np.all(np.isfinite(arr)):
                raise ValueError("vectors must be finite")
            if arr.size and float(np.abs(arr).max()) > FLOAT16_MAX:
                raise ValueError(f"vector values must be within +-{FLOAT16_MAX:g} (stores keep float16)")
            out.append(arr)
    return out


def vector_rows_for(ids: Sequence[str], vectors: Any) -> list[np.ndarray | None]:
    """`set_vectors`' rows, checked: one per id, finite, as float32."""
    if len(ids) != len(vectors):
        raise ValueError("vectors must align with ids")
    return vector_rows(vectors, len(ids))


def merge_batch(memories: Sequence[Memory], vectors: Any
                ) -> tuple[dict[str, tuple[Memory, np.ndarray | None]], set[str]]:
    """A put batch by id, for the server stores: later entries win, a None vector keeps an earlier
    one of the same batch, an empty vector row marks the id as clearing its stored vector."""
    merged: dict[str, tuple[Memory, np.ndarray | None]] = {}
    cleared: set[str] = set()
    for memory, vector in zip(memories, vector_rows(vectors, len(memories))):
        if vector is not None and vector.size == 0:
            cleared.add(memory.id)
            vector = None
        elif memory.id in merged and vector is None:
            vector = merged[memory.id][1]
        merged[memory.id] = (memory, vector)
    return merged, cleared


def message_ids_for(messages: Sequence[Message], message_ids: Sequence[str] | None) -> list[str]:
    """The ids `append_messages` stores: the caller's (one per message) or new random ones."""
    ids = list(message_ids) if message_ids is not None else [uuid.uuid4().hex for _ in messages]
    if len(ids) != len(messages):
        raise ValueError("message_ids must align with messages")
    return ids
