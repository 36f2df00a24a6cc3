"""Each message of a team recorded once, however many of its agents have memory.

In a team (an AgentChat group chat, a classic AutoGen ``GroupChat``, an AgentScope hub...) every
member sees every message. When several members have memory for the same user, each would record
the human's words and each other's replies: the user's memories would hold every message once per
member, and consolidation would read it as many times. So an adapter gives each message it records
a *key*, the framework's identity of that message (AgentChat's and AgentScope's message ids, a
classic group chat's position and text), and every bridge over the same engine records a key once
per user: the first member to record it keeps it, the others leave it out.

Keys are scoped like retrieval: with ``scope_to_agent`` each agent reads only what it recorded
itself, so it records its own copy (the key is per agent then). They live in this process (one
engine object), as the team does; agents of one team in several processes each record theirs.
A key whose recording failed is released, so the next member records the message after all.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: The row field holding a message's key; removed before the engine sees the row.
KEY = "key"
#: Keys kept per engine (the oldest forgotten first): far more than a team's messages in flight.
MAX_KEYS = 20_000


class _Keys:
    """The keys recorded through one engine, by (user, scope, key)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, str | None, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, user_id: str, scope: str | None, keys: Sequence[str]) -> set[str]:
        """The keys among `keys` not recorded yet, now marked recorded."""
        claimed: set[str] = set()
        with self._lock:
            for key in keys:
                entry = (user_id, scope, key)
                if entry in self._seen:
                    self._seen.move_to_end(entry)
                    continue
                self._seen[entry] = None
                claimed.add(key)
            while len(self._seen) > MAX_KEYS:
                self._seen.popitem(last=False)
        return claimed

    def release(self, user_id: str, scope: str | None, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._seen.pop((user_id, scope, key), None)


_BY_ENGINE: weakref.WeakKeyDictionary[Any, _Keys] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def _keys_of(engine: Any) -> _Keys:
    with _REGISTRY_LOCK:
        keys = _BY_ENGINE.get(engine)
        if keys is None:
            keys = _BY_ENGINE[engine] = _Keys()
        return keys


class Claim:
    """The keys one recording took; `release` them when the recording failed."""

    def __init__(self, engine: Any, user_id: str, scope: str | None, keys: set[str]) -> None:
        self._engine, self._user_id, self._scope, self.keys = engine, user_id, scope, keys

    def release(self) -> None:
        if self.keys:
            _keys_of(self._engine).release(self._user_id, self._scope, self.keys)
            self.keys = set()


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


def unrecorded(engine: Any, user_id: str, scope: str | None,
               rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], Claim]:
    """`rows` without those whose key a member recorded already for this user and scope (a key
    twice in `rows` is one message, kept once), each row without its key; and the keys claimed."""
    keys = [row[KEY] for row in rows if isinstance(row.get(KEY), str)]
    claimed = _keys_of(engine).claim(user_id, scope, keys) if keys else set()
    pending = set(claimed)
    kept: list[dict[str, Any]] = []
    for row in rows:
        key = row.get(KEY)
        if isinstance(key, str):
            if key not in pending:
                continue  # a member recorded it, or it came before in these rows
            pending.discard(key)
        kept.append({k: v for k, v in row.items() if k != KEY})
    return kept, Claim(engine, user_id, scope, claimed)
