"""The message log's states, shared by every backend: a logged message is `PENDING` until
consolidation is done with it (`DONE`) or gave up on it (`FAILED`, which counts an attempt)."""

from __future__ import annotations

PENDING = "pending"
DONE = "done"
FAILED = "failed"
MESSAGE_STATES = (PENDING, DONE, FAILED)


def check_state(state: str) -> str:
    """`state` when it is a message state; `ValueError` otherwise."""
    if state not in MESSAGE_STATES:
        raise ValueError(f"unknown message state {state!r}")
    return state
