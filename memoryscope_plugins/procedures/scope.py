"""Where an agent's procedures live, and what marks a finished run for learning.

Procedures are the agent's, never a person's: the store keeps them under a reserved user id,
``~procedures~<team>:<agent>``, that no person's id may take (`validation.RESERVED_USER_PREFIX`), so
no user's `list`, `retrieve` or `export` reaches them. The team is the part of the user id before
its first ``:`` (the server's tenant), or empty: a run of tenant A never teaches tenant B's agent.

A run ends when `record` is given ``run_outcome``: a *run marker* is then logged, pending, under the
scope. It holds only references (the user, the session, the position of the run's last message, the
outcome and the procedures the application says it followed); the step reads the run itself from
the user's log when it runs, so a user deleted meanwhile leaves nothing to learn from.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ValidationError
from ..validation import MAX_ID_CHARS, RESERVED_USER_PREFIX

OUTCOMES = ("succeeded", "failed", "unknown")
MARKER_KIND = "procedure_run"
MAX_USED = 20


def team_of(user_id: str) -> str:
    """The team (tenant) part of a user id: what comes before its first ``:``, or ""."""
    return user_id.split(":", 1)[0] if ":" in user_id else ""


def procedure_scope(user_id: str, agent_id: str) -> str:
    """The store's user id under which ``agent_id``'s procedures for the user's team are kept."""
    scope = f"{RESERVED_USER_PREFIX}{team_of(user_id)}:{agent_id}"
    if len(scope) > MAX_ID_CHARS:  # a long agent id: a stable digest keeps the key within the id rule
        digest = uuid.uuid5(uuid.NAMESPACE_URL, f"{team_of(user_id)}:{agent_id}").hex
        scope = f"{RESERVED_USER_PREFIX}{team_of(user_id)[:64]}:#{digest}"
    return scope


def is_scope(user_id: str) -> bool:
    """Whether a store user id is an agent's procedure scope."""
    return user_id.startswith(RESERVED_USER_PREFIX)


@dataclass(slots=True)
class RunMarker:
    """A finished run to learn from (see the module docstring)."""

    user_id: str
    agent_id: str
    last_seq: int
    outcome: str = "unknown"
    session_id: str | None = None
    used: list[str] = field(default_factory=list)  # the ids of the procedures the run followed

    def to_text(self) -> str:
        return json.dumps({"kind": MARKER_KIND, "user_id": self.user_id, "agent_id": self.agent_id,
                           "last_seq": self.last_seq, "outcome": self.outcome, "session_id": self.session_id,
                           "used": list(self.used)}, ensure_ascii=False, sort_keys=True)


def parse_marker(text: str) -> RunMarker | None:
    """The marker a scope's logged message holds, or None when it holds none."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("kind") != MARKER_KIND:
        return None
    try:
        return RunMarker(user_id=str(data["user_id"]), agent_id=str(data["agent_id"]), last_seq=int(data["last_seq"]),
                         outcome=str(data.get("outcome", "unknown")), session_id=data.get("session_id"),
                         used=[str(i) for i in data.get("used") or []])
    except (KeyError, TypeError, ValueError):
        return None


def check_outcome(value: Any) -> str | None:
    """``run_outcome`` of `record`: None (the run goes on) or one of `OUTCOMES`."""
    if value is None:
        return None
    if value not in OUTCOMES:
        raise ValidationError(f"run_outcome must be one of {OUTCOMES} or None")
    return str(value)


def check_used(value: Any, outcome: str | None) -> list[str]:
    """``procedures_used`` of `record`: the ids of retrieved procedures the run followed."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValidationError("procedures_used must be a list of procedure ids")
    if value and outcome is None:
        raise ValidationError("procedures_used needs run_outcome (it is counted when the run ends)")
    if len(value) > MAX_USED:
        raise ValidationError(f"procedures_used holds at most {MAX_USED} ids")
    ids = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_ID_CHARS:
            raise ValidationError("procedures_used must hold procedure ids (non-empty strings)")
        ids.append(item)
    return list(dict.fromkeys(ids))
