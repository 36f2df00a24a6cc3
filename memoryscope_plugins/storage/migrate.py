"""Moving a whole store to another store: every user, memory (every status, with its links and
metadata), vector as stored, logged message with its state, and the entity ledger and profile,
between any two backends.

    from memoryscope_plugins.storage.migrate import migrate
    report = migrate("memory.db", "postgresql://me:secret@db/memoryscope")

Stores are named by URL (`open_url`): a SQLite file path or ``sqlite:///path``,
``postgresql://...`` (or ``postgres://``), ``http(s)://...`` for Elasticsearch; a fragment
``#name`` sets the table or index prefix (`StoreSettings.index_prefix`).

A PostgreSQL store keeps the table layout it was created with (`StoreSettings.partitions`); a
copy moves it into the other one: ``migrate(src, dst, partitions=8)`` creates the target's tables
with 8 partitions by user (0: unpartitioned), and the source is read in whatever layout it has.

The copy goes user by user (sorted ids; every user with anything stored, `StoreBase.stored_users`:
a user with only a profile or an entity ledger too) and batch by batch in insertion order, through the
target's ordinary writes (`put` with vectors, `copy_messages`), so its indexes are built as for
any write; a target with a `bulk_load()` (PostgreSQL) is written inside it, so its vector indexes
are built once at the end rather than grown one row at a time. A user's ledger follows their
messages (`put_ledger`: entities, then mentions, then profile values, in batches). After every
batch a progress marker is written to the target's meta; a rerun with ``resume=True`` continues
from it. Memories are put by id (a batch written again replaces itself), messages already in the
target are skipped by id and ledger items are upserted by id, so an interrupted run and its rerun
copy every record exactly once. Nothing is re-embedded: a vector is copied with the name of the
model that made it; an engine opened on the target with another embedding model re-embeds those
memories, as it does after any change of model.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..errors import ConfigError, MemoryScopeError, ValidationError
from ..log_hygiene import without_password
from ..settings import MAX_PARTITIONS
from ..types import Memory, MemoryStatus
from ..validation import check_int
from .base import LedgerChanges, MemoryFilter, StoredMessage
from .core import StoreBase
from .messages import MESSAGE_STATES

MARKER_KEY = "migration"
BATCH_SIZES = (1, 100_000)  # memories, messages or ledger items per write (and per read)
SAMPLES = (0, 1_000_000)  # memories per user compared field by field at the end
_CLEAR = np.zeros(0, dtype=np.float32)  # a put row that leaves a memory without a vector


class MigrationError(MemoryScopeError):
    """The migration cannot start (a non-empty target, an unfinished migration to resume)."""


# -- naming stores -------------------------------------------------------------------------------
def settings_for_url(url: str, *, partitions: int | None = None):
    """The `StoreSettings` a store URL names (see the module docstring for the forms), with the
    PostgreSQL table layout `partitions` (None: the store's own; see `StoreSettings.partitions`)."""
    from ..settings import StoreSettings
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    extra: dict[str, object] = {"index_prefix": parts.fragment} if parts.fragment else {}
    if partitions is not None:
        if scheme not in ("postgresql", "postgres") and partitions:
            raise ValidationError(f"partitions apply to a PostgreSQL store only, not {describe_url(url)}")
        extra["partitions"] = partitions
    bare = urlunsplit(parts._replace(fragment=""))
    if scheme in ("postgresql", "postgres"):
        return StoreSettings(backend="postgres", url=bare, **extra)
    if scheme in ("http", "https"):
        return StoreSettings(backend="elasticsearch", url=bare, **extra)
    if scheme == "sqlite":
        return StoreSettings(backend="sqlite", path=Path(parts.path), partitions=extra.get("partitions"))
    if scheme and len(scheme) > 1:  # one letter: a Windows drive
        raise ConfigError(f"unknown store URL scheme {scheme!r}: use a SQLite file path or sqlite:///path, "
                          "postgresql://..., or http(s)://... for Elasticsearch")
    return StoreSettings(backend="sqlite", path=Path(url), partitions=extra.get("partitions"))


def _store_url(value: object, what: str) -> str:
    """A store URL given as a string or a path, as a non-blank string."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a store URL or a SQLite file path (a non-blank string or a path)")
    return value


def describe_url(url: str) -> str:
    """The URL without its password, for messages and the progress marker."""
    return without_password(url)


def open_url(url: str, *, must_exist: bool = False, partitions: int | None = None) -> StoreBase:
    """Open the store `url` names (with `must_exist`, a SQLite file must already be there; with
    `partitions`, a new PostgreSQL store gets that layout and an existing one must have it)."""
    from .registry import build_store, check_store_exists
    cfg = settings_for_url(url, partitions=partitions)
    if must_exist:
        check_store_exists(cfg)
    store = build_store(cfg)
    if not isinstance(store, StoreBase):
        raise ConfigError(f"the {cfg.backend} store cannot be migrated (not a StoreBase)")
    return store


# -- what a store holds ------------------------------------------------------------------------------
@dataclass
class UserCounts:
    """One user's records: memories by status, messages by state, memories with a vector by model,
    and the ledger's entities, mentions and profile values."""

    memories: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    vectors: dict[str, int] = field(default_factory=dict)
    ledger: dict[str, int] = field(default_factory=dict)


def count_user(store: StoreBase, user_id: str, batch_size: int = 1000) -> UserCounts:
    """What `store` holds of one user (memory counts from `count`, the rest by reading)."""
    out = UserCounts()
    for status in MemoryStatus:
        out.memories[status.value] = store.count(user_id, MemoryFilter(statuses=(status,)))
    states: Counter[str] = Counter()
    for logged in store.iter_messages(user_id, batch_size):
        states.update(m.state for m in logged)
    out.messages = {state: states[state] for state in MESSAGE_STATES}
    models: Counter[str] = Counter()
    for batch in store.iter_memories(user_id, batch_size):
        models.update(m.embedding_model for m in batch if m.embedding_model)
    out.vectors = dict(models)
    out.ledger = {"entities": len(store.entities(user_id)), "mentions": len(store.mentions(user_id)),
                  "profile": len(store.profile_values(user_id))}
    return out


# -- the copy ------------------------------------------------------------------------------------
@dataclass
class Progress:
    """Where a migration is, as kept in the target's meta under `MARKER_KEY`."""

    source: str
    user: str | None = None  # the user being copied; users sorted before it are done
    phase: str = "memories"  # then "messages", then "ledger"
    after: int = 0  # the source position of the last memory copied of `user`
    finished: bool = False
    batches: int = 0  # batches written so far, over every run

    def dump(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def load(cls, raw: str | None) -> Progress | None:
        return None if raw is None else cls(**json.loads(raw))


@dataclass
class MigrationReport:
    """What a run copied and what verification found (`mismatches` empty: the stores agree)."""

    source: str
    target: str
    dry_run: bool = False
    resumed: bool = False
    users: int = 0
    memories: int = 0
    vectors: int = 0
    messages: int = 0
    ledger: int = 0  # entities, mentions and profile values
    seconds: float = 0.0
    source_models: dict[str, int] = field(default_factory=dict)
    counts: dict[str, UserCounts] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)


def _put_batch(target: StoreBase, batch: Sequence[Memory], vectors: dict[str, np.ndarray]) -> None:
    """Put one batch with its vectors as stored, each labelled with the model that made it."""
    kept_model = target.embedding_model
    groups: dict[str | None, list[Memory]] = {}
    for memory in batch:
        groups.setdefault(memory.embedding_model if memory.id in vectors else None, []).append(memory)
    try:
        for model, group in groups.items():
            target.embedding_model = model
            target.put(group, [vectors[m.id] if model is not None else _CLEAR for m in group])
    finally:
        target.embedding_model = kept_model


def survey(store: StoreBase, report: MigrationReport, batch_size: int = 1000) -> MigrationReport:
    """Fill `report` with what `store` holds, per user and in total (what a dry run prints)."""
    for user_id in sorted(store.stored_users()):
        counts = count_user(store, user_id, batch_size)
        report.counts[user_id] = counts
        report.memories += sum(counts.memories.values())
        report.messages += sum(counts.messages.values())
        report.vectors += sum(counts.vectors.values())
        report.ledger += sum(counts.ledger.values())
        for model, n in counts.vectors.items():
            report.source_models[model] = report.source_models.get(model, 0) + n
    report.users = len(report.counts)
    return report


class Migration:
    """One migration from `source` to `target` (open stores); `run` copies, `verify` compares.

    `on_batch(progress)` is called after every batch written and its marker saved: the command
    line prints progress with it; raising from it stops the run there (as a kill would)."""

    def __init__(self, source: StoreBase, target: StoreBase, *, source_label: str, target_label: str,
                 batch_size: int = 500, on_batch: Callable[[Progress], None] | None = None) -> None:
        self.source, self.target = source, target
        self.report = MigrationReport(source=source_label, target=target_label)
        self.batch_size = check_int(batch_size, "batch_size", *BATCH_SIZES)
        self.on_batch = on_batch

    # -- starting -----------------------------------------------------------------------------
    def start(self, *, force: bool = False, resume: bool = False) -> Progress:
        """The progress to start from; `MigrationError` when the target may not be written."""
        marker = Progress.load(self.target.get_meta(MARKER_KEY))
        if marker is not None and not marker.finished:
            if not (resume or force):
                raise MigrationError(f"the target holds an unfinished migration from {marker.source}: "
                                     "run again with --resume to continue it (or --force)")
            if marker.source != self.report.source and not force:
                raise MigrationError(f"the target's unfinished migration came from {marker.source}, "
                                     f"not {self.report.source}: use --force to copy into it anyway")
            self.report.resumed = True
            return marker
        if self.target.stored_users() and not force:
            raise MigrationError(f"the target {self.report.target} already holds memories, messages or a "
                                 "user's entities or profile: use --force to copy into it anyway")
        return Progress(source=self.report.source)

    def _save(self, progress: Progress) -> None:
        progress.batches += 1
        self.target.set_meta(MARKER_KEY, progress.dump())
        if self.on_batch is not None:
            self.on_batch(progress)

    # -- copying ------------------------------------------------------------------------------
    def run(self, progress: Progress) -> MigrationReport:
        """Copy everything not yet copied after `progress`; the marker says finished at the end."""
        began = time.monotonic()
        users = sorted(self.source.stored_users())  # users with only a ledger or a profile too
        todo = [u for u in users if progress.user is None or u >= progress.user]
        self.report.users = len(users)
        for user_id in todo:
            if progress.user != user_id:
                progress.user, progress.phase, progress.after = user_id, "memories", 0
            if progress.phase == "memories":
                self._copy_memories(user_id, progress)
                progress.phase, progress.after = "messages", 0
            if progress.phase == "messages":
                self._copy_messages(user_id, progress)
                progress.phase = "ledger"
            self._copy_ledger(user_id, progress)
        progress.finished = True
        self.target.set_meta(MARKER_KEY, progress.dump())
        self.report.seconds = time.monotonic() - began
        return self.report

    def _copy_memories(self, user_id: str, progress: Progress) -> None:
        for position, batch in self.source.memory_pages(user_id, after=progress.after, batch_size=self.batch_size):
            vectors = self.source.vectors_of(user_id, [m.id for m in batch])
            _put_batch(self.target, batch, vectors)
            self.report.memories += len(batch)
            self.report.vectors += len(vectors)
            progress.after = position
            self._save(progress)

    def _copy_messages(self, user_id: str, progress: Progress) -> None:
        there = {m.id for batch in self.target.iter_messages(user_id, self.batch_size) for m in batch}
        for batch in self.source.iter_messages(user_id, self.batch_size):
            missing = [m for m in batch if m.id not in there]
            if missing:
                self.target.copy_messages(missing)
                self.report.messages += len(missing)
                self._save(progress)

    def _copy_ledger(self, user_id: str, progress: Progress) -> None:
        """Entities first (mentions name them), then mentions, then profile values; upserts by id,
        so a batch copied again after an interruption replaces itself."""
        size = self.batch_size
        entities, mentions = self.source.entities(user_id), self.source.mentions(user_id)
        profile = self.source.profile_values(user_id)
        batches = [*(LedgerChanges(user_id, entities=entities[i:i + size]) for i in range(0, len(entities), size)),
                   *(LedgerChanges(user_id, mentions=mentions[i:i + size]) for i in range(0, len(mentions), size)),
                   *(LedgerChanges(user_id, profile=profile[i:i + size]) for i in range(0, len(profile), size))]
        for batch in batches:
            self.target.put_ledger(batch)
            self.report.ledger += len(batch.entities) + len(batch.mentions) + len(batch.profile)
            self._save(progress)

    # -- verifying -----------------------------------------------------------------------------
    def verify(self, *, sample: int = 5, seed: int = 0) -> list[str]:
        """Compare the stores: users, each user's counts, and `sample` random memories per user
        field by field with their vectors; returns the mismatches found (also in the report)."""
        check_int(sample, "sample", *SAMPLES)
        rng = random.Random(seed)
        found: list[str] = []
        source_users, target_users = sorted(self.source.stored_users()), set(self.target.stored_users())
        found += [f"user {u!r} is missing from the target" for u in source_users if u not in target_users]
        for user_id in source_users:
            mine, theirs = count_user(self.source, user_id), count_user(self.target, user_id)
            self.report.counts[user_id] = mine
            for model, n in mine.vectors.items():
                self.report.source_models[model] = self.report.source_models.get(model, 0) + n
            for what in ("memories", "messages", "vectors", "ledger"):
                if getattr(mine, what) != getattr(theirs, what):
                    found.append(f"user {user_id!r}: {what} {getattr(mine, what)} in the source, "
                                 f"{getattr(theirs, what)} in the target")
            found += self._compare_messages(user_id)
            found += self._compare_ledger(user_id)
            ids = [m.id for batch in self.source.iter_memories(user_id, self.batch_size) for m in batch]
            found += self._compare_memories(user_id, rng.sample(ids, min(sample, len(ids))))
        self.report.mismatches = found
        return found

    def _compare_messages(self, user_id: str) -> list[str]:
        def log(store: StoreBase) -> list[tuple[str, str, StoredMessage]]:
            return [(m.id, m.state, m) for batch in store.iter_messages(user_id, self.batch_size) for m in batch]
        mine, theirs = log(self.source), log(self.target)
        if [(i, s) for i, s, _ in mine] != [(i, s) for i, s, _ in theirs]:
            return [f"user {user_id!r}: the message logs differ (ids, order or states)"]
        for (message_id, _, a), (_, _, b) in zip(mine, theirs):
            if (a.agent_id, a.session_id, a.message) != (b.agent_id, b.session_id, b.message):
                return [f"user {user_id!r}: message {message_id!r} differs"]
        return []

    def _compare_ledger(self, user_id: str) -> list[str]:
        def ledger(store: StoreBase) -> tuple[list, list, list]:
            # the stored fields of the entities (their figures are computed, to the store's precision)
            entities = [(e.id, e.name, e.kind, e.aliases, e.created_at, e.updated_at, e.metadata, e.mention_count)
                        for e in store.entities(user_id)]
            return entities, store.mentions(user_id), store.profile_values(user_id)
        mine, theirs = ledger(self.source), ledger(self.target)
        return [f"user {user_id!r}: the {what} differ" for what, a, b in
                zip(("entities", "mentions", "profile values"), mine, theirs) if a != b]

    def _compare_memories(self, user_id: str, ids: list[str]) -> list[str]:
        found: list[str] = []
        mine = {m.id: m for m in self.source.get(user_id, ids)}
        theirs = {m.id: m for m in self.target.get(user_id, ids)}
        my_vectors, their_vectors = self.source.vectors_of(user_id, ids), self.target.vectors_of(user_id, ids)
        for memory_id in ids:
            if memory_id not in theirs:
                found.append(f"memory {memory_id!r} of {user_id!r} is missing from the target")
                continue
            found += [f"memory {memory_id!r} of {user_id!r}: {name} differs"
                      for name in differing_fields(mine[memory_id], theirs[memory_id])]
            if not same_vector(my_vectors.get(memory_id), their_vectors.get(memory_id)):
                found.append(f"memory {memory_id!r} of {user_id!r}: vector differs")
        return found


def differing_fields(a: Memory, b: Memory) -> list[str]:
    """The fields in which two memories differ (times also by their UTC offset)."""
    out = []
    for f in fields(Memory):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if va != vb or (isinstance(va, datetime) and isinstance(vb, datetime) and va.utcoffset() != vb.utcoffset()):
            out.append(f.name)
    return out


def same_vector(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both missing, or equal; a store that keeps half precision (SQLite) holds a copied vector at
    that precision, so equal after rounding both to float16 counts as equal."""
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b) or np.array_equal(a.astype(np.float16), b.astype(np.float16)))


def migrate(source_url: str | os.PathLike[str], target_url: str | os.PathLike[str], *, dry_run: bool = False,
            force: bool = False, resume: bool = False, batch_size: int = 500, sample: int = 5,
            on_batch: Callable[[Progress], None] | None = None, partitions: int | None = None) -> MigrationReport:
    """Copy the store at `source_url` into the one at `target_url` and verify it (see the module
    docstring); with `dry_run`, only count what would be copied. `MigrationError` when the target
    holds data (unless `force`) or an unfinished migration (unless `resume`); `ValidationError`, before
    either store is opened, for a `batch_size` outside `BATCH_SIZES`, a `sample` outside `SAMPLES` or a
    URL that is not a string or a path, or `partitions` (the layout of a PostgreSQL target's new tables, see
    the module docstring) outside 0 to `MAX_PARTITIONS` or with a target that is not PostgreSQL."""
    source_url, target_url = _store_url(source_url, "source_url"), _store_url(target_url, "target_url")
    check_int(batch_size, "batch_size", *BATCH_SIZES)
    check_int(sample, "sample", *SAMPLES)
    if partitions is not None:
        check_int(partitions, "partitions", 0, MAX_PARTITIONS)
        settings_for_url(target_url, partitions=partitions)  # a PostgreSQL target, before anything is opened
    source_label, target_label = describe_url(source_url), describe_url(target_url)
    with open_url(source_url, must_exist=True) as source:
        if dry_run:  # the target is not even opened: opening creates a SQLite file or tables
            return survey(source, MigrationReport(source_label, target_label, dry_run=True), batch_size)
        with open_url(target_url, partitions=partitions) as target:
            migration = Migration(source, target, source_label=source_label, target_label=target_label,
                                  batch_size=batch_size, on_batch=on_batch)
            progress = migration.start(force=force, resume=resume)
            bulk = getattr(target, "bulk_load", None)
            with bulk() if bulk is not None else contextlib.nullcontext():
                report = migration.run(progress)
            migration.verify(sample=sample)
            return report
