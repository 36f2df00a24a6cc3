"""The message log's states, shared by every backend: a logged message is `PENDING` until
consolidation is done with it (`DONE`) or gave up on it (`FAILED`, which counts an attempt)."""

from __future__ import annotations

from typing import Any, Mapping

PENDING = "pending"
DONE = "done"
FAILED = "failed"
MESSAGE_STATES = (PENDING, DONE, FAILED)

#: A deleted turn's message stays in the log without its words (its id, and so its `key`, stay
#: taken: a retry of that key records nothing), done, with this metadata; no reader uses its text.
FORGOTTEN = "forgotten"
FORGOTTEN_METADATA = '{"forgotten": true}'


def is_forgotten(content: str, metadata: Mapping[str, Any]) -> bool:
    """Whether a logged message is forgotten (its turn was deleted): no words and the marker (no
    recorded message has empty text, so no caller's metadata can make one look forgotten)."""
    return content == "" and metadata.get(FORGOTTEN) is True


def check_state(state: str) -> str:
    """`state` when it is a message state; `ValueError` otherwise."""
    if state not in MESSAGE_STATES:
        raise ValueError(f"unknown message state {state!r}")
    return state
