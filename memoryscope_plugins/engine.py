"""`MemoryScope`: the engine's one public object.

One instance serves many users from one store; nothing is process-wide. Every public method has
an async twin (`a` + name) that runs the same implementation in a worker thread, so the two can
never drift apart.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import functools
import logging
import os
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from . import (
    log_hygiene,
    message_keys,
    metrics,
    person,
    tool_calls,
    tool_stats,
    tracing,
    transfer,
    transfer_procedures as procedure_transfer,
    transfer_tools,
    validation,
)
from .errors import ConfigError, ModelError, NotFoundError, StaleLedgerError, StoreError, ValidationError
from .models.base import ChatModel, Embedder, Reranker
from .person import name_rules, record_names
from .person.short_forms import addressed_aliases
from .procedures import edit as procedure_edit, scope as procedure_scope
from .retrieval import ledger_cache, pipeline, procedures as procedure_retrieval
from .settings import Settings
from .storage import read_consistency
from .storage.base import LedgerChanges, LedgerReader, MemoryFilter, MemoryStore
from .storage.leases import Lease
from .storage.read_consistency import Consistency
from .storage.records import TOOL_CALL_KEY
from .timeparse import MENTIONS_KEY, detect_language, mentioned_range, time_mentions
from .types import (
    Entity,
    EntityDetails,
    EntityKind,
    Memory,
    MemoryStatus,
    MemoryType,
    Message,
    ProfileValue,
    RetrievalResult,
    TimeRange,
    ToolStats,
    as_aware,
    utc_now,
)
from .vectors import document_vectors, vector_space

log = logging.getLogger("memoryscope_plugins")

ID_TAKEN = "memory_id cannot be used: it clashes with a stored memory; choose another id or leave it out"
CONVERSATION_GAP = timedelta(hours=6)  # without session ids, a longer silence starts a new conversation
#: Seconds a user's cached name matcher is trusted before the ledger is read again (other processes,
#: e.g. consolidation workers, add entities this engine does not see being written).
MATCHER_TTL_S = 5.0
_MATCHER_USERS = 1024  # users whose matcher is kept (least recently used dropped first)
_ORDERS = ("relevance", "frequency", "recency")
#: writes of one `record` call when other writers log some of its keyed messages meanwhile
_KEYED_WRITE_ATTEMPTS = 3
_BUCKETS = ("week", "month")


def _async_twin(method):
    """Make `a<name>` from a sync method: same implementation, run off the event loop."""

    @functools.wraps(method)
    async def twin(self, *args, **kwargs):
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__name__ = "a" + method.__name__
    twin.__doc__ = f"Async twin of :meth:`{method.__name__}`."
    return twin


def _check_id(value: Any, what: str) -> str:
    return validation.check_id(value, what)


def _stored_id(value: Any, what: str) -> str:
    """An id to read or remove by: also one stored before the identifier rule (see `check_stored_id`)."""
    return validation.check_stored_id(value, what)


def _check_team(team: Any) -> str:
    """A team (tenant) as the part of a user id before its first ``:``, or "" for ids without one."""
    if not isinstance(team, str) or ":" in team or (team and validation.id_problem(team) is not None):
        raise ValidationError("team must be \"\" or an id without ':' (the part of a user id before its first ':')")
    return team


@dataclasses.dataclass(frozen=True)
class _Written:
    """What one `record` write stored: its ledger changes, whether its turns were embedded, how many said."""

    ledger: LedgerChanges
    embedded: bool
    said: int


class MemoryScope:
    """A long-term memory for LLM agents.

    With no arguments it keeps memories in ``~/.memoryscope/memory.db`` (or ``$MEMORYSCOPE_HOME``)
    and embeds them with a local model; no key, no server, no download.

    Args:
        settings: a `Settings` (or a path to a YAML settings file). Environment variables
            ``MEMORYSCOPE_*`` apply either way.
        path: shortcut for ``settings.store.path`` (the SQLite file).
        store, embedder, reranker, llm: ready objects that replace what settings would build.

    Example::

        memory = MemoryScope(path="memory.db")
        memory.record("anna", [{"role": "user", "content": "I moved to Lisbon last May."}])
        print(memory.retrieve("anna", "Where does Anna live?").context)
    """

    def __init__(self, settings: Settings | str | os.PathLike[str] | None = None, *,
                 path: str | os.PathLike[str] | None = None, store: MemoryStore | None = None,
                 embedder: Embedder | None = None, reranker: Reranker | None = None,
                 llm: ChatModel | None = None, start_worker: bool | None = None) -> None:
        if settings is None:
            settings = Settings.load()
        elif isinstance(settings, (str, os.PathLike)):
            settings = Settings.load(settings)
        elif not isinstance(settings, Settings):
            raise ValidationError("settings must be a Settings, a path to a YAML file, or None")
        if path is not None:
            settings = settings.model_copy(update={"store": settings.store.model_copy(update={"path": Path(path)})})
        validation.check_settings(settings)
        self.settings = settings
        if settings.traces:
            tracing.enable()
        from .log_hygiene import quiet_sdk_loggers
        quiet_sdk_loggers(settings.log_content)
        from .models.factory import build_embedder, build_llm, build_reranker
        self.embedder: Embedder = (embedder if embedder is not None
                                   else build_embedder(settings.embedder, settings.language))
        self.reranker: Reranker | None = reranker if reranker is not None else build_reranker(settings.reranker)
        self.llm: ChatModel | None = llm if llm is not None else build_llm(settings.llm)
        self.store: MemoryStore = store if store is not None else self._build_store()
        self.store.embedding_model = vector_space(self.embedder)
        self._closed = False
        self._matchers = _MatcherCache(self.store)
        self._reembed_lock = threading.Lock()
        self._vectors_missing = False
        try:
            self.reembed_if_needed()
        except ModelError as exc:  # keep serving: full text works, vectors follow when the model is back
            log.warning("could not embed stored memories on start (%s)", type(exc).__name__)
            self._vectors_missing = True
        self._consolidation = None
        self._worker_task: asyncio.Task | None = None
        self._runs_worker = False  # whether this process consolidates in the background (flush_on_close)
        if self.llm is not None and settings.consolidation.enabled:
            self._consolidation = self._build_consolidation(start_worker)

    # -- construction -------------------------------------------------------------------------
    def _build_store(self) -> MemoryStore:
        from .storage.registry import build_store
        return build_store(self.settings.store, embedding_model=self.embedder.name)

    def _build_consolidation(self, start_worker: bool | None):
        from .consolidation.service import ConsolidationService
        service = ConsolidationService(self)  # takes the store, models and settings, not the engine
        # what a step wrote (new entities, aliases, mentions of observations) is seen by this
        # process's next `record` and `retrieve` at once, not after the caches' time to live
        service.add_listener(lambda user_id, report: self._matchers.invalidate(user_id))
        if start_worker is None:
            start_worker = self.settings.consolidation.worker == "thread"
        if start_worker:
            service.start()
            self._runs_worker = True
        return service

    def reembed_if_needed(self, *, progress: bool | None = None) -> int:
        """Embed every memory whose vector is missing or from another model; returns how many.

        Runs on start-up when the embedding model changed, with a progress bar on a terminal.
        Until it finishes, memories of the old model are found by full text only: vector spaces
        are never mixed.
        """
        with self._reembed_lock:
            total = self.store.count_needing_vectors()
            if total == 0:
                return 0
            log.info("embedding %d memories with %s", total, vector_space(self.embedder))
            bar = _progress(total, "re-embedding", progress)
            done = 0
            try:
                for batch in self.store.iter_needing_vectors(batch_size=256):
                    vectors = document_vectors(self.embedder, batch)
                    self.store.set_vectors([m.id for m in batch], vectors)
                    done += len(batch)
                    bar.update(len(batch))
            finally:
                bar.close()
            return done

    def _embed_documents(self, memories: Sequence[Memory]):
        """Vectors for new or changed memories; None when the embedder fails. The memories are then
        stored without vectors (found by full text) and embedded later, so a failing embedding
        service never loses a memory."""
        try:
            return document_vectors(self.embedder, memories)
        except ModelError as exc:
            log.warning("embedding failed (%s); storing %d memories without vectors until the model is back",
                        type(exc).__name__, len(memories))
            self._vectors_missing = True
            return None

    def _catch_up_vectors(self) -> None:
        try:
            self.reembed_if_needed(progress=False)
            self._vectors_missing = False
        except ModelError:
            pass

    # -- validation -----------------------------------------------------------------------------
    def _check_text(self, value: Any, what: str) -> str:
        return validation.check_text(value, what, self.settings.max_content_chars)

    def _check_metadata(self, value: Any, what: str = "metadata") -> dict[str, Any]:
        return validation.check_metadata(value, what, self.settings.max_metadata_chars)

    def _to_message(self, raw: Any, index: int) -> Message:
        if isinstance(raw, Message):
            message = Message(raw.role, raw.content, raw.name, raw.timestamp, raw.metadata, raw.tool_call, raw.key)
        elif isinstance(raw, Mapping):
            unknown = set(raw) - {"role", "content", "name", "timestamp", "metadata", "tool_call", "key"}
            if unknown:
                raise ValidationError(f"message {index} has unknown keys {sorted(map(str, unknown))}")
            content: Any = raw.get("content")  # every field is checked below
            metadata: Any = raw.get("metadata")
            call: Any = raw.get("tool_call")
            message = Message(role=raw.get("role", "user" if call is None else "tool"), content=content,
                              name=raw.get("name"), timestamp=raw.get("timestamp"), metadata=metadata, tool_call=call,
                              key=raw.get("key"))
        elif isinstance(raw, tuple) and len(raw) == 2:
            message = Message(role=raw[0], content=raw[1])
        else:
            raise ValidationError(f"message {index} must be a Message, a dict or a (role, content) pair")
        validation.check_role(message.role, f"message {index} role")
        if message.tool_call is None:
            self._check_text(message.content, f"message {index} content")
        else:
            self._check_tool_message(message, index)
        message.name = validation.check_name(message.name, f"message {index} name")
        message.metadata = self._check_metadata(message.metadata, f"message {index} metadata")
        if TOOL_CALL_KEY in message.metadata:
            raise ValidationError(f"message {index} metadata must not use the reserved key {TOOL_CALL_KEY!r}")
        message.timestamp = _parse_time_arg(message.timestamp, f"message {index} timestamp") or utc_now()
        message.key = message_keys.check_key(message.key, f"message {index} key")
        return message

    def _check_tool_message(self, message: Message, index: int) -> None:
        """A tool call's message: role "tool", its call checked, its content the call's result or
        error text (given there; a content that says otherwise is refused)."""
        if message.role != "tool":
            raise ValidationError(f"message {index} has a tool_call, so its role must be 'tool'")
        call = tool_calls.check_tool_call(message.tool_call, f"message {index} tool_call",
                                          self.settings.max_content_chars)
        text = tool_calls.message_text(call)
        if message.content not in (None, "", text):
            raise ValidationError(f"message {index} content must be empty or the tool call's result or error "
                                  "(give the call's output in tool_call)")
        message.content, message.tool_call = text, call

    # -- recording -------------------------------------------------------------------------------
    def record(self, user_id: str,
               messages: Sequence[Message | Mapping[str, Any] | tuple[str, str]] | Message | Mapping[str, Any],
               *, agent_id: str = "assistant", session_id: str | None = None, run_outcome: str | None = None,
               procedures_used: Sequence[str] | None = None) -> list[str]:
        """Record messages of a conversation for a user; returns the new memory ids (one per message).

        The messages are logged durably and stored as searchable `turn` memories in one
        transaction; when an LLM is configured, consolidation then runs in the background.
        A message is a `Message`, a dict with ``role``, ``content`` and optional ``name``,
        ``timestamp`` (datetime or ISO 8601), ``metadata`` and ``key``, or a ``(role, content)`` pair.

        A message's ``key`` is the caller's own id of it (a chat message id): a key is recorded
        once per user, in the store's transaction, whichever process or agent records it first.
        A message whose key this user has already is left out, and its id in the returned list
        is the one it was recorded with, so a retry (or another agent of the team) records
        nothing twice (`message_keys`). A run the call ends is queued once however often the call
        is made, when its last message has a key.

        A tool call the agent made is a message with a ``tool_call`` (a `ToolCall`, or a dict of
        its fields: ``name``, ``arguments``, ``status``, ``result``, ``error``, ``duration_ms``,
        ``call_id``) and role ``"tool"``: it is logged under the agent and counted in
        `tool_stats` in the same transaction, never made a memory of the user nor consolidated;
        its id in the returned list names its log entry (docs/procedural.md).

        ``run_outcome`` ("succeeded", "failed" or "unknown") says these messages end a run of the
        agent: with ``procedures.enabled`` the run is queued for learning procedures from it, and the
        outcome is counted on the retrieved procedures it followed (``procedures_used``, their ids).
        """
        user_id = _check_id(user_id, "user_id")
        agent_id = _check_id(agent_id, "agent_id")
        if session_id is not None:
            session_id = _check_id(session_id, "session_id")
        run_outcome = procedure_scope.check_outcome(run_outcome)
        used = procedure_scope.check_used(procedures_used, run_outcome)
        if isinstance(messages, (Message, Mapping)):
            messages = [messages]
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise ValidationError("messages must be a list of messages")
        if not messages:
            raise ValidationError("messages must not be empty")
        if len(messages) > validation.MAX_LIMIT:
            raise ValidationError(f"at most {validation.MAX_LIMIT} messages per call")
        parsed = [self._to_message(m, i) for i, m in enumerate(messages)]
        # a keyed message's id is its key's (`message_keys`); it names the turn memory too
        ids = [uuid.uuid4().hex if message.key is None else message_keys.keyed_id(user_id, message.key)
               for message in parsed]
        new = self._unlogged(user_id, parsed, ids, message_keys.first_of_each_key(parsed, ids))
        written: _Written | None = None
        for attempt in range(_KEYED_WRITE_ATTEMPTS):
            if not new:
                break
            try:
                written = self._log_new(user_id, agent_id, session_id, parsed, ids, new)
                break
            except StoreError:
                # another writer may have logged one of these keys since they were looked up: the
                # store refused the whole write; the messages it did not hold are written again
                before = len(new)
                new = self._unlogged(user_id, parsed, ids, new)
                if new and (len(new) == before or attempt == _KEYED_WRITE_ATTEMPTS - 1):
                    raise
        if written is not None:
            self._after_logged(user_id, written)
        # a retry (or a writer beside this one) queues the run once: its marker is keyed too
        self._end_run(user_id, agent_id, session_id, run_outcome, used, ids, parsed[-1].timestamp,
                      keyed=parsed[-1].key is not None)
        return ids

    def _unlogged(self, user_id: str, parsed: Sequence[Message], ids: Sequence[str],
                  positions: builtins.list[int]) -> builtins.list[int]:
        """`positions` without the keyed messages the user's message log holds already."""
        keyed = [ids[i] for i in positions if parsed[i].key is not None]
        if not keyed:
            return positions
        known = self.store.logged_message_ids(user_id, keyed)
        return [i for i in positions if ids[i] not in known]

    def _log_new(self, user_id: str, agent_id: str, session_id: str | None, parsed: Sequence[Message],
                 ids: Sequence[str], new: Sequence[int]) -> _Written:
        """Log the messages at positions `new` with their ids, with the turn memories of those that
        are said and the ledger changes they bring, in one write (a `StoreError` writes nothing). A
        turn follows the said message before it in the call, written now or recorded already."""
        messages, message_ids = [parsed[i] for i in new], [ids[i] for i in new]
        said = [message for message in messages if message.tool_call is None]
        if not said:  # tool calls only: the log and the tool statistics, nothing of the user's
            self.store.append_messages(user_id, agent_id, messages, session_id=session_id, message_ids=message_ids)
            return _Written(LedgerChanges(user_id=user_id), False, 0)
        memories, before = self._turn_memories(user_id, agent_id, session_id, parsed, ids, set(new))
        vectors = self._embed_documents(memories)
        self._alias_addressed_speakers(user_id, said)
        # the turn before may be deleted meanwhile: a retry after the store refused the links drops its backfill
        backfill = iter([before])
        ledger = self._write_linked(
            user_id, lambda: self._record_ledger(user_id, agent_id, said, memories, next(backfill, None)),
            lambda changes: self.store.append_messages(
                user_id, agent_id, messages, session_id=session_id, memories=memories, vectors=vectors,
                message_ids=message_ids, ledger=changes or None))
        return _Written(ledger, vectors is not None, len(said))

    def _after_logged(self, user_id: str, written: _Written) -> None:
        """What follows a write that went through: the caches it changed, vectors still to make, and
        the consolidation of its said messages (a failure here is not a refused write)."""
        if written.ledger.entities:
            self._matchers.invalidate(user_id)
        elif written.ledger.mentions:  # retrieval's cached mention index takes them as they are, no read
            ledger_cache.for_store(self.store).add_mentions(user_id, written.ledger.mentions)
        if written.embedded and self._vectors_missing:
            self._catch_up_vectors()
        if self._consolidation is not None and written.said:
            self._consolidation.notify(user_id, written.said)

    def _end_run(self, user_id: str, agent_id: str, session_id: str | None, outcome: str | None,
                 used: builtins.list[str], ids: builtins.list[str], when: datetime | None, *,
                 keyed: bool = False) -> None:
        """Queue a finished run for learning procedures (only with ``procedures.enabled``): a marker
        under the agent's scope, logged pending after the run's messages, for whichever process
        consolidates (this one's worker or `run_worker`'s) (docs/procedural.md). With `keyed` (the
        run's last message has a key) the marker's id is keyed by that message: queued once however
        often the call is made."""
        if outcome is None or not self.settings.procedures.enabled:
            return
        scope = procedure_scope.procedure_scope(user_id, agent_id)
        marker_id = message_keys.keyed_id(scope, f"run end\x00{ids[-1]}") if keyed else None
        if marker_id is not None and self.store.logged_message_ids(scope, [marker_id]):
            return
        window = self.store.recent_messages(user_id, agent_id, None, len(ids) + 100)
        last_seq = next((m.seq for m in reversed(window) if m.id == ids[-1]), None)
        if last_seq is None:  # buried under a flood of newer messages: the newest one read bounds the run
            last_seq = window[-1].seq if window else 0
        marker = procedure_scope.RunMarker(user_id=user_id, agent_id=agent_id, last_seq=last_seq, outcome=outcome,
                                           session_id=session_id, used=used)
        try:
            self.store.append_messages(scope, agent_id, [Message(role="system", content=marker.to_text(),
                                                                 timestamp=when)],
                                       message_ids=None if marker_id is None else [marker_id])
        except StoreError:
            if marker_id is None or not self.store.logged_message_ids(scope, [marker_id]):
                raise
            return  # another call of the same run queued it meanwhile
        if self._consolidation is not None:
            self._consolidation.notify(scope, 1)

    def _turn_memories(self, user_id: str, agent_id: str, session_id: str | None, parsed: Sequence[Message],
                       ids: Sequence[str], new: set[int]) -> tuple[builtins.list[Memory], Memory | None]:
        """The turn memories of the messages at positions `new` that are said (not tool calls), with
        their ids, and the stored turn the first one follows (None: none). Each follows the said
        message before it in the call, whether written now or recorded already (a keyed one another
        writer logged: read back); the first said message of the call follows the conversation's
        latest turn (`_previous_turn`)."""
        said = [i for i, message in enumerate(parsed) if message.tool_call is None]
        first_new = next((i for i in said if i in new), None)
        if first_new is None:
            return [], None
        skipped = [ids[i] for i in said if i not in new and i < max(new)]
        recorded = {memory.id: memory for memory in self.store.get(user_id, skipped)} if skipped else {}
        prior: Memory | None = None
        if first_new == said[0] or not recorded:
            first_time = parsed[first_new].timestamp
            assert first_time is not None  # _to_message gives every message a time
            prior = self._previous_turn(user_id, agent_id, session_id, first_time)
        before: Memory | None = None
        memories: builtins.list[Memory] = []
        for position in said:
            if position not in new:
                prior = recorded.get(ids[position], prior)
                continue
            message = parsed[position]
            assert message.timestamp is not None
            memory = Memory(
                id=ids[position], user_id=user_id, agent_id=agent_id, content=message.content,
                type=MemoryType.TURN, created_at=message.timestamp, updated_at=utc_now(),
                speaker=message.name or _default_speaker(message.role, user_id, agent_id), role=message.role,
                session_id=session_id, metadata=dict(message.metadata))
            mentioned = mentioned_range(message.content, message.timestamp)
            if mentioned is not None:
                memory.event_start, memory.event_end = mentioned.start, mentioned.end
                memory.metadata["event_time_source"] = "mentioned"
            mentions = time_mentions(message.content, message.timestamp)
            if mentions:  # resolved once here, shown beside the words in every context
                memory.metadata[MENTIONS_KEY] = mentions
            if not memories:
                before = prior
            if prior is not None:
                memory.previous_id = prior.id
                memory.context = f"{prior.speaker}: {prior.content}" if prior.speaker else prior.content
            memories.append(memory)
            prior = memory
        return memories, before

    def _alias_addressed_speakers(self, user_id: str, messages: Sequence[Message]) -> None:
        """Give a known speaker the short form these messages address them by ("Hey Mel!" for
        Melanie: `person.short_forms`) before the messages are linked, so they count for her. The
        cached names only tell whether there is one (rarely: once per short form); the change is
        computed again from the stored ledger in one `edit_ledger` step."""
        said = [(message.name, message.content) for message in messages]
        if not addressed_aliases(self._matchers.get(user_id).entities, said, utc_now()):
            return

        def edit(ledger: LedgerReader) -> LedgerChanges | None:
            changed = addressed_aliases(ledger.entities(user_id), said, utc_now())
            return LedgerChanges(user_id=user_id, entities=changed) if changed else None
        try:
            written = self.store.edit_ledger(user_id, edit)
        except StoreError as exc:  # an alias is never worth the message: the next "Hey Mel!" tries again
            log.warning("a speaker's short form was not added for user %s (%s)", log_hygiene.user_ref(user_id),
                        type(exc).__name__)
            return
        if written is not None:
            self._matchers.invalidate(user_id)

    def _record_ledger(self, user_id: str, agent_id: str, messages: Sequence[Message],
                       memories: Sequence[Memory], prior: Memory | None = None) -> LedgerChanges:
        """The ledger changes recording brings, without a model: named speakers not known yet
        become person entities (`_new_speakers`, with a short form these messages or the turn
        before them address them by as an alias), the names the messages write that no entity
        holds become entities (`_new_names`), every memory naming a known entity (or a new one of
        this call) is one mention of it, and so is the turn before (`prior`) for a new speaker it
        names ("Hey Mel!" said just before Melanie's first words)."""
        names = self._matchers.get(user_id)
        speakers = self._new_speakers(user_id, agent_id, messages, names)
        found, stored = self._new_names(user_id, messages, names, speakers)
        if not speakers and not found and not stored:
            return LedgerChanges(user_id=user_id, mentions=person.record_mentions(names.matcher, memories))
        if speakers:
            said = [(m.name, m.content) for m in messages]
            if prior is not None:
                said.insert(0, (prior.speaker, prior.content))
            aliased = {entity.id: entity for entity in addressed_aliases([*names.entities, *speakers], said,
                                                                                 utc_now())}
            speakers = [aliased.get(entity.id, entity) for entity in speakers]
        by_id = {entity.id: entity for entity in [*names.entities, *speakers, *found, *stored]}
        mentions = person.record_mentions(person.NameMatcher(by_id.values()), memories)
        if prior is not None and speakers:
            mentions += person.record_mentions(person.NameMatcher(speakers), [prior])
        return LedgerChanges(user_id=user_id, entities=[*speakers, *found], mentions=mentions)

    def _new_names(self, user_id: str, messages: Sequence[Message], names: _UserNames, speakers: Sequence[Entity],
                   ) -> tuple[builtins.list[Entity], builtins.list[Entity]]:
        """Entities for the names the human's and the assistant's messages write that the ledger
        does not hold (`person.record_names`: `unknown` unless a rule knows the kind), and those of
        them the store holds already: the cached names may be a few seconds old, and an entity another
        process made meanwhile under the same id (consolidation typed it, you renamed it) is linked as
        stored, never written over. Never worth the messages: a failure here logs a warning and
        records them without new names."""
        texts = [message.content if message.role in ("user", "assistant") else "" for message in messages]
        try:
            found = record_names.new_entities(user_id, [*names.entities, *speakers], names.matcher, texts)
            stored = self.store.entities(user_id, ids=[e.id for e in found]) if found else []
        except Exception as exc:  # noqa: BLE001 - whatever a rule meets, the message is kept
            log.warning("no new names were read from a message of user %s (%s)", log_hygiene.user_ref(user_id),
                        type(exc).__name__)
            return [], []
        if stored:
            self._matchers.invalidate(user_id)
        known = {entity.id for entity in stored}
        return [entity for entity in found if entity.id not in known], stored

    def _new_speakers(self, user_id: str, agent_id: str, messages: Sequence[Message],
                      names: _UserNames) -> builtins.list[Entity]:
        """Person entities for the named speakers of `messages` the ledger does not know: a
        user-role message's name (the human's name, given, never guessed), and an assistant-role
        message's name unless it is an agent's (this call's `agent_id`, or an agent id the user
        has memories under: an agent team's "planner" is not a person). System and tool messages
        never make one. An `unknown` entity of a speaker's name (named before they spoke) becomes
        that speaker, a person."""
        wanted: dict[str, tuple[str, str]] = {}  # normalised name -> (name, role); a user's role wins
        unknown = {entity.id: entity for entity in names.entities if entity.kind is EntityKind.UNKNOWN}
        adopted: dict[str, Entity] = {}  # an unknown entity's id -> it as the speaker
        for message in messages:
            name = message.name
            if name is None or message.role not in ("user", "assistant"):
                continue
            known_id = names.matcher.entity_for(name)
            if known_id is not None and (known_id not in unknown or adopted.get(known_id, unknown[known_id])
                                         .metadata.get("speaker_role") == "user"):
                continue
            if message.role == "assistant" and self._is_agent(user_id, agent_id, name, names):
                continue
            if known_id is not None:
                entity = unknown[known_id]
                adopted[known_id] = dataclasses.replace(entity, kind=EntityKind.PERSON, updated_at=utc_now(),
                                                        metadata={**entity.metadata, "speaker_role": message.role})
                continue
            folded = person.normalise_name(name)
            if folded not in wanted or message.role == "user":
                wanted[folded] = (" ".join(name.split()), message.role)
        if not wanted:
            return builtins.list(adopted.values())
        spoken = builtins.list(wanted.values())
        proposals = [person.ProposedEntity(text, EntityKind.PERSON, None, index)
                     for index, (text, _) in enumerate(spoken)]
        planned, ids = person.plan_new_entities(user_id, names.entities, proposals, [text for text, _ in spoken])
        roles = {ids[index]: role for index, (_, role) in enumerate(spoken) if index in ids}
        known = {entity.id for entity in names.entities}
        return [*adopted.values(), *(dataclasses.replace(entity, metadata={**entity.metadata,
                                                                          "speaker_role": roles[entity.id]})
                                     for entity in planned if entity.id not in known and entity.id in roles)]

    def _is_agent(self, user_id: str, agent_id: str, name: str, names: _UserNames) -> bool:
        folded = person.normalise_name(name)
        if folded in names.agents or folded == person.normalise_name(agent_id):
            return True
        if validation.is_safe_id(name) and self.store.list(
                user_id, MemoryFilter(agent_id=name, statuses=None), limit=1):
            names.agents.add(folded)
            return True
        return False

    def _previous_turn(self, user_id: str, agent_id: str, session_id: str | None,
                       moment: datetime) -> Memory | None:
        """The turn a new message follows: the latest turn of the same session (with no session
        id, the latest turn if it is less than `CONVERSATION_GAP` older)."""
        latest = self.store.list(user_id, MemoryFilter(agent_id=agent_id, types=(MemoryType.TURN,), statuses=None,
                                                       session_id=session_id), limit=1)
        if not latest:
            return None
        prior = latest[0]
        if session_id is None and abs(as_aware(moment) - as_aware(prior.created_at)) > CONVERSATION_GAP:
            return None
        return prior

    def add(self, user_id: str, content: str, *, agent_id: str = "assistant",
            type: MemoryType | str = MemoryType.CUSTOM, event_start: datetime | str | None = None,
            event_end: datetime | str | None = None, created_at: datetime | str | None = None,
            metadata: Mapping[str, Any] | None = None, memory_id: str | None = None) -> Memory:
        """Add a memory directly (a fact the application knows), searchable at once.

        `memory_id` gives the new memory a caller-chosen id (e.g. a store key); default: a new one. An id
        of this user's replaces that memory; an id stored for anyone else is a `ValidationError` that
        does not say whose it is."""
        user_id = _check_id(user_id, "user_id")
        agent_id = _check_id(agent_id, "agent_id")
        content = self._check_text(content, "content")
        memory_type = validation.check_type(type)
        chosen = memory_id is not None
        memory_id = uuid.uuid4().hex if memory_id is None else _check_id(memory_id, "memory_id")
        memory = Memory(id=memory_id, user_id=user_id, agent_id=agent_id, content=content,
                        type=memory_type, created_at=_parse_time_arg(created_at, "created_at") or utc_now(),
                        event_start=_parse_time_arg(event_start, "event_start"),
                        event_end=_parse_time_arg(event_end, "event_end"), metadata=self._check_metadata(metadata))
        vectors = self._embed_documents([memory])
        # a caller's id may name a memory this replaces: its links are those of the new text only
        def write(ledger: LedgerChanges) -> None:
            if ledger:  # the memory and its mentions in one transaction
                self.store.commit_consolidation([memory], vectors, (), ledger=ledger)
            else:
                self.store.put([memory], vectors)

        try:
            self._write_linked(user_id, lambda: self._links(memory, relink=chosen), write)
        except ValueError as exc:  # the stores' "memory id ... belongs to another user": say less (no id oracle)
            if "another user" not in str(exc):
                raise
            raise ValidationError(ID_TAKEN) from None
        return memory

    # -- retrieval --------------------------------------------------------------------------------
    def retrieve(self, user_id: str, query: str, *, agent_id: str | None = None, top_k: int | None = None,
                 types: Iterable[MemoryType | str] | None = None, include_expired: bool | None = None,
                 time_range: TimeRange | tuple[datetime | str | None, datetime | str | None] | None = None,
                 now: datetime | str | None = None, rerank: bool | None = None,
                 language: str | None = None, min_relevance: float | None = None,
                 tools: Sequence[str] | None = None, procedures_of: str | None = None,
                 consistency: Consistency = "replica") -> RetrievalResult:
        """Find a user's memories for a query. No LLM is called.

        Args:
            query: the user's latest message or a question. Time words in it ("last weekend",
                "上周三", "in May") become a time range relative to `now` that boosts (or, with
                ``retrieval.time_mode = "filter"``, filters) memories of that time.
            agent_id: only the memories recorded by this agent; with ``procedures.enabled`` (and no
                `procedures_of`), also the agent whose procedures are returned.
            top_k: how many memories to return (default ``retrieval.top_k``).
            types: restrict to these memory types.
            include_expired: also return memories superseded by newer ones.
            time_range: an explicit (start, end) range that filters, in addition to the query's.
            now: the moment relative times are computed from (default: now).
            rerank: use the configured reranker (default: when one is configured).
            min_relevance: the relevance floor for this call (default ``retrieval.min_relevance``):
                only memories that share a word with the query, or whose cosine to it, calibrated
                to the embedder (0 = unrelated texts, 1 = the same), is at least this, or that fall
                in the time the query names, or stand next to such a turn, are returned; -1 turns
                the floor off.
            tools: the tools the agent is about to use: with ``procedures.enabled``, the figures of
                those that failed before are added (``tool_notes``), summed over the agent's calls for
                the users of the user's team (never another team's; none are read without tools).
            procedures_of: with ``procedures.enabled``, the agent whose procedures (and tool figures)
                are returned, without filtering the user's memories by agent: what an agent passes
                that records its runs under its own id but reads every memory of the user. Default:
                `agent_id`, else "assistant".
            consistency: with read standbys (``store.read_urls``), ``"replica"`` (default) reads from
                one (this process's own writes are always seen; another process's only once the
                standby has replayed them), ``"primary"`` from the primary. Without standbys: ignored.

        Returns a `RetrievalResult` with the ranked memories, their scores, the parsed time range,
        the timings, and ``context``: dated lines ready to put in a prompt. With
        ``procedures.enabled`` it also holds the agent's (`procedures_of`, else ``agent_id``, else
        "assistant") procedures relevant to the query (``procedures``), in their own part of the
        context, "What worked before" (docs/procedural.md).
        """
        start = time.perf_counter()  # the timings count checking the arguments too
        cfg = self.settings.retrieval
        user_id = _stored_id(user_id, "user_id")
        query = self._check_text(query, "query")
        agent_id = None if agent_id is None else _check_id(agent_id, "agent_id")
        procedure_agent = (agent_id or "assistant") if procedures_of is None else _check_id(procedures_of,
                                                                                              "procedures_of")
        top_k = cfg.top_k if top_k is None else validation.check_top_k(top_k)
        moment = _parse_time_arg(now, "now") or utc_now()
        type_filter = validation.check_types(types)
        include_expired = validation.check_optional_bool(include_expired, "include_expired")
        rerank = validation.check_optional_bool(rerank, "rerank")
        language = validation.check_language(language)
        explicit = _parse_range(time_range)
        if rerank and self.reranker is None:
            raise ConfigError("rerank=True but no reranker is configured (settings.reranker)")
        floor = None if min_relevance is None else validation.check_min_relevance(min_relevance)
        consistency = read_consistency.check(consistency)
        tool_names = _check_tools(tools)
        request = pipeline.RetrievalRequest(
            user_id=user_id, query=query, now=moment, top_k=top_k, min_relevance=floor, agent_id=agent_id,
            types=type_filter, include_expired=cfg.include_expired if include_expired is None else include_expired,
            time_range=explicit, rerank=rerank, language=language)
        procedures = self.settings.procedures.enabled  # off: nothing of the procedural part runs
        embedder = procedure_retrieval.QueryMemo(self.embedder) if procedures else self.embedder
        with tracing.span("memoryscope.retrieve", {"memoryscope.top_k": top_k}, since=start), \
                read_consistency.reads_from(consistency):
            result = pipeline.retrieve(request, settings=self.settings, store=self.store, embedder=embedder,
                                       reranker=self.reranker, started=start)
            if procedures:
                procedure_retrieval.add_procedures(result, self, user_id=user_id, agent_id=procedure_agent,
                                                   query=query, tools=tool_names, now=moment, language=language,
                                                   embedder=embedder)
            tracing.retrieval_stages(result.timings_ms)
        metrics.recorder().retrieval(result.timings_ms)
        return result

    def warm_up(self) -> None:
        """Do now the one-time work of a process's first `retrieve` (loading the embedder, measuring
        its noise floors: 150-300 ms with the local model), so no user's first turn waits for it.
        `serve` calls it at start; an application can call it once after opening. No LLM is called."""
        pipeline.warm_up(self.embedder)

    # -- admin -------------------------------------------------------------------------------------
    def list(self, user_id: str, *, agent_id: str | None = None, types: Iterable[MemoryType | str] | None = None,
             include_expired: bool = True, limit: int = 100, offset: int = 0,
             newest_first: bool = True, consistency: Consistency = "replica") -> builtins.list[Memory]:
        """A page of a user's memories, newest first by default (expired ones included).
        `consistency`: as in `retrieve`."""
        user_id = _stored_id(user_id, "user_id")
        limit = validation.check_int(limit, "limit", 1, validation.MAX_LIMIT)
        offset = validation.check_int(offset, "offset", 0, validation.MAX_OFFSET)
        agent_id = validation.check_optional_id(agent_id, "agent_id")
        validation.check_bool(include_expired, "include_expired")
        validation.check_bool(newest_first, "newest_first")
        flt = MemoryFilter(agent_id=agent_id, types=validation.check_types(types),
                           statuses=None if include_expired else (MemoryStatus.ACTIVE,))
        with read_consistency.reads_from(read_consistency.check(consistency)):
            return self.store.list(user_id, flt, limit=limit, offset=offset, newest_first=newest_first)

    def count(self, user_id: str, *, include_expired: bool = True, consistency: Consistency = "replica") -> int:
        """How many memories a user has. `consistency`: as in `retrieve`."""
        user_id = _stored_id(user_id, "user_id")
        validation.check_bool(include_expired, "include_expired")
        with read_consistency.reads_from(read_consistency.check(consistency)):
            return self.store.count(user_id, MemoryFilter(statuses=None if include_expired
                                                          else (MemoryStatus.ACTIVE,)))

    def get(self, user_id: str, memory_id: str, *, consistency: Consistency = "replica") -> Memory:
        """One memory of a user; `NotFoundError` if the user has no memory with that id.
        `consistency`: as in `retrieve`."""
        user_id = _stored_id(user_id, "user_id")
        memory_id = _stored_id(memory_id, "memory_id")
        with read_consistency.reads_from(read_consistency.check(consistency)):
            found = self.store.get(user_id, [memory_id])
        if not found:
            raise NotFoundError(f"user {user_id!r} has no memory {memory_id!r}")
        return found[0]

    def update(self, user_id: str, memory_id: str, *, content: str | None = None,
               status: MemoryStatus | str | None = None, metadata: Mapping[str, Any] | None = None,
               event_start: datetime | str | None = None, event_end: datetime | str | None = None) -> Memory:
        """Change a memory; new content is re-embedded and re-indexed, and its links to entities
        recomputed (`entities`: the known names the new text holds; the old text's links go), in the
        same transaction. A status change alone keeps the links (an expired memory's mentions stay
        history: they still count)."""
        # read from the primary: a read-modify-write must start from the latest version
        memory = self.get(_check_id(user_id, "user_id"), _check_id(memory_id, "memory_id"), consistency="primary")
        if content is not None:
            memory.content = self._check_text(content, "content")
        if status is not None:
            memory.status = validation.check_status(status)
        if metadata is not None:
            memory.metadata = self._check_metadata(metadata)
        if event_start is not None:
            memory.event_start = _parse_time_arg(event_start, "event_start")
        if event_end is not None:
            memory.event_end = _parse_time_arg(event_end, "event_end")
        memory.updated_at = utc_now()
        if content is None:
            self.store.put([memory], None)
            return memory
        vectors = self._embed_documents([memory])
        if vectors is None:  # keep the text change; the stale vector must not stay
            vectors = [np.zeros(0, dtype=np.float32)]
        # the names the new text holds replace the old text's links, in the same transaction
        self._write_linked(memory.user_id, lambda: self._links(memory, relink=True),
                           lambda ledger: self.store.commit_consolidation([memory], vectors, (), ledger=ledger))
        return memory

    def _write_linked(self, user_id: str, links: Callable[[], LedgerChanges],
                      write: Callable[[LedgerChanges], object]) -> LedgerChanges:
        """`write(links())`, once more with the ledger read again when the store refuses the links
        as stale (another process deleted or merged an entity this engine's cached names still
        hold): a memory is never lost to an outdated cache. Returns the links written."""
        ledger = links()
        try:
            write(ledger)
        except StaleLedgerError:
            self._matchers.invalidate(user_id)
            ledger = links()
            write(ledger)
        return ledger

    def _links(self, memory: Memory, *, relink: bool) -> LedgerChanges:
        """The ledger changes that link `memory` to the known entities its text names (with
        `relink`, replacing the links it had: its text may have changed)."""
        mentions = person.record_mentions(self._matchers.get(memory.user_id).matcher, [memory])
        return LedgerChanges(user_id=memory.user_id, mentions=mentions,
                             relinked_memories=[memory.id] if relink else ())

    def delete(self, user_id: str, memory_id: str) -> None:
        """Delete one memory of a user; `NotFoundError` if there is none with that id (a memory id
        stored before the identifier rule can still be deleted). Deleting a recorded turn also
        forgets its logged message (kept without its words, so its `key` stays taken: a retry
        records nothing): consolidation never makes it into observations, and a step that was
        consolidating it drops its result. What was consolidated from it before stays (delete
        those memories too to forget them)."""
        user_id = _stored_id(user_id, "user_id")
        memory_id = _stored_id(memory_id, "memory_id")
        if self.store.delete(user_id, [memory_id]) == 0:
            raise NotFoundError(f"user {user_id!r} has no memory {memory_id!r}")
        ledger_cache.for_store(self.store).invalidate(user_id)  # its mentions went with it

    def delete_all(self, user_id: str) -> int:
        """Delete every memory and logged message of one user, with their entity ledger and profile
        (and nobody else's); returns the count of memories.
        A user id stored before the identifier rule is accepted, so such a user can be removed."""
        user_id = _stored_id(user_id, "user_id")
        try:
            return self.store.delete_user(user_id)
        finally:
            ledger_cache.for_store(self.store).invalidate(user_id)

    def users(self) -> builtins.list[str]:
        """Every user with memories or messages in the store (agents' procedure scopes aside)."""
        return [user for user in self.store.users() if not procedure_scope.is_scope(user)]

    def legacy_users(self) -> builtins.list[str]:
        """Users whose id breaks the identifier rule (`validation.ID_RULE`): written before the rule
        existed. They can be read (list, get, export) and removed (delete, delete_all), or given a
        safe id with `rename_user`; nothing new is ever stored under them."""
        return [user for user in self.store.users() if not validation.is_safe_id(user)]

    def rename_user(self, old_user_id: str, new_user_id: str) -> int:
        """Move every memory and logged message of `old_user_id` to `new_user_id` in one transaction
        (memory ids, vectors and pending consolidation are kept); returns how many memories moved.

        The admin path for ids stored before the identifier rule: `old_user_id` may be such an id,
        `new_user_id` must follow the rule and must have nothing stored yet. Holds the old user's
        consolidation lease meanwhile; `ValidationError` when the user is being consolidated now.
        """
        old_user_id = _stored_id(old_user_id, "old_user_id")
        new_user_id = _check_id(new_user_id, "new_user_id")
        if old_user_id == new_user_id:
            raise ValidationError("old_user_id and new_user_id are the same")
        owner = f"rename-{uuid.uuid4().hex}"
        if not self.store.acquire_lease(old_user_id, owner, 600.0):
            raise ValidationError("the user is being consolidated now; try again when that is done")
        try:
            if not self.store.acquire_lease(new_user_id, owner, 600.0):
                raise ValidationError("new_user_id is being consolidated now, so it is in use")
            try:
                return self.store.rename_user(old_user_id, new_user_id)
            except ValueError as exc:
                raise ValidationError(str(exc)) from None
            finally:
                self.store.release_lease(new_user_id, owner)
        finally:
            self.store.release_lease(old_user_id, owner)

    def export(self, user_id: str, destination: str | os.PathLike[str] | IO[str] | IO[bytes]) -> int:
        """Write a user's memories as JSON Lines (one memory per line), then their entity ledger and
        profile and the agents' tool calls made for them (one item per line, `transfer`); returns
        how many memories.

        To a path, nothing there is damaged: a regular file is written beside its final name and
        renamed into place when complete, so a failed export never leaves a truncated file (nor
        replaces an earlier one), and it keeps its mode (a new file gets 0600); a symbolic link is
        written through (its target replaced, the link kept); a character device, a FIFO or ``"-"``
        (standard output) is written directly; a folder, a block device or a socket is refused
        with `ValidationError`, as is an invalid path. A text or binary stream is written as it
        goes (UTF-8).
        """
        user_id = _stored_id(user_id, "user_id")
        if isinstance(destination, (str, os.PathLike)):
            return transfer.export_to_path(self.store, user_id, destination)
        return transfer.export_to_stream(self.store, user_id, destination)

    def import_(self, user_id: str, source: str | os.PathLike[str] | IO[str] | IO[bytes], *,
                progress: bool | None = None, batch_size: int = 256) -> int:
        """Read memories (and the entity ledger and profile an export carries, `transfer`) from
        JSON Lines into a user; returns how many memories were stored.

        All or nothing: every line is checked as the engine checks its arguments before anything
        is written, and the memories and the ledger are stored in one transaction. A bad line raises
        `ValidationError` naming the line, and nothing of the file is stored. `batch_size` is how
        many memories are embedded per embedder call.

        Ids: an id is kept when it already names one of this user's memories (re-importing the
        user's own export updates in place); any other id is stored as a stable id derived from
        the user and the id, the same whether or not another user holds that id, so importing
        twice never duplicates and nothing reveals other users' ids. `import_with_ids` also
        returns the mapping.
        """
        return self.import_with_ids(user_id, source, progress=progress, batch_size=batch_size).imported

    def import_with_ids(self, user_id: str, source: str | os.PathLike[str] | IO[str] | IO[bytes], *,
                        progress: bool | None = None, batch_size: int = 256) -> transfer.ImportResult:
        """`import_`, also returning for every id the file names (memory ids and the ids they refer
        to) the id it is stored under."""
        user_id = _check_id(user_id, "user_id")
        batch_size = validation.check_int(batch_size, "batch_size", 1, 100_000)
        progress = validation.check_optional_bool(progress, "progress")
        memories, ledger, calls = transfer.read_export(
            source, user_id, max_content_chars=self.settings.max_content_chars,
            max_metadata_chars=self.settings.max_metadata_chars)
        if calls:  # the calls the user's log holds already (a re-import) are not logged twice
            logged = {m.id for batch in self.store.iter_messages(user_id) for m in batch}
            calls = transfer_tools.new_tool_calls(calls, logged, lambda i: transfer.derived_id(user_id, i))
        named = transfer.named_ids(memories, ledger)
        own = {m.id for start in range(0, len(named), 500)
               for m in self.store.get(user_id, named[start:start + 500])}
        mapping = transfer.import_ids(memories, user_id, own, ledger)
        ledger = transfer.import_ledger_ids(ledger, self.store, mapping, memories)
        bar = _progress(len(memories), "importing", progress if progress is not None else len(memories) > 1000)
        rows: list[Any] = []
        try:
            for start in range(0, len(memories), batch_size):
                batch = memories[start:start + batch_size]
                vectors = self._embed_documents(batch)
                rows.extend([None] * len(batch) if vectors is None else list(vectors))
                bar.update(len(batch))
        finally:
            bar.close()
        if memories or ledger or calls:
            try:
                transfer.store_import(self.store, memories, rows, ledger, calls)
            except ValueError:  # only a derived id someone stored verbatim through the library can clash
                raise ValidationError("import refused, nothing stored: an id clashes with a stored memory") from None
        return transfer.ImportResult(len(memories), mapping, len(calls))

    # -- the person: entity ledger and profile ------------------------------------------------------
    def entities(self, user_id: str, *, kind: EntityKind | str | None = None, order: str = "relevance",
                 limit: int = 20, now: datetime | str | None = None) -> builtins.list[Entity]:
        """The entities a user's conversations name (people, places, organisations, pets, objects,
        topics), best first: `order` "relevance" (frequency and recency together, as Memary ranks
        them), "frequency" (mention count) or "recency" (last mention); at most `limit`, of one
        `kind` when given. `now` is the moment recency is measured from (default: now)."""
        user_id = _stored_id(user_id, "user_id")
        kind = _check_kind(kind)
        order = _check_choice(order, "order", _ORDERS)
        limit = validation.check_int(limit, "limit", 1, validation.MAX_LIMIT)
        moment = _parse_time_arg(now, "now") or utc_now()
        return person.rank(self.store.entities(user_id, kind=kind), order, moment, limit)  # type: ignore[arg-type]

    def entity(self, user_id: str, name: str, *, limit: int = 20, bucket: str = "month") -> EntityDetails:
        """One entity with its mentions per `bucket` ("week" or "month"), up to `limit` of its active
        memories (observations and insights first, then memories added by hand, then turns, newest
        first) and, when it is the user, their current profile. `name` is its canonical name, an
        alias (compared normalised: "mel" finds "Mel"), its id, or the given name of a person's
        Chinese full name (晓雯 for 林晓雯, as `record` counts it); `NotFoundError` when none is.
        Renaming, merging and deleting take a name the entity holds, never a given name alone."""
        user_id = _stored_id(user_id, "user_id")
        limit = validation.check_int(limit, "limit", 1, validation.MAX_LIMIT)
        bucket = _check_choice(bucket, "bucket", _BUCKETS)
        try:
            found = self._find_entity(self.store, user_id, name, "name")
        except NotFoundError:
            entities = self.store.entities(user_id)
            given = person.NameMatcher(entities).entity_for(name)
            if given is None:
                raise
            found = next(entity for entity in entities if entity.id == given)
        mentions = self.store.mentions(user_id, entity_ids=[found.id])
        profile: builtins.list[ProfileValue] = []
        if self._is_the_user(user_id, found):
            profile = person.current(self.store.profile_values(user_id, current_only=True))
        return EntityDetails(entity=found, timeline=person.timeline(mentions, bucket),  # type: ignore[arg-type]
                             memories=self._entity_memories(user_id, mentions, limit), profile=profile)

    def rename_entity(self, user_id: str, name: str, new_name: str) -> Entity:
        """Give an entity a new canonical name; the old one stays as an alias, so past and future
        mentions under it still count. `ValidationError` when `new_name` is another entity's name
        (merge them instead) or cannot be a name (`person.name_rules`: over 80 characters, a control
        or format character, fewer than 2 letters or digits, a function word)."""
        user_id = _check_id(user_id, "user_id")
        name = name_rules.check_name(name, "name")
        new_name = name_rules.check_new_name(new_name, "new_name")

        def edit(ledger: LedgerReader) -> tuple[Entity, LedgerChanges | None]:
            found = self._find_entity(ledger, user_id, name, "name")
            self._refuse_taken(ledger, user_id, found, new_name)
            try:
                renamed = person.rename(found, new_name)
            except ValueError as exc:
                raise ValidationError(f"new_name: {exc}") from None
            return renamed, LedgerChanges(user_id=user_id, entities=[renamed])
        return self._edit_entity(user_id, edit)

    def add_alias(self, user_id: str, name: str, alias: str) -> Entity:
        """Add another name an entity goes by ("Mel" for "Melanie", 小王 for 王磊); from then on a
        message naming it that way counts as a mention. `ValidationError` when the alias is another
        entity's name or cannot be a name (`person.name_rules`, as for `rename_entity`)."""
        user_id = _check_id(user_id, "user_id")
        name = name_rules.check_name(name, "name")
        alias = name_rules.check_new_name(alias, "alias")

        def edit(ledger: LedgerReader) -> tuple[Entity, LedgerChanges | None]:
            found = self._find_entity(ledger, user_id, name, "name")
            if person.normalise_name(alias) in {person.normalise_name(known) for known in found.names}:
                return found, None
            self._refuse_taken(ledger, user_id, found, alias)
            changed = dataclasses.replace(found, aliases=[*found.aliases, alias], updated_at=utc_now())
            return changed, LedgerChanges(user_id=user_id, entities=[changed])
        return self._edit_entity(user_id, edit)

    def merge_entities(self, user_id: str, keep: str, other: str) -> Entity:
        """Merge entity `other` into `keep` (each given by name, alias or id): `keep` gains `other`'s
        names as aliases and its mentions, and `other` is removed. No memory is touched."""
        user_id = _check_id(user_id, "user_id")
        keep = name_rules.check_name(keep, "keep")
        other = name_rules.check_name(other, "other")

        def edit(ledger: LedgerReader) -> tuple[Entity, LedgerChanges | None]:
            kept = self._find_entity(ledger, user_id, keep, "keep")
            merged = self._find_entity(ledger, user_id, other, "other")
            if kept.id == merged.id:
                raise ValidationError("keep and other are the same entity")
            return kept, person.merge(kept, merged, ledger.mentions(user_id, entity_ids=[kept.id, merged.id]))
        return self._edit_entity(user_id, edit)

    def delete_entity(self, user_id: str, name: str) -> int:
        """Remove an entity from the ledger with its links to memories (never the memories);
        returns how many links were removed."""
        user_id = _stored_id(user_id, "user_id")
        name = name_rules.check_name(name, "name")
        links: builtins.list[int] = []

        def edit(ledger: LedgerReader) -> LedgerChanges:
            found = self._find_entity(ledger, user_id, name, "name")
            links[:] = [len(ledger.mentions(user_id, entity_ids=[found.id]))]
            return LedgerChanges(user_id=user_id, removed_entities=[found.id])
        self.store.edit_ledger(user_id, edit)
        self._matchers.invalidate(user_id)
        return links[0]

    def profile(self, user_id: str) -> dict[str, builtins.list[ProfileValue]]:
        """The user's profile as it is now: each key ("home", "work", "pets", ...) with its current
        values (one for single-valued keys, several for family, pets, likes ...), in the profile's
        key order; each value carries the memories it rests on and when it became true."""
        user_id = _stored_id(user_id, "user_id")
        grouped: dict[str, builtins.list[ProfileValue]] = {}
        for value in person.current(self.store.profile_values(user_id, current_only=True)):
            grouped.setdefault(value.key, []).append(value)
        return grouped

    def profile_history(self, user_id: str, key: str) -> builtins.list[ProfileValue]:
        """Every value a profile key ever had, oldest first: replaced values keep when they ended
        (`valid_to`) and what replaced them (`superseded_by`). Keys are normalised ("住址" is
        "home": `person.name_rules.canonical_key`), and each value carries its canonical key; an
        unknown key has no history (an empty list)."""
        user_id = _stored_id(user_id, "user_id")
        normalised = name_rules.canonical_key(key, "key")
        return person.history(self.store.profile_values(user_id, key=normalised), normalised)

    def set_profile(self, user_id: str, key: str, value: str, *, replace: bool = True) -> ProfileValue:
        """Set a profile value as the user states it (a correction: the model never replaces it with
        anything said before it); returns the value. With `replace` (always for a single-valued key
        such as home or work) the key's other current values end now and stay as history; with
        ``replace=False`` a multi-valued key (likes, pets, family ...) gains the value."""
        user_id = _check_id(user_id, "user_id")
        key = name_rules.canonical_key(key, "key")
        if not isinstance(value, str):
            raise ValidationError(f"value must be a string, not {type(value).__name__}")
        validation.check_bool(replace, "replace")

        def edit(ledger: LedgerReader) -> LedgerChanges:
            existing = ledger.profile_values(user_id, key=key)
            try:
                changed = person.set_by_user(existing, key, value, utc_now(), replace, user_id=user_id)
            except ValueError as exc:
                raise ValidationError(f"value: {exc}") from None
            return LedgerChanges(user_id=user_id, profile=changed)
        written = self.store.edit_ledger(user_id, edit)
        assert written is not None
        return next(item for item in written.profile if item.current and item.set_by == "user")

    def remove_profile_value(self, user_id: str, value_id: str) -> ProfileValue:
        """End a profile value now (it is no longer true); it stays in the key's history. Returns it;
        `NotFoundError` when the user has no value with that id."""
        user_id = _stored_id(user_id, "user_id")
        value_id = _stored_id(value_id, "value_id")
        removed: builtins.list[ProfileValue] = []

        def edit(ledger: LedgerReader) -> LedgerChanges | None:
            existing = ledger.profile_values(user_id)
            found = next((item for item in existing if item.id == value_id), None)
            if found is None:
                raise NotFoundError(f"user {user_id!r} has no profile value {value_id!r}")
            changed = person.retract(existing, value_id, utc_now(), user_id=user_id)
            removed[:] = [next((item for item in changed if item.id == value_id), found)]
            return LedgerChanges(user_id=user_id, profile=changed) if changed else None
        self.store.edit_ledger(user_id, edit)
        return removed[0]

    def _find_entity(self, ledger: LedgerReader, user_id: str, name: Any, what: str) -> Entity:
        """The user's entity `name` names: its id, its canonical name, or an alias (normalised;
        a canonical name wins over an alias, then the entity mentioned most)."""
        name = name_rules.check_name(name, what)
        entities = ledger.entities(user_id)
        wanted = person.normalise_name(name)
        by_id = [entity for entity in entities if entity.id == name]
        canonical = [entity for entity in entities if person.normalise_name(entity.name) == wanted]
        alias = [entity for entity in entities if wanted in {person.normalise_name(a) for a in entity.aliases}]
        for group in (by_id, canonical, alias):
            if group:
                return min(group, key=lambda entity: (-entity.mention_count, entity.id))
        raise NotFoundError(f"user {user_id!r} has no entity {name!r}")

    def _refuse_taken(self, ledger: LedgerReader, user_id: str, entity: Entity, name: str) -> None:
        wanted = person.normalise_name(name)
        for other in ledger.entities(user_id):
            if other.id != entity.id and wanted in {person.normalise_name(known) for known in other.names}:
                raise ValidationError(f"{name!r} is already a name of entity {other.name!r}; merge the two instead")

    def _edit_entity(self, user_id: str,
                     edit: Callable[[LedgerReader], tuple[Entity, LedgerChanges | None]]) -> Entity:
        """Run an edit of one entity in one `edit_ledger` step (so concurrent edits lose nothing)
        and return the entity as stored after it, with its figures."""
        result: builtins.list[Entity] = []

        def step(ledger: LedgerReader) -> LedgerChanges | None:
            entity, changes = edit(ledger)
            result[:] = [entity]
            return changes
        if self.store.edit_ledger(user_id, step) is None:
            return result[0]
        self._matchers.invalidate(user_id)
        stored = self.store.entities(user_id, ids=[result[0].id])
        return stored[0] if stored else result[0]

    def _is_the_user(self, user_id: str, entity: Entity) -> bool:
        """Whether `entity` is the user: a named user-role speaker, or named by the profile's name."""
        if entity.metadata.get("speaker_role") == "user":
            return True
        names = {person.normalise_name(known) for known in entity.names}
        return any(person.normalise_name(value.value) in names
                   for value in self.store.profile_values(user_id, key="name", current_only=True))

    def _entity_memories(self, user_id: str, mentions: Sequence[Any], limit: int) -> builtins.list[Memory]:
        """Up to `limit` active memories of the mentions: observations and insights first, then
        memories added by hand, then turns, each newest first."""
        ids = [mention.memory_id for mention in mentions]
        found = [memory for start in range(0, len(ids), 500)
                 for memory in self.store.get(user_id, ids[start:start + 500]) if memory.status is MemoryStatus.ACTIVE]
        order = {MemoryType.INSIGHT: 0, MemoryType.OBSERVATION: 0, MemoryType.CUSTOM: 1, MemoryType.TURN: 2}
        found.sort(key=lambda memory: (order[memory.type], -as_aware(memory.created_at).timestamp(), memory.id))
        return found[:limit]

    # -- consolidation ----------------------------------------------------------------------------
    def consolidate(self, user_id: str | None = None):
        """Consolidate pending messages now (one user, or all) and return what was done.

        Needs an LLM (settings.llm); without one, recorded turns are already searchable and this
        returns a report saying nothing was consolidated.
        """
        if user_id is not None:
            user_id = _check_id(user_id, "user_id")
        if self._consolidation is None:
            from .consolidation.report import ConsolidationReport
            return ConsolidationReport.no_llm()
        return self._consolidation.consolidate(user_id)

    def reflect(self, user_id: str):
        """Turn a user's recent observations into insights now. Needs an LLM."""
        user_id = _check_id(user_id, "user_id")
        if self._consolidation is None:
            from .consolidation.report import ConsolidationReport
            return ConsolidationReport.no_llm()
        return self._consolidation.reflect(user_id)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every pending message has been consolidated; True when nothing is left pending
        (always True without an LLM, which has nothing to consolidate). `timeout`: seconds to
        wait at most (None: no limit)."""
        timeout = validation.check_timeout(timeout)
        if self._consolidation is None:
            return True
        return self._consolidation.flush(timeout)

    def add_consolidation_listener(self, callback) -> bool:
        """Call ``callback(user_id, report)`` after every consolidation or reflection run (in the
        thread that ran it; the `ConsolidationReport` holds memory text). False without an LLM.
        A run learnt for procedures reports under the agent's scope id (``~procedures~<team>:<agent>``,
        docs/procedural.md), never a person's."""
        if self._consolidation is None:
            return False
        if not callable(callback):
            raise ValidationError("callback must be callable")
        self._consolidation.add_listener(callback)
        return True

    def tool_stats(self, agent_id: str, tool: str | None = None, *, user_id: str | None = None,
                   team: str | None = None, top: int = 10) -> builtins.list[ToolStats]:
        """The statistics of an agent's recorded tool calls, one `ToolStats` per tool (by name; only
        `tool`, when given; none for a tool never recorded): calls, failures, the `top` most frequent
        normalised errors and argument shapes, latency p50/p95 and first and last use.

        An agent's calls are counted over every user it worked for (with `user_id`: that user's
        calls only; with `team`: those of the team's users, the ids starting ``<team>:``, or for
        ``team=""`` the ids without ``:``); what is counted holds no argument value and only
        normalised error texts (docs/procedural.md, "Scope and privacy")."""
        agent_id = _check_id(agent_id, "agent_id")
        if tool is not None and (not isinstance(tool, str) or tool_calls.TOOL_NAME_PATTERN.fullmatch(tool) is None):
            raise ValidationError(f"tool must be a tool name ({tool_calls.TOOL_NAME_RULE}) or None")
        if user_id is not None:
            user_id = _stored_id(user_id, "user_id")
        if team is not None:
            if user_id is not None:
                raise ValidationError("give user_id or team, not both (a user is of one team)")
            _check_team(team)
        top = validation.check_int(top, "top", 1, validation.MAX_LIMIT)
        counters = self.store.tool_counters(agent_id, tool=tool, user_id=user_id, team=team)
        return tool_stats.fold(agent_id, counters, top)

    def procedures(self, agent_id: str, *, team: str = "", include_expired: bool = False, limit: int = 100,
                   offset: int = 0) -> builtins.list[Memory]:
        """A page of an agent's procedures (task memory, docs/procedural.md), newest first: those
        learnt from runs of the users of ``team`` (the part of a user id before its first ``:``; ""
        for users without one). Active ones only unless ``include_expired``."""
        scope = self._procedure_scope(agent_id, team)
        validation.check_bool(include_expired, "include_expired")
        limit = validation.check_int(limit, "limit", 1, validation.MAX_LIMIT)
        offset = validation.check_int(offset, "offset", 0, validation.MAX_OFFSET)
        flt = MemoryFilter(types=(MemoryType.PROCEDURE,),
                           statuses=None if include_expired else (MemoryStatus.ACTIVE,))
        return self.store.list(scope, flt, limit=limit, offset=offset, newest_first=True)

    def delete_procedure(self, agent_id: str, procedure_id: str, *, team: str = "") -> None:
        """Delete one of an agent's procedures (a wrong one an operator removes); `NotFoundError`
        when the agent (of ``team``) has no procedure with that id, `ValidationError` while a learning
        step holds the agent's procedures (try again when it is done)."""
        scope = self._procedure_scope(agent_id, team)
        procedure_id = _stored_id(procedure_id, "procedure_id")
        with self._scope_lease(scope):  # a learning step holding it would write the procedure back
            self._procedure(scope, agent_id, procedure_id)
            self.store.delete(scope, [procedure_id])

    def update_procedure(self, agent_id: str, procedure_id: str, *, team: str = "", when: str | None = None,
                         do: str | None = None, why: str | None = None,
                         tools: Sequence[str] | None = None) -> Memory:
        """Edit one of an agent's active procedures (of ``team``): its ``when``, ``do``, ``why`` ("" removes
        it) and ``tools``; its content is rewritten from them and re-embedded. Checked as learning checks
        the model's text where that applies: no tool the procedure does not name, no code-like word or
        quote it does not hold, no markup, e-mail address or phone number (`ValidationError`). Its
        sources, runs and outcome counters are kept (docs/procedural.md). `NotFoundError` when the
        agent (of ``team``) has no procedure with that id; `ValidationError`, nothing changed, while a
        learning step holds the agent's procedures."""
        scope = self._procedure_scope(agent_id, team)
        procedure_id = _stored_id(procedure_id, "procedure_id")
        change = procedure_edit.check_change(when=when, do=do, why=why, tools=tools)
        with self._scope_lease(scope) as lease:
            memory = self._procedure(scope, agent_id, procedure_id)
            procedure_edit.apply(memory, change)
            vectors = self._embed_documents([memory])
            if vectors is None:  # keep the text change; the stale vector must not stay
                vectors = [np.zeros(0, dtype=np.float32)]
            self.store.commit_consolidation([memory], vectors, (), lease=lease)
        return memory

    def export_procedures(self, agent_id: str, destination: str | os.PathLike[str] | IO[str] | IO[bytes], *,
                          team: str = "") -> int:
        """Write an agent's procedures (of ``team``: the users whose id starts ``<team>:``; "" for ids
        without ``:``), active and expired, as JSON Lines, one procedure a line; returns how many. A
        path is written as `export` writes it (never a truncated file); a stream as it goes."""
        scope = self._procedure_scope(agent_id, team)
        lines = procedure_transfer.export_lines(self.store, scope)
        if isinstance(destination, (str, os.PathLike)):
            return transfer.write_to_path(lines, destination)
        return transfer.write_to_stream(lines, destination)

    def import_procedures(self, agent_id: str, source: str | os.PathLike[str] | IO[str] | IO[bytes], *,
                          team: str = "") -> int:
        """Read an agent's procedures (of ``team``) from JSON Lines, as `export_procedures` writes them;
        returns how many were stored. All or nothing: every line is checked first (a procedure of this
        agent and team, each id once, fields as learning and an edit allow, docs/procedural.md), and a
        bad line raises `ValidationError` naming it, with nothing stored; the procedures are stored in
        one transaction, under the scope's lease (`ValidationError` while a learning step holds it).
        An id already the agent's is kept (updated in place: importing twice is once); any other is
        stored as a stable id derived from the agent's scope and the id."""
        scope = self._procedure_scope(agent_id, team)
        found = procedure_transfer.read_procedures(
            source, scope, agent_id, max_content_chars=self.settings.max_content_chars,
            max_metadata_chars=self.settings.max_metadata_chars)
        if not found:
            return 0
        named = procedure_transfer.named_ids(found)
        own = {m.id for start in range(0, len(named), 500) for m in self.store.get(scope, named[start:start + 500])
               if m.type is MemoryType.PROCEDURE}
        procedure_transfer.import_ids(found, scope, own)
        vectors = self._embed_documents(found)
        with self._scope_lease(scope) as lease:
            try:
                self.store.commit_consolidation(found, None if vectors is None else list(vectors), (), lease=lease)
            except ValueError:  # a derived id someone stored verbatim elsewhere
                raise ValidationError("import refused, nothing stored: an id clashes with a stored memory") from None
        return len(found)

    def _procedure(self, scope: str, agent_id: str, procedure_id: str) -> Memory:
        found = [m for m in self.store.get(scope, [procedure_id]) if m.type is MemoryType.PROCEDURE]
        if not found:
            raise NotFoundError(f"agent {agent_id!r} has no procedure {procedure_id!r}")
        return found[0]

    @contextlib.contextmanager
    def _scope_lease(self, scope: str) -> Iterator[Lease]:
        """Hold a procedure scope's lease (the one its learning steps hold) while an operator changes it."""
        owner = f"procedures-{uuid.uuid4().hex}"
        if not self.store.acquire_lease(scope, owner, 600.0):
            raise ValidationError("the agent's procedures are being learnt now; try again when that is done")
        try:
            yield Lease(scope, owner)
        finally:
            self.store.release_lease(scope, owner)

    def _procedure_scope(self, agent_id: str, team: Any) -> str:
        agent_id = _check_id(agent_id, "agent_id")
        _check_team(team)
        return procedure_scope.procedure_scope(f"{team}:x" if team else "x", agent_id)

    def usage(self, user_id: str | None = None, operation: str | None = None):
        """LLM tokens spent by consolidation and reflection, per user and/or operation
        (a `TokenUsage`; zero without an LLM)."""
        from .models.base import TokenUsage
        if self._consolidation is None:
            return TokenUsage()
        return self._consolidation.usage.get(user_id=user_id, operation=operation)

    async def astart_worker(self) -> None:
        """Start background consolidation as an asyncio task on the running loop
        (``consolidation.worker = "asyncio"``); `aclose` stops it."""
        if self._consolidation is None:
            return
        if self._worker_task is None or self._worker_task.done():
            self._worker_task = self._consolidation.start_async()
            self._runs_worker = True

    # -- chat with memory ---------------------------------------------------------------------------
    def chat_with_memory(self, user_id: str, message: str, *, agent_id: str = "assistant",
                         session_id: str | None = None, system_prompt: str | None = None, top_k: int | None = None,
                         now: datetime | str | None = None, show_consolidation: bool = False,
                         history: Sequence[Mapping[str, Any]] | None = None, user_name: str | None = None):
        """Retrieve -> system prompt with the memories -> LLM -> record the turn. Returns a `ChatTurn`
        (the answer, the memories used and, when asked, what consolidation did). Needs an LLM."""
        from . import chat
        return chat.chat_with_memory(self, user_id, message, agent_id=agent_id, session_id=session_id,
                                     system_prompt=system_prompt, top_k=top_k, now=now,
                                     show_consolidation=show_consolidation, history=history, user_name=user_name)

    async def achat_with_memory(self, user_id: str, message: str, *, agent_id: str = "assistant",
                                session_id: str | None = None, system_prompt: str | None = None,
                                top_k: int | None = None, now: datetime | str | None = None,
                                show_consolidation: bool = False, history: Sequence[Mapping[str, Any]] | None = None,
                                user_name: str | None = None):
        """Async twin of :meth:`chat_with_memory` (the model is called with its native async client)."""
        from . import chat
        return await chat.achat_with_memory(self, user_id, message, agent_id=agent_id, session_id=session_id,
                                            system_prompt=system_prompt, top_k=top_k, now=now,
                                            show_consolidation=show_consolidation, history=history,
                                            user_name=user_name)

    def stream_chat_with_memory(self, user_id: str, message: str, *, agent_id: str = "assistant",
                                session_id: str | None = None, system_prompt: str | None = None,
                                top_k: int | None = None, now: datetime | str | None = None,
                                history: Sequence[Mapping[str, Any]] | None = None, turn=None,
                                user_name: str | None = None) -> Iterator[str]:
        """Like :meth:`chat_with_memory`, yielding the answer as it is generated; the turn is recorded
        when the stream ends. Pass a `ChatTurn` as `turn` to receive the memories used."""
        from . import chat
        return chat.stream_chat_with_memory(self, user_id, message, agent_id=agent_id, session_id=session_id,
                                            system_prompt=system_prompt, top_k=top_k, now=now, history=history,
                                            turn=turn, user_name=user_name)

    def astream_chat_with_memory(self, user_id: str, message: str, *, agent_id: str = "assistant",
                                 session_id: str | None = None, system_prompt: str | None = None,
                                 top_k: int | None = None, now: datetime | str | None = None,
                                 history: Sequence[Mapping[str, Any]] | None = None, turn=None,
                                 user_name: str | None = None) -> AsyncIterator[str]:
        """Async twin of :meth:`stream_chat_with_memory` (an async iterator of text chunks)."""
        from . import chat
        return chat.astream_chat_with_memory(self, user_id, message, agent_id=agent_id, session_id=session_id,
                                             system_prompt=system_prompt, top_k=top_k, now=now, history=history,
                                             turn=turn, user_name=user_name)

    def close(self) -> None:
        """Stop the background worker (finishing its current step) and close the store.

        With ``consolidation.flush_on_close``, pending messages are consolidated first, but only when
        this engine ran a background worker (``worker: thread`` or `astart_worker`): with ``worker:
        none`` close never calls a model, and pending messages stay for the worker processes."""
        if self._closed:
            return
        self._closed = True
        if self._consolidation is not None:
            self._consolidation.stop(flush=None if self._runs_worker else False)
        self.store.close()

    def __enter__(self) -> "MemoryScope":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> "MemoryScope":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`: stops an asyncio worker task, then closes."""
        if self._consolidation is not None and self._worker_task is not None:
            await self._consolidation.astop()
            await self._worker_task
            self._worker_task = None
        await asyncio.to_thread(self.close)

    arecord = _async_twin(record)
    atool_stats = _async_twin(tool_stats)
    aprocedures = _async_twin(procedures)
    adelete_procedure = _async_twin(delete_procedure)
    aupdate_procedure = _async_twin(update_procedure)
    aexport_procedures = _async_twin(export_procedures)
    aimport_procedures = _async_twin(import_procedures)
    aadd = _async_twin(add)
    aretrieve = _async_twin(retrieve)
    awarm_up = _async_twin(warm_up)
    alist = _async_twin(list)
    acount = _async_twin(count)
    aget = _async_twin(get)
    aupdate = _async_twin(update)
    adelete = _async_twin(delete)
    adelete_all = _async_twin(delete_all)
    aexport = _async_twin(export)
    aimport_ = _async_twin(import_)
    aimport_with_ids = _async_twin(import_with_ids)
    aconsolidate = _async_twin(consolidate)
    areflect = _async_twin(reflect)
    aflush = _async_twin(flush)
    ausers = _async_twin(users)
    alegacy_users = _async_twin(legacy_users)
    arename_user = _async_twin(rename_user)
    aentities = _async_twin(entities)
    aentity = _async_twin(entity)
    arename_entity = _async_twin(rename_entity)
    aadd_alias = _async_twin(add_alias)
    amerge_entities = _async_twin(merge_entities)
    adelete_entity = _async_twin(delete_entity)
    aprofile = _async_twin(profile)
    aprofile_history = _async_twin(profile_history)
    aset_profile = _async_twin(set_profile)
    aremove_profile_value = _async_twin(remove_profile_value)


# -- helpers ----------------------------------------------------------------------------------------

@dataclasses.dataclass(slots=True)
class _UserNames:
    """One user's entities, their compiled matcher, and the speaker names found to be agents."""

    entities: builtins.list[Entity]
    matcher: person.NameMatcher
    read_at: float
    agents: set[str] = dataclasses.field(default_factory=set)


def _names_of(entities: Sequence[Entity]) -> builtins.list[tuple[str, str, tuple[str, ...]]]:
    return sorted((entity.id, entity.name, tuple(entity.aliases)) for entity in entities)


class _MatcherCache:
    """A `NameMatcher` per user, so `record` does not read the ledger and compile names every call.

    An entry is dropped by this engine's own ledger writes (`invalidate`) and read again after
    `MATCHER_TTL_S`, when another process (a consolidation worker) may have added entities; the
    least recently used users are dropped past `_MATCHER_USERS`."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._entries: dict[str, _UserNames] = {}

    def get(self, user_id: str) -> _UserNames:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.pop(user_id, None)
            if entry is not None and now - entry.read_at < MATCHER_TTL_S:
                self._entries[user_id] = entry  # most recently used last
                return entry
        entities = self._store.entities(user_id)
        if entry is not None and _names_of(entry.entities) == _names_of(entities):  # unchanged: no recompiling
            entry = _UserNames(entities, entry.matcher, now, entry.agents)
        else:
            entry = _UserNames(entities, person.NameMatcher(entities), now)
        with self._lock:
            self._entries[user_id] = entry
            while len(self._entries) > _MATCHER_USERS:
                del self._entries[next(iter(self._entries))]
        return entry

    def invalidate(self, user_id: str) -> None:
        with self._lock:
            self._entries.pop(user_id, None)
        ledger_cache.for_store(self._store).invalidate(user_id)  # retrieval's copy of the same names


def _default_speaker(role: str, user_id: str, agent_id: str) -> str:
    return user_id if role == "user" else agent_id


def _check_tools(value: Any) -> builtins.list[str]:
    """``tools`` of `retrieve`: None or a list of tool names (at most 50)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) > 50:
        raise ValidationError("tools must be a list of at most 50 tool names")
    for name in value:
        if not isinstance(name, str) or tool_calls.TOOL_NAME_PATTERN.fullmatch(name) is None:
            raise ValidationError(f"tools must hold tool names ({tool_calls.TOOL_NAME_RULE})")
    return list(dict.fromkeys(value))


def _check_kind(value: Any) -> EntityKind | None:
    if value is None or isinstance(value, EntityKind):
        return value
    if isinstance(value, str):
        try:
            return EntityKind(value.strip().lower())
        except ValueError:
            pass
    raise ValidationError(f"kind must be one of {', '.join(k.value for k in EntityKind)}, not {value!r}"[:300])


def _check_choice(value: Any, what: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(f"{what} must be one of {', '.join(choices)}, not {value!r}"[:300])
    return value


def _parse_time_arg(value: Any, what: str) -> datetime | None:
    return validation.check_time(value, what)


def _parse_range(value: Any) -> TimeRange | None:
    return validation.check_range(value)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, label: str, enabled: bool | None):
    """A tqdm bar on a terminal (or when asked); nothing otherwise."""
    import sys
    if enabled is None:
        enabled = sys.stderr.isatty() and total > 100
    if not enabled:
        return _NoBar()
    from tqdm import tqdm
    return tqdm(total=total, desc=label, unit="mem")


__all__ = ["MemoryScope", "detect_language"]
