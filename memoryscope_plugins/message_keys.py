"""Idempotent recording: a message's key (the caller's own id of it) names it once per user.

A caller that may deliver a message more than once (an HTTP client retrying after a timeout, a
framework hook that runs again, several agents of one team in several processes, each with memory
for the same user) gives each message a ``key``: its id in the caller's world (a chat message id).
The message's id in the store (and its turn memory's) is then derived from the user and the key,
so the store's own uniqueness of ids decides, in the write's transaction, that a key is recorded
once per user, whichever process records it first. Recording it again records nothing and returns
the same id.

The id is a digest: a key names no content in the store, and one user's keys never meet another's.
A key is the caller's promise that it names one message for that user, whatever the conversation:
ids that start again in each chat ("1", "2"...) need the chat's id in the key.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from .errors import ValidationError
from .types import Message

#: The longest key accepted (a framework's message id, or a few of them joined, fits easily).
MAX_KEY_CHARS = 512


def check_key(value: Any, what: str) -> str | None:
    """A message's key: None (no key), or a non-blank string of at most `MAX_KEY_CHARS` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string")
    if not value.strip():
        raise ValidationError(f"{what} must not be blank")
    if len(value) > MAX_KEY_CHARS:
        raise ValidationError(f"{what} is longer than {MAX_KEY_CHARS} characters")
    return value


def keyed_id(user_id: str, key: str) -> str:
    """The id of the message `key` names for `user_id` (32 hexadecimal digits, like a new id)."""
    digest = hashlib.sha256(f"{user_id}\x00{key}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


def first_of_each_key(messages: Sequence[Message], ids: Sequence[str]) -> list[int]:
    """The positions of the messages to write: each message without a key, and the first of
    those sharing a key (the others are the same message again); `ValidationError` when a key
    comes back with other words, speaker, role or tool call (two messages under one key: one
    would be lost)."""
    first: dict[str, int] = {}
    kept: list[int] = []
    for position, (message, message_id) in enumerate(zip(messages, ids)):
        if message.key is not None:
            earlier = first.get(message_id)
            if earlier is not None:
                if _said(messages[earlier]) != _said(message):
                    raise ValidationError(f"message {position} has the key of message {earlier} but is "
                                          "another message")
                continue
            first[message_id] = position
        kept.append(position)
    return kept


def _said(message: Message) -> tuple[object, ...]:
    return message.role, message.name, message.content, message.tool_call
