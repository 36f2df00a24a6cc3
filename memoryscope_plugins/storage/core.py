"""`StoreBase`: the `MemoryStore` protocol built on a few primitives, as LangGraph's `BaseStore`
builds get/search/list on `batch`. A backend subclasses it and implements only the primitives
(the abstract methods below), each the one place its engine does something its own way:

- meta: `get_meta`, `set_meta`;
- records: `_commit` (put memories and ledger changes and mark messages done, atomically),
  `set_vectors`, `get`, `delete`, `delete_user`, `rename_user`, `list`, `count`, `users`,
  `_memory_page`, `count_needing_vectors`;
- the entity ledger and the profile: `entities`, `mentions`, `profile_values` (written through
  `_commit` and `_log`), `_edit_ledger` (a read-modify-write no other edit of the user interleaves with);
- search: `search` (both channels, each with its own ranks and scores);
- the message log: `_log`, `_read_messages`, `_set_message_state`, `users_with_pending`;
- reading back what a copy needs: `vectors_of` (vectors as stored), `_message_page` (every state);
- leases: `acquire_lease`, `renew_lease`, `release_lease` (and the fence in `_commit`:
  `leases.require_held`); and `close`.

Built here once: `put`, `put_ledger`, `edit_ledger`, `commit_consolidation`, `append_messages`, `iter_memories`,
`iter_needing_vectors`, `pending_messages`, `recent_messages`, `mark_messages`, `memory_pages`, `iter_messages`,
`copy_messages`, and use as a context manager.

What a backend shares with the others is in modules of their own: columns and row conversion
(`records`, `ledger_records`), time encoding (`timecodes`), the filter rules (`filtering.matches`, the reference its
query translation is tested against), message states (`messages`), BM25 constants (`term_index`).
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from typing import Any, Iterator, Literal, Mapping, Sequence, TypeVar

import numpy as np

from ..types import Entity, EntityMention, Memory, Message, ProfileValue
from . import records
from .base import (
    Candidate,
    LedgerChanges,
    LedgerEdit,
    LedgerReader,
    MemoryFilter,
    SearchRequest,
    StoredMessage,
    VectorRows,
    message_ids_for,
)
from .leases import Lease
from .ledger_records import check_changes
from .messages import DONE, PENDING, check_state
from .tool_counters import Counter

_Store = TypeVar("_Store", bound="StoreBase")


def _checked(ledger: LedgerChanges | None) -> LedgerChanges | None:
    """The changes when there are any (checked: `ledger_records.check_changes`), else None."""
    if not ledger:
        return None
    check_changes(ledger)
    return ledger


class BoundReader:
    """A `LedgerReader` over a backend's ledger reads that take a connection first (`reads`: the
    backend's ledger module or object), bound to one connection inside a transaction."""

    def __init__(self, reads: Any, conn: Any) -> None:
        self._reads, self._conn = reads, conn

    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        return self._reads.entities(self._conn, user_id, ids, kind)

    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]:
        return self._reads.mentions(self._conn, user_id, entity_ids, memory_ids)

    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]:
        return self._reads.profile_values(self._conn, user_id, key, current_only)


def in_order(ids: Sequence[str], found: Mapping[str, Memory]) -> list[Memory]:
    """The memories found, in the order their ids were asked for (unknown ids left out)."""
    return [found[i] for i in ids if i in found]


class StoreBase(ABC):
    """A `MemoryStore` from primitives; see the module docstring for what a backend implements."""

    embedding_model: str | None
    text_statistics: Literal["user", "index"]

    # -- primitives ------------------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    def _commit(self, memories: Sequence[Memory], vectors: VectorRows | None,
                done_message_ids: Sequence[str], lease: Lease | None = None,
                ledger: LedgerChanges | None = None) -> None:
        """Put `memories` (vectors aligned by row, see `MemoryStore.put`), apply `ledger` (checked
        by `ledger_records.check_changes` already; the store checks in the same transaction that
        no id is another user's and that every mention's memory and entity are the user's, after
        the call's memories and entities are written) and mark the messages done, all or nothing;
        with `lease`, first check in the same transaction that it is held (`leases.require_held`),
        writing nothing when it is not."""

    @abstractmethod
    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None: ...

    @abstractmethod
    def get(self, user_id: str, ids: Sequence[str]) -> list[Memory]: ...

    @abstractmethod
    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        """Delete the user's memories of these ids, their mentions, and the logged messages of the
        turns among them (a turn's message is logged under the turn's id), so that consolidation
        never brings back what was deleted; returns how many memories were deleted."""

    @abstractmethod
    def delete_user(self, user_id: str) -> int: ...

    @abstractmethod
    def rename_user(self, old_user_id: str, new_user_id: str) -> int: ...

    @abstractmethod
    def list(self, user_id: str, flt: MemoryFilter, *, limit: int = 100, offset: int = 0,
             newest_first: bool = True) -> builtins.list[Memory]: ...

    @abstractmethod
    def count(self, user_id: str, flt: MemoryFilter) -> int: ...

    @abstractmethod
    def users(self) -> builtins.list[str]:
        """Every user with memories or logged messages, sorted (what `MemoryScope.users` lists)."""

    @abstractmethod
    def stored_users(self) -> builtins.list[str]:
        """Every user with anything stored, sorted: memories, logged messages, entities, mentions,
        profile values or tool counters. Beyond `users`, a user with only a profile (set by hand on
        a new user) or whose memories were all deleted but whose ledger remains; what `migrate`
        copies and verifies."""

    @abstractmethod
    def _memory_page(self, user_id: str | None, *, needing_vectors: bool, after: int,
                     limit: int) -> builtins.list[tuple[int, Memory]]:
        """Up to `limit` memories in insertion order after the position `after` (0: from the
        start), each with its position; of one user or (None) all users; with `needing_vectors`,
        only those whose vector is missing or from another model than the store's."""

    @abstractmethod
    def count_needing_vectors(self) -> int: ...

    @abstractmethod
    def search(self, request: SearchRequest) -> builtins.list[Candidate]: ...

    @abstractmethod
    def _log(self, rows: Sequence[tuple[Any, ...]], memories: Sequence[Memory], vectors: VectorRows | None,
             ledger: LedgerChanges | None = None) -> None:
        """Log the messages (encoded rows in `records.MESSAGE_WRITE_COLUMNS` order, numbered in
        order), put `memories` and apply `ledger` (as `_commit` does), all or nothing."""

    @abstractmethod
    def logged_message_ids(self, user_id: str, ids: Sequence[str]) -> set[str]:
        """Those of `ids` that name a message of the user's log (any state), read from the primary."""

    @abstractmethod
    def entities(self, user_id: str, *, ids: Sequence[str] | None = None,
                 kind: str | None = None) -> builtins.list[Entity]:
        """The user's entities (those of `ids`, of one `kind`, when given) by id, each with its
        figures computed from its mentions (`ledger_records.Figures`)."""

    @abstractmethod
    def mentions(self, user_id: str, *, entity_ids: Sequence[str] | None = None,
                 memory_ids: Sequence[str] | None = None) -> builtins.list[EntityMention]:
        """The user's mentions (of those entities, in those memories, when given), in
        `ledger_records.mention_order`."""

    @abstractmethod
    def profile_values(self, user_id: str, *, key: str | None = None,
                       current_only: bool = False) -> builtins.list[ProfileValue]:
        """The user's profile values (of one `key`; only the current ones), in
        `ledger_records.profile_order`."""

    @abstractmethod
    def _edit_ledger(self, user_id: str, edit: LedgerEdit) -> LedgerChanges | None:
        """Run `edit` (already wrapped to check what it returns) on a reader of `user_id`'s ledger
        and write the changes it returns, as `_commit` writes a ledger, with no other
        `_edit_ledger` of that user in between (a lock held from the reads to the commit, or an
        optimistic check that runs `edit` again after a concurrent edit); returns what was written."""

    @abstractmethod
    def tool_counters(self, agent_id: str, *, tool: str | None = None, user_id: str | None = None,
                      team: str | None = None) -> builtins.list[Counter]:
        """The tool statistics' counters of an agent (of one tool, of one user's calls, of the
        calls of one team's users: ids starting ``<team>:``, or for team "" the ids without ``:``,
        when given), summed over the users, in (tool, kind, key) order (`tool_counters.summed`)."""

    @abstractmethod
    def _read_messages(self, user_id: str, *, agent_id: str | None = None, state: str | None = None,
                       before_seq: int | None = None, limit: int,
                       newest_first: bool) -> builtins.list[StoredMessage]:
        """Up to `limit` of a user's logged messages by `seq`, with the constraints given."""

    @abstractmethod
    def _set_message_state(self, ids: Sequence[str], state: str) -> None:
        """Set the messages' state (a checked one); a failure counts an attempt."""

    @abstractmethod
    def users_with_pending(self) -> builtins.list[str]: ...

    @abstractmethod
    def _message_page(self, user_id: str, *, after_seq: int, limit: int) -> builtins.list[StoredMessage]:
        """Up to `limit` of a user's logged messages of every state with `seq` above `after_seq`,
        oldest first."""

    @abstractmethod
    def vectors_of(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors (float32 rows, as the store keeps them) of those of the user's
        memories `ids` that have one, by id; each was made by its memory's `embedding_model`."""

    @abstractmethod
    def acquire_lease(self, user_id: str, owner: str, ttl_s: float) -> bool: ...

    @abstractmethod
    def renew_lease(self, user_id: str, owner: str, ttl_s: float) -> bool:
        """Extend the lease to `ttl_s` from now only while `owner` holds it unexpired; False
        (nothing changed) when it expired or changed hands: unlike `acquire_lease`, never takes
        back a lease that lapsed meanwhile (another worker may have used it)."""

    @abstractmethod
    def release_lease(self, user_id: str, owner: str) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    # -- built on them ---------------------------------------------------------------------------
    def put(self, memories: Sequence[Memory], vectors: VectorRows | None = None) -> None:
        """Insert or replace records (and their vectors) atomically; see `MemoryStore.put`."""
        self._commit(memories, vectors, ())

    def put_ledger(self, changes: LedgerChanges) -> None:
        """Apply changes to one user's entity ledger and profile in one transaction (see
        `LedgerChanges`): `ValueError`, nothing written, when an item is another user's or a
        mention names a memory or an entity the user does not have."""
        if changes:
            self._commit((), None, (), ledger=_checked(changes))

    def edit_ledger(self, user_id: str, edit: LedgerEdit) -> LedgerChanges | None:
        """Read and change one user's ledger with no other `edit_ledger` of that user in between,
        so concurrent read-modify-write edits (threads, several processes) lose nothing: `edit`
        gets a `LedgerReader` and returns the changes to write (`put_ledger`'s rules; they must be
        `user_id`'s) or None. It may run more than once, so it only reads and computes; an
        exception from it writes nothing. Returns the changes written (None: nothing)."""
        def checked(reader: LedgerReader) -> LedgerChanges | None:
            changes = edit(reader)
            if changes is not None and changes.user_id != user_id:
                raise ValueError(f"an edit of user {user_id!r}'s ledger returned changes of another user")
            return _checked(changes)
        return self._edit_ledger(user_id, checked)

    def commit_consolidation(self, memories: Sequence[Memory], vectors: VectorRows | None,
                             done_message_ids: Sequence[str], *, lease: Lease | None = None,
                             ledger: LedgerChanges | None = None) -> None:
        """Store what consolidation made (new and changed memories; `vectors` aligned with
        `memories`, a None row keeps the stored vector) and mark its messages done, in one
        transaction: a crash leaves either both or neither, so no message is consolidated twice.

        With `lease` (a fenced commit), the transaction first checks that `lease.owner` still holds
        `lease.user_id`'s lease and that it has not expired, and raises `LeaseLostError` (writing
        nothing) otherwise: a worker paused past its lease cannot commit over its successor.

        `ledger`: changes to the entity ledger and profile, in the same transaction (`put_ledger`'s
        rules; a mention may name a memory of this call)."""
        self._commit(memories, vectors, done_message_ids, lease, ledger=_checked(ledger))

    def iter_memories(self, user_id: str | None, batch_size: int = 1000) -> Iterator[builtins.list[Memory]]:
        """Batches of memories in insertion order, of one user or (None) of all users."""
        return self._pages(user_id, needing_vectors=False, batch_size=batch_size)

    def iter_needing_vectors(self, batch_size: int = 1000) -> Iterator[builtins.list[Memory]]:
        """Batches of memories whose vector is missing or from another embedding model."""
        return self._pages(None, needing_vectors=True, batch_size=batch_size)

    def memory_pages(self, user_id: str | None, *, after: int = 0,
                     batch_size: int = 1000) -> Iterator[tuple[int, builtins.list[Memory]]]:
        """Batches of memories in insertion order after the position `after` (0: from the start),
        each with the position of its last memory, so a reader can stop and later go on from there
        (while nobody writes to the store)."""
        return self._positioned_pages(user_id, needing_vectors=False, after=after, batch_size=batch_size)

    def _pages(self, user_id: str | None, *, needing_vectors: bool,
               batch_size: int) -> Iterator[builtins.list[Memory]]:
        for _, batch in self._positioned_pages(user_id, needing_vectors=needing_vectors, after=0,
                                               batch_size=batch_size):
            yield batch

    def _positioned_pages(self, user_id: str | None, *, needing_vectors: bool, after: int,
                          batch_size: int) -> Iterator[tuple[int, builtins.list[Memory]]]:
        while True:
            page = self._memory_page(user_id, needing_vectors=needing_vectors, after=after, limit=batch_size)
            if not page:
                return
            after = page[-1][0]
            yield after, [memory for _, memory in page]

    def iter_messages(self, user_id: str, batch_size: int = 1000) -> Iterator[builtins.list[StoredMessage]]:
        """Batches of every logged message of a user (pending, done and failed), oldest first."""
        after = 0
        while True:
            page = self._message_page(user_id, after_seq=after, limit=batch_size)
            if not page:
                return
            after = page[-1].seq
            yield page

    def copy_messages(self, messages: Sequence[StoredMessage], memories: Sequence[Memory] = (),
                      vectors: VectorRows | None = None, *, ledger: LedgerChanges | None = None) -> None:
        """Log messages read from another store, each with its own id, user, agent, session and
        state (attempt counts start again at 0), numbered in this order, all or nothing; with them,
        in the same transaction, `memories` (and their `vectors`) and the `ledger` changes (an
        import's)."""
        self._log([records.message_values(m.id, m.user_id, m.agent_id, m.session_id, m.message, m.state)
                   for m in messages], memories, vectors, _checked(ledger))

    def append_messages(self, user_id: str, agent_id: str, messages: Sequence[Message],
                        session_id: str | None = None, memories: Sequence[Memory] = (),
                        vectors: np.ndarray | None = None, *, state: str = PENDING,
                        message_ids: Sequence[str] | None = None,
                        ledger: LedgerChanges | None = None) -> builtins.list[str]:
        """Log messages (and, in the same transaction, the memories made from them and the
        `ledger` changes they bring, as `put_ledger` applies them); returns their ids
        (`message_ids` when given, else new random ones). A tool call's message is logged as done
        (no consolidation reads it) and counted in the tool statistics (`tool_counters`)."""
        ids = message_ids_for(messages, message_ids)
        # a tool call is the agent's, never consolidated into the user's memories: logged as done
        self._log([records.message_values(message_id, user_id, agent_id, session_id, message,
                                          state if message.tool_call is None else DONE)
                   for message_id, message in zip(ids, messages)], memories, vectors, _checked(ledger))
        return ids

    def pending_messages(self, user_id: str, limit: int = 100) -> builtins.list[StoredMessage]:
        """The user's pending messages, oldest first."""
        return self._read_messages(user_id, state=PENDING, limit=limit, newest_first=False)

    def recent_messages(self, user_id: str, agent_id: str | None, before_seq: int | None,
                        limit: int) -> builtins.list[StoredMessage]:
        """The last `limit` messages (of one agent, before a position, when given), oldest first."""
        newest = self._read_messages(user_id, agent_id=agent_id, before_seq=before_seq, limit=limit,
                                     newest_first=True)
        return newest[::-1]

    def mark_messages(self, ids: Sequence[str], state: str) -> None:
        """Set the messages' state (pending, done or failed; failed counts an attempt)."""
        self._set_message_state(ids, check_state(state))

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
