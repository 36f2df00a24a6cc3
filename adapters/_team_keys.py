"""Each message of a team recorded once, however many of its agents have memory.

In a team (an AgentChat group chat, a classic AutoGen ``GroupChat``, an AgentScope hub...) every
member sees every message. When several members have memory for the same user, each would record
the human's words and each other's replies: the user's memories would hold every message once per
member, and consolidation would read it as many times. So an adapter gives each message it records
a *key*, the framework's identity of that message (AgentChat's and AgentScope's message ids, a
classic group chat's position and text), and every bridge over the same engine records a key once
per user: the first member to record it keeps it, the others leave it out.

Keys are scoped like retrieval: with ``scope_to_agent`` each agent reads only what it recorded
itself, so it records its own copy (the key is per agent then). The engine records each message
under its key (`message_key`, `MemoryScope.record`'s ``key``), and the store keeps a key once per
user: members of one team on several engine objects or in several processes over one store record
a message once too. Within a process the bridges of one engine also share the keys they record, so
that a member meeting a message another member is recording at that moment waits for that
recording (up to `WAIT_S`): when it fails, the message is free again and this member records it,
so deduplication never loses a message (a recording that hangs past the wait and then goes on finds
the message recorded, and the store keeps it once).
"""

from __future__ import annotations

import hashlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

#: The row field holding a message's key (the engine's ``key`` once `unrecorded` has made it durable).
KEY = "key"
#: Keys kept per engine (the oldest forgotten first: the store still keeps a forgotten key once), far
#: more than the messages a team has in flight; each holds an event, so not without bound.
MAX_KEYS = 4096


class _Entry:
    """A key being recorded (`done` unset), or whose recording ended (`done` set; `recorded`: it succeeded)."""

    __slots__ = ("done", "recorded")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.recorded = False


class _Keys:
    """The keys recorded through one engine, by (user, scope, key)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str | None, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, user_id: str, scope: str | None, keys: Sequence[str],
              force: bool = False) -> tuple[dict[str, _Entry], set[str], list[threading.Event]]:
        """(the keys this caller now records and must `finish`, the keys it records beside another
        caller (with `force`: that one's recording is under way), the recordings of others still
        under way that it waits for). A key recorded already is in none of them."""
        claimed: dict[str, _Entry] = {}
        beside: set[str] = set()
        waiting: list[threading.Event] = []
        with self._lock:
            for key in keys:
                if key in claimed or key in beside:
                    continue
                entry = self._seen.get((user_id, scope, key))
                if entry is None:
                    claimed[key] = self._seen[(user_id, scope, key)] = _Entry()
                elif entry.recorded:
                    self._seen.move_to_end((user_id, scope, key))
                elif force:
                    beside.add(key)
                else:
                    waiting.append(entry.done)
            while len(self._seen) > MAX_KEYS:
                _, evicted = self._seen.popitem(last=False)
                evicted.done.set()  # whoever waits for it asks again (the store keeps it once)
        return claimed, beside, waiting

    def finish(self, user_id: str, scope: str | None, entries: Mapping[str, _Entry], recorded: bool) -> None:
        """The recording of these keys ended: recorded, or failed (the keys are free again). An entry
        forgotten meanwhile (`MAX_KEYS`) is left to whoever claimed its key since."""
        with self._lock:
            for key, entry in entries.items():
                entry.recorded = recorded
                if not recorded and self._seen.get((user_id, scope, key)) is entry:
                    del self._seen[(user_id, scope, key)]
                entry.done.set()


_BY_ENGINE: weakref.WeakKeyDictionary[Any, _Keys] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()
#: How long a member waits for another member recording the same message before recording it too
#: (a duplicate rather than a message lost, should the other recording hang).
WAIT_S = 30.0


def _keys_of(engine: Any) -> _Keys:
    with _REGISTRY_LOCK:
        keys = _BY_ENGINE.get(engine)
        if keys is None:
            keys = _BY_ENGINE[engine] = _Keys()
        return keys


class Claim:
    """The keys one recording took: `finish` it with whether the recording succeeded. `waiting`:
    other members' recordings of some of these messages, under way (see `unrecorded`)."""

    def __init__(self, engine: Any, user_id: str, scope: str | None, entries: dict[str, _Entry],
                 waiting: list[threading.Event]) -> None:
        self._engine, self._user_id, self._scope, self._entries, self.waiting = (engine, user_id, scope, entries,
                                                                                 waiting)

    @property
    def keys(self) -> set[str]:
        """The keys this recording holds (none once finished)."""
        return set(self._entries)

    def finish(self, recorded: bool) -> None:
        if self._entries:
            _keys_of(self._engine).finish(self._user_id, self._scope, self._entries, recorded)
            self._entries = {}

    def wait(self, timeout: float = WAIT_S) -> bool:
        """Wait for the other members' recordings; False when one is still under way."""
        deadline = time.monotonic() + timeout
        return all(event.wait(max(0.0, deadline - time.monotonic())) for event in self.waiting)


def text_key(*parts: object) -> str:
    """A key from a message's place (`parts`, the last one its text): the text as a digest, so a key
    names no content."""
    *place, text = parts
    digest = hashlib.sha256(str(text).strip().encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return ":".join([*map(str, place), digest])


def ids_key(framework: str, messages: Sequence[Any]) -> str | None:
    """The key of the text these messages make together, from their ``id`` attributes (the
    framework gives every copy of a message the same id); None without messages, or when one of
    them has no id."""
    ids: list[str] = []
    for message in messages:
        identity = getattr(message, "id", None)
        if not isinstance(identity, str) or not identity:
            return None
        ids.append(identity)
    return f"{framework}:{','.join(ids)}" if ids else None


def unrecorded(engine: Any, user_id: str, scope: str | None, rows: Sequence[Mapping[str, Any]], *,
               force: bool = False) -> tuple[list[dict[str, Any]], Claim]:
    """`rows` without those whose key a member recorded already for this user and scope (a key
    twice in `rows` is one message, kept once), each row's key made the one the engine records it
    under (`message_key`); and the claim of the keys kept. A row another member is recording at
    this moment is left out too, and the claim says so (`Claim.waiting`): the caller waits for it
    (`Claim.wait`), then asks again, since a recording that failed gives its messages back; with
    `force` (the wait timed out) such a row is kept."""
    keyed: list[dict[str, Any]] = [
        dict(row, **{KEY: message_key(scope, row[KEY], row.get("content"))}) if isinstance(row.get(KEY), str)
        else {k: v for k, v in row.items() if k != KEY} for row in rows]
    keys = [row[KEY] for row in keyed if KEY in row]
    claimed, beside, waiting = _keys_of(engine).claim(user_id, scope, keys, force) if keys else ({}, set(), [])
    pending = set(claimed) | beside
    kept: list[dict[str, Any]] = []
    for row in keyed:
        key = row.get(KEY)
        if key is not None:
            if key not in pending:
                continue  # recorded, being recorded by a member, or it came before in these rows
            pending.discard(key)
        kept.append(row)
    return kept, Claim(engine, user_id, scope, claimed, waiting)


def message_key(scope: str | None, key: str, content: Any) -> str:
    """The key the engine records a message under (`MemoryScope.record`'s ``key``: once per user, in
    the store, so members in other processes record it once too): the framework's key with the
    scope (an agent keeping its own copy) and the text, as a digest. Two messages meet only if the
    framework gave them the same id and they say the same words."""
    digest = hashlib.sha256(f"{scope or ''}\x00{key}\x00{content}".encode("utf-8", "surrogatepass"))
    return "team:" + digest.hexdigest()[:40]
